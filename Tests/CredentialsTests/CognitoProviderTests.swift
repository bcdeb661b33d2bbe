import Config
import Foundation
import TestSupport
import Testing

@testable import Credentials

/// What `Tests/servers/moto_cognito.py` set up.
private struct MotoPool: Decodable, Sendable {
    var endpoint: String
    var region: String
    var client_id: String
    var secret_client_id: String
    var client_secret: String
    var username: String
    var password: String
    var new_password_user: String
    var new_password_password: String
    var email_client_id: String
    var email: String
    var email_password: String
    var email_pool_username: String
}

/// One moto server for the whole test process (it takes seconds to start); it leaves when the
/// test process does.
private final class Moto: Sendable {
    let server: PythonServer
    let folder: TempDir
    let pool: MotoPool

    private init() throws {
        folder = try TempDir(prefix: "tokenproxy-moto")
        let infoFile = folder.file("pool.json")
        server = try PythonServer("moto_cognito", arguments: ["--info-file", infoFile], startupTimeout: 120)
        pool = try JSONDecoder().decode(MotoPool.self, from: Data(contentsOf: URL(fileURLWithPath: infoFile)))
    }

    private static let started = Result { try Moto() }
    static func shared() throws -> Moto { try started.get() }
}

private func cognito(
    endpoint: String, clientID: String, secret: String? = nil, useToken: CredentialsConfiguration.CognitoTokenUse = .access
) throws -> CognitoProvider {
    var credentials = CognitoConfiguration(clientID: clientID, endpoint: endpoint)
    credentials.clientSecret = secret.map { Secret(value: $0, origin: .literal) }
    credentials.useToken = useToken
    return try CognitoProvider(credentials)
}

private func login(_ provider: CognitoProvider, _ username: String, _ password: String) throws -> IssuedToken {
    try provider.login(.password(username: username, password: password), prompt: { _ in })
}

/// The session the store would keep after `token`.
private func session(after token: IssuedToken, refreshToken: String? = nil) -> StoredSession {
    var session = StoredSession(kind: "cognito")
    session.accessToken = token.accessToken
    session.refreshToken = refreshToken ?? token.refreshToken
    session.username = token.username
    return session
}

/// A claim of a JWT's payload, read without the JWT type's limits.
private func claim(_ name: String, of token: String) -> JSONValue? {
    let parts = token.split(separator: ".", omittingEmptySubsequences: false)
    guard parts.count == 3, let payload = JWT.base64URLDecode(parts[1]) else { return nil }
    return JSONValue.parse(Array(payload))?[name]
}

@Suite struct CognitoProviderTests {
    // MARK: Against moto

    @Test func loginGivesAJWTWithExpiryAndThePoolsUsername() throws {
        let moto = try Moto.shared()
        let provider = try cognito(endpoint: moto.pool.endpoint, clientID: moto.pool.client_id)
        let token = try login(provider, moto.pool.username, moto.pool.password)
        let claims = try #require(JWT.claims(of: token.accessToken))
        let expiresAt = try #require(claims.expiresAt)
        #expect(expiresAt > Date().timeIntervalSince1970 + 3000)
        #expect(claim("token_use", of: token.accessToken) == .string("access"))
        #expect(token.expiresIn == 3600)
        #expect(token.refreshToken?.isEmpty == false)
        #expect(token.username == moto.pool.username)
        #expect(token.serverDate != nil)
    }

    @Test func refreshGivesANewAccessTokenAndNoNewRefreshToken() throws {
        let moto = try Moto.shared()
        let provider = try cognito(endpoint: moto.pool.endpoint, clientID: moto.pool.client_id)
        let first = try login(provider, moto.pool.username, moto.pool.password)
        let second = try provider.refresh(session(after: first))
        #expect(second.accessToken != first.accessToken)
        #expect(JWT.expiry(of: second.accessToken) != nil)
        #expect(second.refreshToken == nil)
        #expect(second.expiresIn == 3600)
        #expect(second.username == moto.pool.username)
        // The old refresh token stays good (the caller keeps it).
        _ = try provider.refresh(session(after: second, refreshToken: first.refreshToken))
    }

    @Test func aClientWithASecretLogsInAndRefreshesWithSecretHash() throws {
        let moto = try Moto.shared()
        let provider = try cognito(
            endpoint: moto.pool.endpoint, clientID: moto.pool.secret_client_id, secret: moto.pool.client_secret
        )
        let first = try login(provider, moto.pool.username, moto.pool.password)
        #expect(first.username == moto.pool.username)
        let second = try provider.refresh(session(after: first))
        #expect(JWT.expiry(of: second.accessToken) != nil)
        #expect(second.refreshToken == nil)
    }

