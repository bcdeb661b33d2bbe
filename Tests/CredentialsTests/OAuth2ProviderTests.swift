import Config
import Foundation
import Glibc
import Synchronization
import TestSupport
import Testing

@testable import Credentials

/// The Authlib authorization server of `Tests/servers/oauth_server.py`.
final class AuthlibServer: Sendable {
    let server: PythonServer
    init(_ arguments: [String] = []) throws {
        server = try PythonServer("oauth_server", arguments: ["--client", "app:s3cret-client-value", "--user", "alice:wonderland-pw"] + arguments)
    }
    var base: String { server.baseURL }
    var tokenURL: String { base + "/oauth/token" }

    @discardableResult
    func post(_ path: String) throws -> CurlResult {
        try curl(["-s", "-X", "POST", base + path])
    }

    func stats() throws -> [String: Any] {
        try curl(["-s", base + "/test/stats"]).json ?? [:]
    }

    /// Calls of one grant with one outcome ("ok", "invalid_grant", ...).
    func calls(_ grant: String, _ outcome: String = "ok") throws -> Int {
        let calls = try stats()["calls"] as? [String: [String: Int]]
        return calls?[grant]?[outcome] ?? 0
    }
}

@Suite("OAuth2Provider against a real authorization server", .serialized)
struct OAuth2ProviderTests {
    static let clientSecret = "s3cret-client-value"
    /// A server of the test's own, stopped when the test releases it.
    static func server() throws -> AuthlibServer { try AuthlibServer() }

    func credentials(_ server: AuthlibServer, auth: CredentialsConfiguration.ClientAuth = .basic, secret: String = clientSecret) -> CredentialsConfiguration {
        var client = OAuth2ClientConfiguration(tokenURL: server.tokenURL, clientID: "app", clientSecret: Secret(value: secret, origin: .literal))
        client.authentication = auth == .post ? .post : .basic
        var refresh = OAuth2RefreshConfiguration(client: client)
        refresh.revocationURL = server.base + "/oauth/revoke"
        refresh.deviceAuthorizationURL = server.base + "/oauth/device"
        return CredentialsConfiguration(.oauth2Refresh(refresh))
    }

