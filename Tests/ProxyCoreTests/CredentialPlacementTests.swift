import Config
import Credentials
import Foundation
import HTTP1
import Testing

@testable import ProxyCore

/// CONTRACT.md "Where the credential goes", bytes in and bytes out: the field line of each
/// placement, the query rewrite, the three `client_authorization` modes, and the 403 that refuses a
/// token in the query.
@Suite struct CredentialPlacementTests {
    static func configuration(_ extra: String) throws -> Configuration {
        let yaml = """
            listen: 127.0.0.1:8080
            upstream: https://api.example.com/v1
            credentials:
              type: static
              token_env: PLACEMENT_TEST_TOKEN
            \(extra)
            """
        return try ConfigurationLoader.parse(yaml: yaml, baseDirectory: "/", environment: ["PLACEMENT_TEST_TOKEN": "t"]).configuration
    }

    static func token(_ value: String = "tok", generation: UInt64 = 1) -> TokenSnapshot {
        TokenSnapshot(accessToken: value, expiresAt: nil, issuedAt: 0, generation: generation)
    }

    /// The upstream head for `request` on a route configured with `extra`.
    static func upstreamHead(_ extra: String, _ request: String, token: TokenSnapshot? = token()) throws -> String {
        let forwarder = Forwarder(configuration: try configuration(extra))
        let head = ForwarderTests.request(request)
        let target = try AccessPolicy.parse(head)
        let out = ByteBuffer()
        forwarder.writeRequestHead(
            into: out, for: head, Forwarder.RequestParts(path: target.path, query: target.query, forwardedFor: ByteBuffer()),
            credential: RequestCredential(placement: forwarder.credential.placement, token: token))
        return String(decoding: out.bytes, as: UTF8.self)
    }

    // MARK: the field line of each placement

    @Test func eachFormatPutsTheTokenWhereItsMarkStands() {
        func line(_ name: String, _ format: String) -> String {
            String(decoding: InjectedField.line(name: name, value: .format(format), token: "abc"), as: UTF8.self)
        }
        #expect(line("X-API-Key", "{token}") == "X-API-Key: abc\r\n")
        #expect(line("Authorization", "token {token}") == "Authorization: token abc\r\n")
        #expect(line("X-Serverless-Authorization", "Bearer {token}") == "X-Serverless-Authorization: Bearer abc\r\n")
        #expect(line("X-Key", "k={token};v=1") == "X-Key: k=abc;v=1\r\n")
    }

    /// RFC 7617 §2: base64 of `user-id ":" password`.
    @Test func basicIsTheBase64OfTheUsernameAColonAndTheToken() {
        let line = String(decoding: InjectedField.line(name: "Authorization", value: .basic(username: "x-access-token"), token: "ghs_1"), as: UTF8.self)
        #expect(line == "Authorization: Basic eC1hY2Nlc3MtdG9rZW46Z2hzXzE=\r\n")
        #expect(Data(base64Encoded: "eC1hY2Nlc3MtdG9rZW46Z2hzXzE=").map { String(decoding: $0, as: UTF8.self) } == "x-access-token:ghs_1")
    }

    @Test func aFieldLineIsMadeAgainOnlyForAnotherToken() {
        let field = InjectedField(name: "X-Key", value: .format("{token}"))
        let first = Self.token("one", generation: 1)
        #expect(field.line(for: first) == Array("X-Key: one\r\n".utf8))
        #expect(field.line(for: first) == Array("X-Key: one\r\n".utf8))
        #expect(field.line(for: Self.token("two", generation: 2)) == Array("X-Key: two\r\n".utf8))
    }

    @Test func theDefaultAndItsSpelledOutFormAreTheSnapshotsOwnLine() throws {
        for extra in ["", "inject: {header: Authorization, format: \"Bearer {token}\"}"] {
            guard case .authorization = Forwarder(configuration: try Self.configuration(extra)).credential.placement else {
                Issue.record("\(extra) is not the snapshot's line")
                continue
            }
        }
    }