    @Test func withoutAStoredUsernameTheRefreshFallsBackToTheTokensUsernameClaim() throws {
        let moto = try Moto.shared()
        let provider = try cognito(
            endpoint: moto.pool.endpoint, clientID: moto.pool.secret_client_id, secret: moto.pool.client_secret
        )
        let first = try login(provider, moto.pool.username, moto.pool.password)
        var stored = session(after: first)
        stored.username = nil
        let second = try provider.refresh(stored)
        #expect(second.username == moto.pool.username)
    }

    @Test func aSecretClientWithNoUsernameAnywhereCannotRefresh() throws {
        let provider = try cognito(endpoint: "http://127.0.0.1:1/", clientID: "client", secret: "secret")
        var stored = StoredSession(kind: "cognito")
        stored.refreshToken = "some-refresh-token"
        stored.accessToken = "opaque"
        guard case .configuration(let reason)? = sourceError({ try provider.refresh(stored) }) else {
            Issue.record("expected a configuration error")
            return
        }
        #expect(reason.contains("SECRET_HASH"))
        #expect(reason.contains("tokenproxy login"))
    }

    @Test func aSecretClientWithTheWrongSecretIsNotServed() throws {
        let moto = try Moto.shared()
        let right = try cognito(endpoint: moto.pool.endpoint, clientID: moto.pool.secret_client_id, secret: moto.pool.client_secret)
        let wrong = try cognito(endpoint: moto.pool.endpoint, clientID: moto.pool.secret_client_id, secret: "not-the-secret")
        let first = try login(right, moto.pool.username, moto.pool.password)
        let error = sourceError { try wrong.refresh(session(after: first)) }
        #expect(error != nil)
        // moto puts the rejected SECRET_HASH into its message; it must not reach ours.
        let rejected = try #require(wrong.secretHash(for: moto.pool.username))
        #expect(error?.reason.contains(rejected) == false)
    }

    @Test func theIDTokenCanBeTheOneThatIsSent() throws {
        let moto = try Moto.shared()
        let provider = try cognito(endpoint: moto.pool.endpoint, clientID: moto.pool.client_id, useToken: .id)
        let first = try login(provider, moto.pool.username, moto.pool.password)
        #expect(claim("token_use", of: first.accessToken) == .string("id"))
        #expect(first.username == moto.pool.username)
        let second = try provider.refresh(session(after: first))
        #expect(claim("token_use", of: second.accessToken) == .string("id"))
    }

    @Test func signingInByEmailKeepsThePoolsOwnUsername() throws {
        let moto = try Moto.shared()
        let provider = try cognito(endpoint: moto.pool.endpoint, clientID: moto.pool.email_client_id)
        let first = try login(provider, moto.pool.email, moto.pool.email_password)
        #expect(first.username == moto.pool.email_pool_username)
        #expect(first.username != moto.pool.email)
        let second = try provider.refresh(session(after: first))
        #expect(second.username == moto.pool.email_pool_username)
    }