    /// Every failure reason: never a secret, a token or the raw body.
    func expectClean(_ error: TokenSourceError, _ secrets: [String]) {
        for secret in secrets { #expect(!error.reason.contains(secret), "\(error.reason) contains a secret") }
    }

    func error(_ body: () throws -> Any) -> TokenSourceError? {
        do {
            _ = try body()
            return nil
        } catch {
            return error as? TokenSourceError
        }
    }

    @Test("password login, then refresh_token grants with rotation; basic and post client authentication")
    func loginAndRefresh() throws {
        let server = try Self.server()
        try server.post("/test/reset-stats")
        for auth in [CredentialsConfiguration.ClientAuth.basic, .post] {
            let provider = try OAuth2Provider(credentials(server, auth: auth))
            let first = try provider.login(.password(username: "alice", password: "wonderland-pw"), prompt: { _ in })
            #expect(!first.accessToken.isEmpty)
            #expect(first.expiresIn == 20)
            #expect(first.serverDate != nil)
            let rotated = try provider.refresh(StoredSession(kind: "oauth2_refresh", refreshToken: first.refreshToken))
            #expect(rotated.refreshToken != nil && rotated.refreshToken != first.refreshToken)
            // The old one is spent: reuse is refused (and revokes the family).
            let reuse = error { try provider.refresh(StoredSession(kind: "oauth2_refresh", refreshToken: first.refreshToken)) }
            #expect(reuse.map { if case .refused = $0 { true } else { false } } == true)
            expectClean(reuse!, [first.refreshToken!, Self.clientSecret])
        }
        #expect(try server.calls("password") == 2)
        #expect(try server.calls("refresh_token") == 2)
    }

    @Test("a wrong password refuses the login without quoting it")
    func wrongPassword() throws {
        let server = try Self.server()
        try server.post("/test/reset-stats")
        let provider = try OAuth2Provider(credentials(server))
        let failure = error { try provider.login(.password(username: "alice", password: "not-the-password"), prompt: { _ in }) }
        // RFC 6749 says invalid_grant; Authlib answers invalid_request. Either way the login fails
        // with the provider's reason (the CLI exits 1).
        let why = try #require(failure).reason
        #expect(why.contains("invalid_grant") || why.contains("invalid_request"))
        #expect(!why.contains("not-the-password"))
    }

    @Test("a wrong client secret is a configuration error")
    func wrongClientSecret() throws {
        let server = try Self.server()
        try server.post("/test/reset-stats")
        let provider = try OAuth2Provider(credentials(server, secret: "wrong-secret-value"))
        let failure = error { try provider.refresh(StoredSession(kind: "oauth2_refresh", refreshToken: "whatever-refresh")) }
        guard case .configuration(let why)? = failure else {
            Issue.record("expected configuration, got \(String(describing: failure))")
            return
        }
        #expect(why.contains("invalid_client"))
        expectClean(failure!, ["wrong-secret-value", "whatever-refresh"])
    }

    static let injections: [(String, String)] = [
        ("status=503", "passing"), ("status=429&retry_after=3", "passing"), ("status=500&error=invalid_grant", "passing"),
        ("status=400&error=invalid_grant", "refused"), ("status=400&error=invalid_client", "configuration"),
        ("status=401&error=invalid_client", "configuration"), ("status=400&error=unauthorized_client", "configuration"),
        ("status=400&error=invalid_scope", "configuration"), ("status=502&raw=%3Chtml%3Esecret-page%3C/html%3E", "passing"),
        ("status=200&raw=%3Chtml%3Esecret-page%3C/html%3E", "passing"), ("status=200&raw=%7B%22token_type%22%3A%22bearer%22%7D", "passing"),
        ("status=200&raw=%7B%22access_token%22%3A%22secret-page-tok%22%2C%22expires_in%22%3A1e12%7D", "passing"),
        ("status=200&raw=%7B%22access_token%22%3A%22secret%20page%22%7D", "passing"),
        ("status=400&raw=not-json-secret-page", "passing"),
    ]

    @Test("error mapping of token endpoint answers: refused, configuration or passing, never quoting the answer")
    func errorMapping() throws {
        let server = try Self.server()
        let provider = try OAuth2Provider(credentials(server))
        let first = try provider.login(.password(username: "alice", password: "wonderland-pw"), prompt: { _ in })
        for (injection, expected) in Self.injections {
            try server.post("/test/fail?count=1&" + injection)
            let failure = error { try provider.refresh(StoredSession(kind: "oauth2_refresh", refreshToken: first.refreshToken)) }
            let kind: String
            switch failure {
            case .refused?: kind = "refused"
            case .configuration?: kind = "configuration"
            case .passing?: kind = "passing"
            case .loginRequired?: kind = "loginRequired"
            case nil: kind = "none"
            }
            #expect(kind == expected, "\(injection): \(String(describing: failure))")
            if let failure { expectClean(failure, [first.refreshToken!, Self.clientSecret, "secret-page", "secret page"]) }
        }
    }

    @Test("network failure is passing")
    func unreachable() throws {
        let configuration = CredentialsConfiguration(
            .oauth2Refresh(OAuth2RefreshConfiguration(client: OAuth2ClientConfiguration(tokenURL: "http://127.0.0.1:9/oauth/token", clientID: "app"))))
        let provider = try OAuth2Provider(configuration)
        let failure = error { try provider.refresh(StoredSession(kind: "oauth2_refresh", refreshToken: "rt-unreachable")) }
        guard case .passing? = failure else {
            Issue.record("expected passing, got \(String(describing: failure))")
            return
        }
    }

    @Test("client_credentials fetches without a session; issuer_url discovery fills the token URL")
    func clientCredentialsAndDiscovery() throws {
        let server = try Self.server()
        try server.post("/test/reset-stats")
        var client = OAuth2ClientConfiguration(clientID: "app", clientSecret: Secret(value: Self.clientSecret, origin: .literal))
        client.issuerURL = server.base
        client.scope = "read write"
        client.audience = "https://api.example"
        client.extraParams = ["resource": "https://api.example/v1"]
        let provider = try OAuth2Provider(CredentialsConfiguration(.oauth2ClientCredentials(client)))
        #expect(provider.fetchesWithoutSession)
        let issued = try provider.refresh(nil)
        #expect(!issued.accessToken.isEmpty)
        #expect(try server.calls("client_credentials") == 1)
        #expect(provider.revokes)
    }

    @Test("configuration checks name the key")
    func configurationChecks() throws {
        var client = OAuth2ClientConfiguration(clientID: "app")
        func refresh() -> CredentialsConfiguration { CredentialsConfiguration(.oauth2Refresh(OAuth2RefreshConfiguration(client: client))) }
        #expect(throws: ConfigurationError(keyPath: "credentials.token_url", reason: "oauth2_refresh needs token_url (or issuer_url for discovery)")) {
            try OAuth2Provider(refresh())
        }
        client.tokenURL = "ftp://x"
        #expect(throws: ConfigurationError.self) { try OAuth2Provider(refresh()) }
        client.tokenURL = "http://127.0.0.1/t"
        client.clientID = nil
        #expect(throws: ConfigurationError.self) { try OAuth2Provider(refresh()) }
    }

    @Test("device login: the code is shown, pending polls continue, approval yields tokens; a denial refuses")
    func deviceLogin() throws {
        let server = try Self.server()
        let provider = try OAuth2Provider(credentials(server))
        for deny in [false, true] {
            let shown = Mutex<String>("")
            let approver = Thread {
                let deadline = Date().addingTimeInterval(10)
                while Date() < deadline {
                    let text = shown.withLock { $0 }
                    if let range = text.range(of: "enter the code ") {
                        let code = text[range.upperBound...].prefix { !$0.isWhitespace }
                        usleep(1_500_000)  // a couple of pending polls first
                        _ = try? curl(["-s", "-X", "POST", server.base + "/test/approve?user_code=\(code)\(deny ? "&deny=1" : "")"])
                        return
                    }
                    usleep(20_000)
                }
            }
            approver.start()
            let result = Result { try provider.login(.device, prompt: { text in shown.withLock { $0 = text } }) }
            #expect(shown.withLock { $0 }.contains(server.base))
            switch result {
            case .success(let issued):
                #expect(!deny)
                #expect(issued.refreshToken != nil)
            case .failure(let failure):
                #expect(deny, "\(failure)")
                if case .refused(let why)? = failure as? TokenSourceError { #expect(why.contains("denied")) } else { Issue.record("\(failure)") }
            }
        }
        #expect(try server.calls("urn:ietf:params:oauth:grant-type:device_code", "authorization_pending") >= 1)
    }

    @Test("revocation: a revoked refresh token is refused afterwards")
    func revocation() throws {
        let server = try Self.server()
        try server.post("/test/reset-stats")
        let provider = try OAuth2Provider(credentials(server))
        let first = try provider.login(.password(username: "alice", password: "wonderland-pw"), prompt: { _ in })
        try provider.revoke(refreshToken: first.refreshToken!)
        #expect((try server.stats()["revocations"] as? Int) == 1)
        let failure = error { try provider.refresh(StoredSession(kind: "oauth2_refresh", refreshToken: first.refreshToken)) }
        #expect(failure.map { if case .refused = $0 { true } else { false } } == true)
    }
}