    // MARK: the upstream head

    @Test func anotherFieldReplacesTheClientsOwnAndLeavesItsAuthorizationAlone() throws {
        let text = try Self.upstreamHead(
            "inject: {header: X-API-Key, format: \"{token}\"}",
            "GET /items HTTP/1.1\r\nHost: localhost\r\nx-api-key: client-key\r\nAuthorization: Bearer client\r\n\r\n")
        #expect(text.contains("\r\nX-API-Key: tok\r\n"))
        #expect(!text.contains("client-key"))
        #expect(text.contains("\r\nAuthorization: Bearer client\r\n"))
        #expect(!text.contains("Bearer tok"))
    }

    @Test func basicReplacesTheClientsAuthorization() throws {
        let text = try Self.upstreamHead(
            "inject: {basic_username: x-access-token}", "GET /repo.git/info/refs HTTP/1.1\r\nHost: localhost\r\nAuthorization: Basic Y2xpZW50\r\n\r\n")
        #expect(text.contains("\r\nAuthorization: Basic eC1hY2Nlc3MtdG9rZW46dG9r\r\n"))
        #expect(!text.contains("Y2xpZW50"))
    }

    /// The client's Proxy-Authorization is hop-by-hop and goes nowhere; the injected one is set after.
    @Test func proxyAuthorizationIsSetForTheUpstream() throws {
        let text = try Self.upstreamHead(
            "inject: {header: Proxy-Authorization}", "GET / HTTP/1.1\r\nHost: localhost\r\nProxy-Authorization: Basic Y2xpZW50\r\n\r\n")
        #expect(text.contains("\r\nProxy-Authorization: Bearer tok\r\n"))
        #expect(!text.contains("Y2xpZW50"))
    }

    @Test func inKeepModeTheClientsOwnFieldGoesAndNothingIsInjected() throws {
        for (inject, field) in [
            ("{header: X-API-Key}", "X-API-Key: mine"), ("{header: Proxy-Authorization}", "Proxy-Authorization: mine"),
            ("{basic_username: u}", "Authorization: mine"),
        ] {
            let extra = "inject: \(inject)\nforward: {client_authorization: keep}"
            let request = "GET / HTTP/1.1\r\nHost: localhost\r\n\(field)\r\n\r\n"
            let forwarder = Forwarder(configuration: try Self.configuration(extra))
            #expect(forwarder.credential.keepsClientAuthorization(ForwarderTests.request(request), query: nil), "\(inject)")
            let text = try Self.upstreamHead(extra, request, token: nil)
            #expect(text.contains("\r\n\(field)\r\n"), "\(inject)")
            #expect(!text.contains("tok"), "\(inject)")
        }
        // A client's Authorization is not the X-API-Key: the token still goes.
        let forwarder = Forwarder(configuration: try Self.configuration("inject: {header: X-API-Key}\nforward: {client_authorization: keep}"))
        #expect(!forwarder.credential.keepsClientAuthorization(ForwarderTests.request("GET / HTTP/1.1\r\nHost: h\r\nAuthorization: x\r\n\r\n"), query: nil))
    }

    @Test func theQueryParameterIsReplacedWhereItStandsOrAppended() throws {
        let extra = "inject: {query: api_key}"
        #expect(try Self.upstreamHead(extra, "GET /a?x=1&api_key=mine&y=2 HTTP/1.1\r\nHost: h\r\n\r\n").hasPrefix("GET /v1/a?x=1&api_key=tok&y=2 HTTP/1.1\r\n"))
        #expect(try Self.upstreamHead(extra, "GET /a?x=%2F+1 HTTP/1.1\r\nHost: h\r\n\r\n").hasPrefix("GET /v1/a?x=%2F+1&api_key=tok HTTP/1.1\r\n"))
        #expect(try Self.upstreamHead(extra, "GET /a HTTP/1.1\r\nHost: h\r\n\r\n").hasPrefix("GET /v1/a?api_key=tok HTTP/1.1\r\n"))
        // Keep mode with the client's own parameter: the query goes as it came.
        #expect(try Self.upstreamHead(extra, "GET /a?api_key=mine HTTP/1.1\r\nHost: h\r\n\r\n", token: nil).hasPrefix("GET /v1/a?api_key=mine HTTP/1.1\r\n"))
        // With the token in the query, the client's Authorization is its own business.
        #expect(try Self.upstreamHead(extra, "GET /a HTTP/1.1\r\nHost: h\r\nAuthorization: Bearer c\r\n\r\n").contains("\r\nAuthorization: Bearer c\r\n"))
    }