    @Test func aWrongPasswordIsRefused() throws {
        let moto = try Moto.shared()
        let provider = try cognito(endpoint: moto.pool.endpoint, clientID: moto.pool.client_id)
        #expect(
            sourceError { try login(provider, moto.pool.username, "wrong-password") }
                == .refused("Cognito refused the login (NotAuthorizedException: Incorrect username or password.)")
        )
    }

    @Test func anUnknownUserIsRefused() throws {
        let moto = try Moto.shared()
        let provider = try cognito(endpoint: moto.pool.endpoint, clientID: moto.pool.client_id)
        guard case .refused(let reason)? = sourceError({ try login(provider, "nobody", "whatever") }) else {
            Issue.record("expected a refusal")
            return
        }
        #expect(reason.contains("UserNotFoundException"))
    }

    @Test func aBogusRefreshTokenIsRefused() throws {
        let moto = try Moto.shared()
        let provider = try cognito(endpoint: moto.pool.endpoint, clientID: moto.pool.client_id)
        var stored = StoredSession(kind: "cognito")
        stored.refreshToken = "not-a-refresh-token"
        #expect(
            sourceError { try provider.refresh(stored) }
                == .refused("Cognito refused the refresh token (NotAuthorizedException: Refresh Token has been revoked)")
        )
    }

    @Test func aUserWhoMustChooseANewPasswordCannotLogInAndIsToldWhy() throws {
        let moto = try Moto.shared()
        let provider = try cognito(endpoint: moto.pool.endpoint, clientID: moto.pool.client_id)
        #expect(
            sourceError { try login(provider, moto.pool.new_password_user, moto.pool.new_password_password) }
                == .refused(
                    "Cognito asks for NEW_PASSWORD_REQUIRED, which tokenproxy cannot answer; complete it with the AWS console or CLI"
                )
        )
    }

    @Test func anUnknownClientIDIsAConfigurationError() throws {
        let moto = try Moto.shared()
        let provider = try cognito(endpoint: moto.pool.endpoint, clientID: "no-such-client")
        guard case .configuration(let reason)? = sourceError({ try login(provider, moto.pool.username, moto.pool.password) }) else {
            Issue.record("expected a configuration error")
            return
        }
        #expect(reason.contains("ResourceNotFoundException"))
    }

    @Test func revokingWhereMotoHasNoRevokeTokenCountsAsDone() throws {
        let moto = try Moto.shared()
        let provider = try cognito(endpoint: moto.pool.endpoint, clientID: moto.pool.client_id)
        let token = try login(provider, moto.pool.username, moto.pool.password)
        try provider.revoke(refreshToken: try #require(token.refreshToken))
    }

    // MARK: Against other servers

    @Test func aClosedPortIsAPassingFailure() throws {
        let provider = try cognito(endpoint: "http://127.0.0.1:1/", clientID: "client")
        guard case .passing(let reason, _)? = sourceError({ try login(provider, "alice", "password") }) else {
            Issue.record("expected a passing failure")
            return
        }
        #expect(reason.contains("cannot reach Cognito"))
    }

    @Test(arguments: [
        ("html502", "Cognito answered with something that is not JSON (HTTP 502): an HTML page"),
        ("html", "Cognito answered with something that is not JSON (HTTP 200): an HTML page"),
        ("notjson", "Cognito answered with something that is not JSON (HTTP 200)"),
        ("500", "Cognito answered HTTP 500"),
        ("spaces", "Cognito's answer has neither AuthenticationResult nor ChallengeName"),
    ])
    func somethingThatIsNotCognitoIsAPassingFailure(mode: String, expected: String) throws {
        let server = try PythonServer("json_backend_for_provider_tests", arguments: ["--answer", mode])
        let provider = try cognito(endpoint: server.baseURL + "/login", clientID: "client")
        // A 5xx is counted as such (tokenproxy_token_fetch_failures_total{reason="http_5xx"}).
        let cause: PassingCause = mode == "html502" || mode == "500" ? .unavailable : .badAnswer
        #expect(sourceError { try login(provider, "alice", "password") } == .passing(expected, cause: cause))
        var stored = StoredSession(kind: "cognito")
        stored.refreshToken = "refresh"
        #expect(sourceError { try provider.refresh(stored) } == .passing(expected, cause: cause))
    }

    // MARK: Without a server

    @Test func aRegionMakesTheAWSEndpoint() throws {
        var credentials = CognitoConfiguration(clientID: "client", region: "eu-west-1")
        #expect(try CognitoProvider(credentials).endpoint == "https://cognito-idp.eu-west-1.amazonaws.com/")
        credentials.region = "eu-west-1.evil.example/"
        #expect(throws: ConfigurationError.self) { try CognitoProvider(credentials) }
        credentials.region = nil
        #expect(throws: ConfigurationError.self) { try CognitoProvider(credentials) }
        credentials.region = "us-east-1"
        credentials.clientID = ""
        #expect(throws: ConfigurationError.self) { try CognitoProvider(credentials) }
    }

    @Test func cognitosMessagesAreShownOnlyWhenTheyCannotHoldASecret() {
        #expect(CognitoProvider.safeMessage("Incorrect username or password.", secrets: ["hunter22"]) == "Incorrect username or password.")
        #expect(CognitoProvider.safeMessage("bad password hunter22", secrets: ["hunter22"]) == nil)
        #expect(CognitoProvider.safeMessage("9LaJGNXxyaOuG/r7TYyy7RcBikM7nKyTHp0rlSstPN4=", secrets: []) == nil)
        #expect(CognitoProvider.safeMessage("line\r\nInjected: yes", secrets: []) == nil)
        #expect(CognitoProvider.safeMessage(String(repeating: "word ", count: 100), secrets: []) == nil)
        #expect(CognitoProvider.safeMessage(nil, secrets: []) == nil)
    }

    @Test func anEndpointsUserinfoStaysOutOfMessages() throws {
        let provider = try cognito(endpoint: "http://user:hunter22@127.0.0.1:1/", clientID: "client")
        guard case .passing(let reason, _)? = sourceError({ try login(provider, "alice", "password") }) else {
            Issue.record("expected a passing failure")
            return
        }
        #expect(!reason.contains("hunter22"), "\(reason)")
        #expect(reason.contains("127.0.0.1:1"), "\(reason)")
    }

    @Test func onlyPasswordLoginsAreOffered() throws {
        let provider = try cognito(endpoint: "http://127.0.0.1:1/", clientID: "client")
        guard case .configuration? = sourceError({ try provider.login(.device, prompt: { _ in }) }) else {
            Issue.record("expected a configuration error")
            return
        }
    }
}
