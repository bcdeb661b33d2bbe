import Config
import Foundation
import IdentityHTTP
import TestSupport
import Testing

@testable import Credentials

/// The backend of `Tests/servers/json_backend_for_provider_tests.py` and a provider pointed at it.
private struct Backend {
    let server: PythonServer
    let provider: JSONRefreshProvider

    init(_ arguments: [String] = [], configure: (inout JSONRefreshConfiguration) -> Void = { _ in }) throws {
        server = try PythonServer("json_backend_for_provider_tests", arguments: arguments)
        var credentials = JSONRefreshConfiguration(refreshURL: server.baseURL + "/refresh", loginURL: server.baseURL + "/login")
        if arguments.contains("body") { credentials.refreshTokenIn = .body }
        configure(&credentials)
        provider = try JSONRefreshProvider(credentials)
    }

    func login(_ username: String = "alice", _ password: String = "wonderland") throws -> IssuedToken {
        try provider.login(.password(username: username, password: password), prompt: { _ in })
    }

    func refresh(_ refreshToken: String?) throws -> IssuedToken {
        var session = StoredSession(kind: "json_refresh")
        session.refreshToken = refreshToken
        return try provider.refresh(session)
    }

    /// One request as the backend saw it.
    struct Seen: Decodable {
        var path: String
        var authorization: String?
        var content_type: String?
        var accept: String?
        var body: String
    }

    /// What the backend saw: one entry per request.
    func log() throws -> [Seen] {
        let response = try BlockingHTTPClient.perform(HTTPCallRequest(url: server.baseURL + "/log", method: "GET"))
        return try JSONDecoder().decode([Seen].self, from: Data(response.body))
    }
}

/// The `TokenSourceError` that `body` throws, or nil (recorded as an issue) when it throws none.
func sourceError(_ body: () throws -> IssuedToken, sourceLocation: SourceLocation = #_sourceLocation) -> TokenSourceError? {
    do {
        let token = try body()
        Issue.record("expected a TokenSourceError, got a token (\(token.accessToken.count) characters)", sourceLocation: sourceLocation)
    } catch let error as TokenSourceError {
        return error
    } catch {
        Issue.record("expected a TokenSourceError, got \(error)", sourceLocation: sourceLocation)
    }
    return nil
}

@Suite struct JSONRefreshProviderTests {
    // MARK: Login

    @Test func loginPostsUsernameAndPasswordAsJSONAndReadsTheTokenSet() throws {
        let backend = try Backend()
        let token = try backend.login()
        #expect(token.accessToken == "access-1")
        #expect(token.refreshToken == "refresh-1")
        #expect(token.expiresIn == 3600)
        #expect(token.expiresAt == nil)
        #expect(token.serverDate != nil)
        let seen = try backend.log()
        #expect(seen.count == 1)
        #expect(seen.first?.path == "/login")
        #expect(seen.first?.content_type == "application/json")
        #expect(seen.first?.accept == "application/json")
        let body = try JSONDecoder().decode([String: String].self, from: Data((seen.first?.body ?? "").utf8))
        #expect(body == ["username": "alice", "password": "wonderland"])
    }

    @Test func aWrongPasswordIsRefusedNamingTheStatus() throws {
        let backend = try Backend()
        #expect(sourceError { try backend.login("alice", "guess") } == .refused("the backend refused the login (HTTP 401)"))
    }

    @Test(arguments: ["400", "403"])
    func loginRefusalsOtherThan401AreRefusalsToo(status: String) throws {
        let backend = try Backend(["--answer", status])
        #expect(sourceError { try backend.login() } == .refused("the backend refused the login (HTTP \(status))"))
    }

    @Test func loginWithoutLoginURLIsAConfigurationError() throws {
        let backend = try Backend { $0.loginURL = nil }
        guard case .configuration(let reason)? = sourceError({ try backend.login() }) else { return }
        #expect(reason.contains("login_url"))
    }

    @Test func deviceLoginIsNotOffered() throws {
        let backend = try Backend()
        guard case .configuration? = sourceError({ try backend.provider.login(.device, prompt: { _ in }) }) else {
            Issue.record("expected a configuration error")
            return
        }
    }

    // MARK: Refresh

    @Test func refreshSendsTheRefreshTokenAsABearerHeaderWithAnEmptyBody() throws {
        let backend = try Backend()
        let first = try backend.login()
        let second = try backend.refresh(first.refreshToken)
        #expect(second.accessToken == "access-2")
        #expect(second.refreshToken == "refresh-2")
        #expect(second.expiresIn == 3600)
        let seen = try backend.log()
        #expect(seen.count == 2)
        #expect(seen.last?.path == "/refresh")
        #expect(seen.last?.authorization == "Bearer refresh-1")
        #expect(seen.last?.body == "")
        #expect(seen.last?.content_type == nil)
        #expect(seen.last?.accept == "application/json")
    }