    @Test func theQueryRewriteKeepsEveryOtherParametersBytesAndOrder() {
        let pair = "api_key=T"
        #expect(InjectedQueryParameter.rewritten(nil, name: "api_key", pair: pair) == "api_key=T")
        #expect(InjectedQueryParameter.rewritten("", name: "api_key", pair: pair) == "api_key=T")
        #expect(InjectedQueryParameter.rewritten("b=2&a=1", name: "api_key", pair: pair) == "b=2&a=1&api_key=T")
        #expect(InjectedQueryParameter.rewritten("api_key=x&b=%41", name: "api_key", pair: pair) == "api_key=T&b=%41")
        #expect(InjectedQueryParameter.rewritten("a&&api_key&z=;", name: "api_key", pair: pair) == "a&&api_key=T&z=;")
        // A second copy and an encoded spelling of the name are the client's too: none of them stays.
        #expect(InjectedQueryParameter.rewritten("api_key=1&b=2&api%5Fkey=3", name: "api_key", pair: pair) == "api_key=T&b=2")
        #expect(InjectedQueryParameter.rewritten("api_keys=1&xapi_key=2", name: "api_key", pair: pair) == "api_keys=1&xapi_key=2&api_key=T")
    }

    /// Issue 39 point 19: some upstream frameworks split pairs on `;` as well as `&`, so a client's
    /// own parameter after a `;` is found, replaced and refused like one after a `&`.
    @Test func aParameterAfterASemicolonIsFoundToo() throws {
        let pair = "api_key=T"
        #expect(InjectedQueryParameter.rewritten("x=1;api_key=mine&b=2", name: "api_key", pair: pair) == "x=1;api_key=T&b=2")
        #expect(InjectedQueryParameter.rewritten("api_key=1;api_key=2;b", name: "api_key", pair: pair) == "api_key=T;b")
        #expect(InjectedQueryParameter.rewritten("a=1;b=2", name: "api_key", pair: pair) == "a=1;b=2&api_key=T")
        #expect(InjectedQueryParameter.occurs("api_key", in: "x=1;api_key=mine"))
        #expect(InjectedQueryParameter.occurs("api_key", in: "x=1;api%5Fkey=mine"))
        #expect(!InjectedQueryParameter.occurs("api_key", in: "x=1;api_keys=mine"))
        let extra = "inject: {query: api_key}\nforward: {client_authorization: reject}"
        let policy = AccessPolicy(configuration: try Self.configuration(extra))
        #expect(policy.check(ForwarderTests.request("GET /a?x=1;api_key=mine HTTP/1.1\r\nHost: localhost\r\n\r\n")).error == .clientAuthorizationRejected)
        #expect(
            try Self.upstreamHead("inject: {query: api_key}", "GET /a?x=1;api_key=mine HTTP/1.1\r\nHost: h\r\n\r\n").hasPrefix(
                "GET /v1/a?x=1;api_key=tok HTTP/1.1\r\n"))
    }

    @Test func removingTheParameterKeepsTheRestAsItCame() {
        #expect(InjectedQueryParameter.removing("api_key", from: "x=1&api_key=T") == "x=1")
        #expect(InjectedQueryParameter.removing("api_key", from: "api_key=T&x=1;y=%2F") == "x=1;y=%2F")
        #expect(InjectedQueryParameter.removing("api_key", from: "a;api%5Fkey=T&b&&api_key") == "a&b&")
        #expect(InjectedQueryParameter.removing("api_key", from: "api_key=T") == "")
        #expect(InjectedQueryParameter.removing("api_key", from: "api_keys=1") == "api_keys=1")
    }

    @Test func aScrubbedValueKeepsItsLength() {
        #expect(InjectedQueryParameter.scrubbed("/p?api_key=a%2Bb&c=a+b", hiding: ["a+b", "a%2Bb"]) == "/p?api_key=*****&c=***")
        #expect(InjectedQueryParameter.scrubbed("nothing here", hiding: ["tok"]) == nil)
        #expect(InjectedQueryParameter.scrubbed("x", hiding: [""]) == nil)
    }

    /// Issue 39 point 19: with the token in the query, no answer field takes it back to the client.
    @Test func theAnswerCarriesNoTokenThatWentInTheQuery() throws {
        let forwarder = Forwarder(configuration: try Self.configuration("inject: {query: api_key}"))
        let token = Self.token("a+b")
        let response = ForwarderTests.response(
            "HTTP/1.1 302 Found\r\nLocation: https://api.example.com/v1/next/?x=1&api_key=a%2Bb#top\r\n"
                + "X-Request-Url: https://api.example.com/v1/a?api_key=a%2Bb\r\nX-Echo: a+b\r\nX-Other: fine\r\nContent-Length: 0\r\n\r\n")
        let out = ByteBuffer()
        forwarder.writeResponseHead(
            into: out, response, framing: .length(0), closing: false, clientVersion: .http1_1, clientHost: "localhost:8080", sentToken: token)
        let head = String(decoding: out.bytes, as: UTF8.self)
        #expect(head.contains("\r\nLocation: http://localhost:8080/next/?x=1#top\r\n"), "\(head)")
        #expect(head.contains("\r\nX-Request-Url: https://api.example.com/v1/a?api_key=*****\r\n"), "\(head)")
        #expect(head.contains("\r\nX-Echo: ***\r\n"), "\(head)")
        #expect(head.contains("\r\nX-Other: fine\r\n"), "\(head)")
        // A Location of nothing but the parameter loses its `?` too.
        #expect(forwarder.rewrittenLocation("/v1/next?api_key=a%2Bb", clientHost: "h") == "/next")
        // Another placement leaves the query of a Location alone.
        let header = Forwarder(configuration: try Self.configuration("inject: {header: X-API-Key}"))
        #expect(header.rewrittenLocation("/v1/next?api_key=a", clientHost: "h") == "/next?api_key=a")
    }

    @Test func theTokenIsPercentEncodedInTheQuery() throws {
        #expect(FormEncoding.encode("a+b/c=d&e~f.g_h-i%") == "a%2Bb%2Fc%3Dd%26e~f.g_h-i%25")
        let parameter = InjectedQueryParameter(name: "key")
        #expect(parameter.query("x=1", with: Self.token("a+b=")) == "x=1&key=a%2Bb%3D")
    }

    @Test func aQueryParameterIsFoundByItsDecodedName() {
        #expect(InjectedQueryParameter.occurs("api_key", in: "a=1&api_key=2"))
        #expect(InjectedQueryParameter.occurs("api_key", in: "api%5Fkey=2"))
        #expect(InjectedQueryParameter.occurs("api_key", in: "api_key"))
        #expect(!InjectedQueryParameter.occurs("api_key", in: "api_keys=1&a=api_key"))
        #expect(!InjectedQueryParameter.occurs("api_key", in: nil))
    }

    /// RFC 9449 §7.1: a DPoP-bound token keeps its field whatever `inject` says.
    @Test func aDPoPBoundTokenIgnoresInject() throws {
        let forwarder = Forwarder(configuration: try Self.configuration("inject: {query: api_key}"))
        let token = TokenSnapshot(accessToken: "tok", expiresAt: nil, issuedAt: 0, generation: 1, dpop: DPoPProver.generate())
        let out = ByteBuffer()
        forwarder.writeRequestHead(
            into: out, for: ForwarderTests.request("GET /a?b=1 HTTP/1.1\r\nHost: h\r\n\r\n"),
            Forwarder.RequestParts(path: "/a", query: "b=1", forwardedFor: ByteBuffer()),
            credential: RequestCredential(placement: forwarder.credential.placement, token: token, dpop: token.dpop))
        let text = String(decoding: out.bytes, as: UTF8.self)
        #expect(text.hasPrefix("GET /v1/a?b=1 HTTP/1.1\r\n"))
        #expect(text.contains("\r\nAuthorization: DPoP tok\r\n"))
    }

    // MARK: reject mode

    @Test func rejectRefusesTheClientsOwnCredentialWhereTheTokenGoes() throws {
        func policy(_ inject: String) throws -> AccessPolicy {
            AccessPolicy(configuration: try Self.configuration("inject: \(inject)\nforward: {client_authorization: reject}"))
        }
        func outcome(_ policy: AccessPolicy, _ request: String) -> ProxyError? {
            if case .failure(let error) = policy.check(ForwarderTests.request(request)) { return error }
            return nil
        }
        let header = try policy("{header: X-API-Key}")
        #expect(outcome(header, "GET / HTTP/1.1\r\nHost: localhost\r\nX-Api-Key: k\r\n\r\n") == .clientAuthorizationRejected)
        #expect(outcome(header, "GET / HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer c\r\n\r\n") == nil)
        let query = try policy("{query: api_key}")
        #expect(outcome(query, "GET /a?x=1&api_key=k HTTP/1.1\r\nHost: localhost\r\n\r\n") == .clientAuthorizationRejected)
        #expect(outcome(query, "GET /a?x=1 HTTP/1.1\r\nHost: localhost\r\n\r\n") == nil)
        #expect(outcome(query, "GET /a HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer c\r\n\r\n") == nil)
        let basic = try policy("{basic_username: u}")
        #expect(outcome(basic, "GET / HTTP/1.1\r\nHost: localhost\r\nAuthorization: Basic x\r\n\r\n") == .clientAuthorizationRejected)
    }

    // MARK: the answer that refuses a token

    @Test func a403RefusesOnlyATokenInTheQuery() {
        #expect(ExchangeRules.refusesToken(status: 401, tokenInQuery: false))
        #expect(ExchangeRules.refusesToken(status: 401, tokenInQuery: true))
        #expect(ExchangeRules.refusesToken(status: 403, tokenInQuery: true))
        #expect(!ExchangeRules.refusesToken(status: 403, tokenInQuery: false))
        #expect(!ExchangeRules.refusesToken(status: 200, tokenInQuery: true))
        #expect(!ExchangeRules.refusesToken(status: 407, tokenInQuery: true))
    }

    @Test func a403ToATokenInTheQueryIsHeldForOneRetry() {
        var m = ExchangeMachine(head: ForwarderTests.request("GET /a HTTP/1.1\r\nHost: x\r\n\r\n"), draining: false)
        m.onTryStarted(tokenGeneration: 1, now: 0)
        m.onSent(reachedBody: false, now: 0)
        #expect(
            m.onFinalHead(
                status: 403, upstreamFraming: .contentLength(0), tokenCanChange: true, refusingGoodTokens: false,
                refusesToken: ExchangeRules.refusesToken(status: 403, tokenInQuery: true))
                == .hold401)
        var plain = ExchangeMachine(head: ForwarderTests.request("GET /a HTTP/1.1\r\nHost: x\r\n\r\n"), draining: false)
        plain.onTryStarted(tokenGeneration: 1, now: 0)
        plain.onSent(reachedBody: false, now: 0)
        #expect(
            plain.onFinalHead(status: 403, upstreamFraming: .contentLength(0), tokenCanChange: true, refusingGoodTokens: false)
                == .relay(.length(0), startStormGuard: false))
    }
}
