import Config
import Credentials
import Foundation
import HTTP1
import Testing

@testable import ProxyCore

/// The per-request credential (CONTRACT.md "Where the credential goes", "AWS credentials and SigV4
/// signing"), asked its three things without a head writer: which client fields it drops, how it
/// rewrites the target, which fields it appends.
@Suite struct RequestCredentialTests {
    static let staticToken = "type: static\n  token_env: CREDENTIAL_TEST_TOKEN"

    static func route(_ credentials: String, _ extra: String) throws -> RouteConfiguration {
        let yaml = """
            listen: 127.0.0.1:8080
            upstream: https://api.example.com/v1
            credentials:
              \(credentials)
            \(extra)
            """
        return try ConfigurationLoader.parse(yaml: yaml, baseDirectory: "/", environment: ["CREDENTIAL_TEST_TOKEN": "t"]).configuration.routes[0]
    }

    static let aws = "type: aws\n  region: eu-west-1\n  service: execute-api\n  source: environment"
    static let dpop = "type: oauth2_client_credentials\n  token_url: https://idp/t\n  client_id: a\n  client_auth: none\n  dpop: {}"

    static func token(_ value: String = "tok", dpop: DPoPProver? = nil) -> TokenSnapshot {
        TokenSnapshot(accessToken: value, expiresAt: nil, issuedAt: 0, generation: 1, dpop: dpop)
    }

    static let awsKeys = AWSCredentials(accessKeyID: "ASIAEXAMPLE", secretAccessKey: "secret", sessionToken: "session-token")

    static func awsToken() -> TokenSnapshot {
        TokenSnapshot(
            accessToken: awsKeys.containerEndpointJSON, expiresAt: nil, issuedAt: 0, generation: 1, aws: AWSSigningCredentials(awsKeys))
    }

    /// The credential of a request with `token` on a route configured with `extra`.
    static func resolved(_ extra: String, credentials: String? = nil, token: TokenSnapshot?, body: SigV4RequestSigner.Body = .none) throws
        -> RequestCredential
    {
        try RouteCredential(Self.route(credentials ?? staticToken, extra)).resolve(token: token) { body }
    }

    /// The fields the credential appends, as text; `host`: the Host that went.
    static func appended(_ credential: RequestCredential, method: String = "GET", path: String = "/a", query: String? = nil, host: String? = "h")
        -> String
    {
        let out = ByteBuffer()
        let target = credential.upstreamTarget(basePath: "/v1", path: path, query: query)
        credential.appendFields(to: out, method: method, target: { target }, origin: "https://api.example.com", sentHost: { host })
        return String(decoding: out.bytes, as: UTF8.self)
    }

    /// Which of `request`'s end-to-end fields (by name) the credential drops, in order; as the head
    /// writer asks, not about Host and Authorization, which it decides itself.
    static func dropped(_ credential: RequestCredential, _ request: String) -> [String] {
        let fields = ForwarderTests.request(request).fields
        let asked = (0..<fields.count).filter { !fields.nameEquals($0, "host") && !fields.nameEquals($0, "authorization") }
        return asked.filter { credential.drops($0, of: fields) }.map { fields.name($0) }
    }

    static let clientRequest = "GET /a HTTP/1.1\r\nHost: h\r\nX-API-Key: mine\r\nDPoP: client-made\r\nX-Amz-Date: 1\r\nX-Other: o\r\n\r\n"

    // MARK: each placement

    @Test func theDefaultIsTheSnapshotsBearerLineInPlaceOfTheClientsAuthorization() throws {
        let credential = try Self.resolved("", token: Self.token())
        #expect(credential.dropsClientAuthorization)
        #expect(!credential.dropsFieldsByName)
        #expect(Self.dropped(credential, Self.clientRequest).isEmpty)
        let target = credential.upstreamTarget(basePath: "/v1", path: "/a b", query: "x=1")
        #expect(target.pathPrefix == "/v1" && target.path == "/a b" && target.query == "x=1")
        #expect(Self.appended(credential) == "Authorization: Bearer tok\r\n")
    }