    @Test func refreshCanSendTheRefreshTokenInAJSONBody() throws {
        let backend = try Backend(["--refresh-in", "body"])
        let first = try backend.login()
        let second = try backend.refresh(first.refreshToken)
        #expect(second.accessToken == "access-2")
        let seen = try backend.log()
        #expect(seen.last?.authorization == nil)
        #expect(seen.last?.content_type == "application/json")
        let body = try JSONDecoder().decode([String: String].self, from: Data((seen.last?.body ?? "").utf8))
        #expect(body == ["refresh_token": "refresh-1"])
    }

    @Test func aRotatedRefreshTokenReplacesTheOldOneWhichIsThenRefused() throws {
        let backend = try Backend()
        let first = try backend.login()
        let second = try backend.refresh(first.refreshToken)
        let third = try backend.refresh(second.refreshToken)
        #expect(third.accessToken == "access-3")
        #expect(sourceError { try backend.refresh(first.refreshToken) } == .refused("the backend refused the refresh token (HTTP 401)"))
    }

    @Test func anAnswerWithoutARefreshTokenKeepsTheOldOne() throws {
        let backend = try Backend(["--no-rotate"])
        let first = try backend.login()
        let second = try backend.refresh(first.refreshToken)
        #expect(second.accessToken == "access-2")
        #expect(second.refreshToken == nil)
        let third = try backend.refresh(first.refreshToken)
        #expect(third.accessToken == "access-3")
    }

    @Test func nestedPathsFindTheTokensAndAnEpochExpiry() throws {
        let backend = try Backend(["--nested"]) {
            $0.accessTokenPath = "data.tokens.access"
            $0.refreshTokenPath = "data.tokens.refresh"
            $0.expiresInPath = nil
            $0.expiresAtPath = "data.expires_at"
        }
        let before = Date().timeIntervalSince1970
        let first = try backend.login()
        #expect(first.accessToken == "access-1")
        #expect(first.refreshToken == "refresh-1")
        #expect(first.expiresIn == nil)
        let expiresAt = try #require(first.expiresAt)
        #expect(abs(expiresAt - (before + 3600)) < 60)
        let second = try backend.refresh(first.refreshToken)
        #expect(second.accessToken == "access-2")
        #expect(second.refreshToken == "refresh-2")
    }

    @Test func anRFC3339ExpiryIsRead() throws {
        let backend = try Backend(["--nested", "--expires-at", "rfc3339"]) {
            $0.accessTokenPath = "data.tokens.access"
            $0.refreshTokenPath = "data.tokens.refresh"
            $0.expiresAtPath = "data.expires_at"
        }
        let before = Date().timeIntervalSince1970
        let token = try backend.login()
        let expiresAt = try #require(token.expiresAt)
        #expect(abs(expiresAt - (before + 3600)) < 60)
    }

    @Test func aPathThatFindsNothingSaysWhichPath() throws {
        let backend = try Backend(["--nested"]) { $0.accessTokenPath = "data.tokens.nope" }
        #expect(sourceError { try backend.login() } == .passing("the backend's answer has no access token at data.tokens.nope"))
    }

    @Test(arguments: ["400", "401", "403"])
    func aRefusedRefreshEndsTheSession(status: String) throws {
        let backend = try Backend(["--answer", status])
        #expect(sourceError { try backend.refresh("refresh-1") } == .refused("the backend refused the refresh token (HTTP \(status))"))
    }

    @Test(arguments: ["500", "429", "html502"])
    func serverErrorsAndThrottlingArePassing(mode: String) throws {
        let backend = try Backend(["--answer", mode])
        guard case .passing(let reason, _)? = sourceError({ try backend.refresh("refresh-1") }) else {
            Issue.record("expected a passing failure")
            return
        }
        #expect(reason.contains("HTTP"))
        #expect(!reason.contains("refresh-1"))
    }

    @Test func aWrongURLIsAConfigurationError() throws {
        let backend = try Backend(["--answer", "404"])
        guard case .configuration(let reason)? = sourceError({ try backend.refresh("refresh-1") }) else {
            Issue.record("expected a configuration error")
            return
        }
        #expect(reason.contains("HTTP 404"))
        #expect(reason.contains("refresh_url"))
    }