    @Test func anotherFieldDropsTheClientsCopyOfItAndLeavesItsAuthorization() throws {
        let credential = try Self.resolved("inject: {header: X-API-Key, format: \"{token}\"}", token: Self.token())
        #expect(!credential.dropsClientAuthorization)
        #expect(Self.dropped(credential, Self.clientRequest) == ["X-API-Key"])
        #expect(Self.appended(credential) == "X-API-Key: tok\r\n")
    }

    @Test func anAuthorizationFormatOrBasicTakesTheClientsAuthorizationsPlace() throws {
        let format = try Self.resolved("inject: {format: \"token {token}\"}", token: Self.token())
        #expect(format.dropsClientAuthorization)
        #expect(Self.dropped(format, Self.clientRequest).isEmpty)
        #expect(Self.appended(format) == "Authorization: token tok\r\n")
        let basic = try Self.resolved("inject: {basic_username: x-access-token}", token: Self.token())
        #expect(basic.dropsClientAuthorization)
        #expect(Self.appended(basic) == "Authorization: Basic eC1hY2Nlc3MtdG9rZW46dG9r\r\n")
    }

    @Test func aQueryParameterRewritesTheQueryAndAppendsNoField() throws {
        let credential = try Self.resolved("inject: {query: api_key}", token: Self.token())
        #expect(!credential.dropsClientAuthorization)
        #expect(Self.dropped(credential, Self.clientRequest).isEmpty)
        #expect(credential.upstreamTarget(basePath: "/v1", path: "/a", query: "x=1&api_key=mine").query == "x=1&api_key=tok")
        #expect(credential.upstreamTarget(basePath: "/v1", path: "/a", query: nil).query == "api_key=tok")
        #expect(Self.appended(credential, query: "x=1") == "")
    }

    /// `client_authorization: keep` with the client's own credential: nothing is put in, nothing
    /// dropped; a kept Proxy-Authorization (hop-by-hop) still goes.
    @Test func withoutATokenTheClientsOwnGoesAndAProxyAuthorizationIsKept() throws {
        let request = ForwarderTests.request("GET /a HTTP/1.1\r\nHost: h\r\nProxy-Authorization: Basic x\r\nConnection: close\r\n\r\n")
        let kept = try Self.resolved("inject: {header: Proxy-Authorization}", token: nil)
        #expect(!kept.dropsClientAuthorization)
        let proxyAuthorization = try #require((0..<request.fields.count).first { request.fields.nameEquals($0, "proxy-authorization") })
        #expect(kept.keepsHopByHop(proxyAuthorization, of: request.fields))
        #expect(Self.appended(kept) == "")
        let plain = try Self.resolved("", token: nil)
        #expect(!plain.dropsClientAuthorization)
        #expect(!plain.keepsHopByHop(proxyAuthorization, of: request.fields))
        #expect(Self.appended(plain) == "")
    }

    // MARK: DPoP

    /// RFC 9449 §7.1: a DPoP-bound token goes as `Authorization: DPoP` with one fresh proof, whatever
    /// `inject` says; a proof the client sent is dropped (§4.3: exactly one).
    @Test func aDPoPBoundTokenGoesWithItsProofWhateverInjectSays() throws {
        let token = Self.token(dpop: DPoPProver.generate())
        let credential = try Self.resolved("inject: {query: api_key}", credentials: Self.dpop, token: token)
        #expect(credential.dropsClientAuthorization)
        #expect(Self.dropped(credential, Self.clientRequest) == ["DPoP"])
        #expect(credential.upstreamTarget(basePath: "/v1", path: "/a", query: "x=1").query == "x=1")
        let fields = Self.appended(credential, method: "POST", query: "x=1").components(separatedBy: "\r\n")
        #expect(fields.first == "Authorization: DPoP tok")
        #expect(fields.filter { $0.hasPrefix("DPoP: ") }.count == 1)
    }

    @Test func aRouteWithoutDPoPIgnoresABinding() throws {
        let credential = try Self.resolved("", token: Self.token(dpop: DPoPProver.generate()))
        #expect(Self.dropped(credential, Self.clientRequest).isEmpty)
        #expect(!Self.appended(credential).contains("DPoP: "))
    }

    // MARK: SigV4

    @Test func aSignedRequestDropsTheFieldsItSetsAndSignsTheFieldsThatGo() throws {
        let credential = try Self.resolved("", credentials: Self.aws, token: Self.awsToken())
        #expect(credential.dropsClientAuthorization)
        #expect(Self.dropped(credential, Self.clientRequest) == ["X-Amz-Date"])
        let target = credential.upstreamTarget(basePath: "/v1", path: "/a b", query: "z=1&a=2")
        // The path in the one form an SDK sends, base path included; the query as it came.
        #expect(target.pathPrefix == "" && target.path == "/v1/a%20b" && target.query == "z=1&a=2")
        let appended = Self.appended(credential, path: "/a b", query: "z=1&a=2", host: "api.example.com")
        let names = appended.components(separatedBy: "\r\n").compactMap { $0.split(separator: ":").first.map(String.init) }
        #expect(names == ["Authorization", "X-Amz-Date", "X-Amz-Security-Token"])
        #expect(appended.contains("SignedHeaders=host;x-amz-date;x-amz-security-token,"))
    }

    @Test func aRequestThatCannotBeSignedGetsItsAnswer() throws {
        #expect(throws: ProxyError.bodyTooLarge) { try Self.resolved("", credentials: Self.aws, token: Self.awsToken(), body: .streaming) }
        #expect(throws: ProxyError.tokenUnavailable("the credentials hold no AWS keys", retryAfter: 1)) {
            try Self.resolved("", credentials: Self.aws, token: Self.token())
        }
        // Keep mode: the client's own credential goes unsigned.
        let kept = try Self.resolved("", credentials: Self.aws, token: nil)
        #expect(!kept.dropsClientAuthorization && Self.appended(kept) == "")
    }

    /// `inject` with `type: aws`: one answer. The request is signed, and the check that refuses a
    /// client's own credential looks where the signature goes (Authorization), not at `inject`'s field.
    @Test func injectWithAWSIsOneAnswerTheSignature() throws {
        let route = try Self.route(Self.aws, "inject: {header: X-API-Key}\nforward: {client_authorization: reject}")
        let routeCredential = RouteCredential(route)
        guard case .signed = routeCredential.placement else {
            Issue.record("a type: aws route with inject is not signed")
            return
        }
        let credential = try routeCredential.resolve(token: Self.awsToken()) { .none }
        #expect(Self.dropped(credential, Self.clientRequest) == ["X-Amz-Date"])
        #expect(Self.appended(credential).hasPrefix("Authorization: AWS4-HMAC-SHA256 "))
        let withAuthorization = ForwarderTests.request("GET /a HTTP/1.1\r\nHost: localhost\r\nAuthorization: x\r\n\r\n")
        let withKey = ForwarderTests.request("GET /a HTTP/1.1\r\nHost: localhost\r\nX-API-Key: x\r\n\r\n")
        #expect(routeCredential.rejectsClientAuthorization(withAuthorization, query: nil))
        #expect(!routeCredential.rejectsClientAuthorization(withKey, query: nil))
        var configuration = try ConfigurationLoader.parse(
            yaml: "listen: 127.0.0.1:8080\nupstream: https://api.example.com/v1\ncredentials:\n  type: static\n  token_env: CREDENTIAL_TEST_TOKEN\n",
            baseDirectory: "/", environment: ["CREDENTIAL_TEST_TOKEN": "t"]
        ).configuration
        configuration.routes[0] = route
        let policy = AccessPolicy(configuration: configuration)
        #expect(policy.check(withAuthorization).map(\.path) == .failure(.clientAuthorizationRejected))
        #expect(policy.check(withKey).map(\.path) == .success("/a"))
    }
}