    @Test func aClosedPortIsAPassingFailure() throws {
        let backend = try Backend()
        backend.server.stop()
        guard case .passing(let reason, _)? = sourceError({ try backend.refresh("refresh-1") }) else {
            Issue.record("expected a passing failure")
            return
        }
        #expect(reason.contains("cannot reach"))
    }

    @Test func noRefreshTokenMeansALoginIsNeeded() throws {
        let backend = try Backend()
        #expect(sourceError { try backend.refresh(nil) } == .refused("there is no refresh token; run tokenproxy login"))
        #expect(try backend.log().isEmpty)
    }

    // MARK: Answers that cannot be used

    @Test(arguments: [
        ("html", "not JSON (HTTP 200): an HTML page"),
        ("notjson", "not JSON (HTTP 200)"),
        ("array", "answered with JSON that is not an object (HTTP 200)"),
        ("missing", "has no access token at access_token"),
        ("empty", "has no access token at access_token"),
        ("number", "has no access token at access_token"),
        ("spaces", "contains spaces, control characters"),
        ("crlf", "contains spaces, control characters"),
        ("nonascii", "contains spaces, control characters"),
        ("negative", "is not between 0 and 10 years"),
        ("huge", "is not between 0 and 10 years"),
        ("ms", "more than 10 years away"),
        ("badexpiry", "is not a number of seconds"),
    ])
    func anUnusableAnswerIsAPassingFailureWithAReason(mode: String, expected: String) throws {
        let backend = try Backend(["--answer", mode]) { $0.expiresAtPath = "expires_at" }
        for call in [{ try backend.refresh("refresh-1") }, { try backend.login() }] {
            guard case .passing(let reason, _)? = sourceError(call) else {
                Issue.record("expected a passing failure for \(mode)")
                continue
            }
            #expect(reason.contains(expected), "\(reason)")
            for leak in ["access x", "access-x", "acc\u{e9}ss", "X-Injected", "refresh-x"] {
                #expect(!reason.contains(leak), "\(reason)")
            }
        }
    }

    /// The identity-provider client reads at most 1 MiB of an answer, and says so when there is more.
    @Test func anAnswerOverOneMebibyteIsRefusedAsTooLarge() throws {
        let backend = try Backend(["--answer", "oversized"])
        let request = HTTPCallRequest(url: backend.server.baseURL + "/refresh", method: "POST", body: Array("{}".utf8))
        #expect {
            _ = try BlockingHTTPClient.perform(request)
        } throws: { error in
            (error as? HTTPCallError)?.kind == .answerTooLarge && (error as? HTTPCallError)?.message == "the answer is larger than 1048576 bytes"
        }
    }

    /// `tokenproxy_token_fetch_failures_total{reason}` of each answer, from the status, not the words.
    @Test(arguments: [("500", FetchFailureReason.http5xx), ("429", .http429), ("notjson", .badAnswer), ("400", .refused), ("404", .clientMisconfigured)])
    func aBackendsAnswerGetsItsFailureReason(mode: String, reason: FetchFailureReason) throws {
        let backend = try Backend(["--answer", mode])
        let error = try #require(sourceError { try backend.refresh("refresh-1") })
        #expect(FetchFailureReason.of(error) == reason, "\(error)")
    }

    // MARK: Configuration

    @Test func refreshURLIsRequired() {
        let credentials = JSONRefreshConfiguration(refreshURL: "")
        #expect(throws: ConfigurationError.self) { try JSONRefreshProvider(credentials) }
    }

    @Test(arguments: ["", "a..b", ".a", "a."])
    func aMalformedPathIsAConfigurationError(path: String) {
        var credentials = JSONRefreshConfiguration(refreshURL: "http://127.0.0.1:1/refresh")
        credentials.accessTokenPath = path
        #expect(
            throws: ConfigurationError(
                keyPath: "credentials.access_token_path", reason: "\"\(path)\" is no dotted JSON path (names separated by single dots, e.g. data.tokens.access)"
            )
        ) {
            try JSONRefreshProvider(credentials)
        }
    }

    @Test func jsonPathsWalkNestedObjectsOnly() throws {
        let answer = try #require(JSONValue.parse(Array(#"{"a":{"b":{"c":"x"}},"l":[1],"t":true,"n":1}"#.utf8)))
        #expect(JSONPath("a.b.c")?.lookup(in: answer) == .string("x"))
        #expect(JSONPath("a.b")?.lookup(in: answer)?.string == nil)
        #expect(JSONPath("l.0")?.lookup(in: answer) == nil)
        #expect(JSONPath("a.b.c.d")?.lookup(in: answer) == nil)
        #expect(JSONPath("t")?.lookup(in: answer)?.number == nil)
        #expect(JSONPath("n")?.lookup(in: answer)?.number == 1)
    }
}
