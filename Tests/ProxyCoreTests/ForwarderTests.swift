import Config
import Credentials
import Foundation
import HTTP1
import Testing

@testable import ProxyCore

/// The two head rewritings (CONTRACT points 1 and 7), bytes in and bytes out, no sockets.
@Suite struct ForwarderTests {
    static func forwarder(_ extra: String = "") throws -> Forwarder {
        let yaml = """
            listen: 127.0.0.1:8080
            upstream: https://api.example.com:8443/v1
            credentials:
              type: static
              token_env: FORWARDER_TEST_TOKEN
            \(extra)
            """
        return Forwarder(configuration: try ConfigurationLoader.parse(yaml: yaml, baseDirectory: "/", environment: ["FORWARDER_TEST_TOKEN": "t"]).configuration)
    }

    static func request(_ text: String) -> RequestHead {
        var parser = RequestParser(limits: ParserLimits(maxHeaderBytes: 8192, maxBodyBytes: 0))
        let (_, event) = Array(text.utf8).withUnsafeBytes { parser.parse($0) }
        guard case .head(let head)? = event else { fatalError("not a request head: \(text)") }
        return head
    }

    static func response(_ text: String) -> ResponseHead {
        var parser = ResponseParser(limits: ResponseParserLimits(maxHeadBytes: 8192))
        let (_, event) = Array(text.utf8).withUnsafeBytes { parser.parse($0) }
        guard case .head(let head, _)? = event else { fatalError("not a final head: \(text)") }
        return head
    }

    func upstreamHead(
        _ head: RequestHead, token: TokenSnapshot? = TokenSnapshot(accessToken: "tok", expiresAt: nil, issuedAt: 0, generation: 1),
        wholeBodyLength: Int? = nil, upgrade: Bool = false, dpop: DPoPBinding? = nil
    ) throws -> String {
        let out = ByteBuffer()
        let forwarder = try Self.forwarder()
        forwarder.writeRequestHead(
            into: out, for: head,
            Forwarder.RequestParts(
                path: "/items", query: "a=1", forwardedFor: Forwarder.forwardedForLines(peerHost: "127.0.0.1", https: false),
                forwardedHost: ByteBuffer(Array("X-Forwarded-Host: localhost:8080\r\n".utf8)), upgrade: upgrade, wholeBodyLength: wholeBodyLength),
            credential: RequestCredential(placement: forwarder.credential.placement, token: token, dpop: dpop))
        return String(decoding: out.bytes, as: UTF8.self)
    }

    /// RFC 9449 §7.1: `Authorization: DPoP` and one proof of the proxy's for this method and the
    /// upstream URL without its query; a proof the client sent does not go up beside it.
    @Test func aDPoPBoundTokenGoesWithOneFreshProofForTheUpstreamURL() throws {
        let head = Self.request("POST /items?a=1 HTTP/1.1\r\nHost: h\r\nDPoP: client-made\r\nContent-Length: 0\r\n\r\n")
        let token = TokenSnapshot(accessToken: "tok", expiresAt: nil, issuedAt: 0, generation: 1, dpop: DPoPProver.generate())
        let binding = try #require(token.dpop)
        let text = try upstreamHead(head, token: token, dpop: binding)
        #expect(text.contains("Authorization: DPoP tok\r\n"))
        #expect(!text.contains("client-made"))
        let proofs = text.split(separator: "\r\n").filter { $0.hasPrefix("DPoP: ") }
        try #require(proofs.count == 1)
        let parts = proofs[0].dropFirst("DPoP: ".count).split(separator: ".")
        try #require(parts.count == 3)
        var payload = String(parts[1]).replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while payload.count % 4 != 0 { payload += "=" }
        let data = try #require(Data(base64Encoded: payload))
        let claims = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        #expect(claims["htm"] as? String == "POST")
        #expect(claims["htu"] as? String == "https://api.example.com:8443/v1/items")
        #expect(claims["ath"] as? String == binding.accessTokenHash)
        // Without a binding the client's own DPoP field is an ordinary field.
        #expect(try upstreamHead(head).contains("DPoP: client-made\r\n"))
    }

    // MARK: request

    @Test func theRequestGoesUpWithTheTokenAndWithoutHopByHopOrSpoofableFields() throws {
        let head = Self.request(
            "GET /items?a=1 HTTP/1.1\r\nHost: localhost:8080\r\nX-First: 1\r\nConnection: keep-alive, X-Hop\r\nX-Hop: h\r\n"
                + "Authorization: Basic c2VjcmV0\r\nX-Forwarded-For: 6.6.6.6\r\nTE: trailers\r\nX-Last: z\r\n\r\n")
        #expect(
            try upstreamHead(head)
                == "GET /v1/items?a=1 HTTP/1.1\r\nHost: api.example.com:8443\r\nX-First: 1\r\nX-Last: z\r\n"
                + "Authorization: Bearer tok\r\nX-Forwarded-For: 127.0.0.1\r\nX-Forwarded-Proto: http\r\n"
                + "X-Forwarded-Host: localhost:8080\r\n\r\n")
    }

    @Test func aChunkedBodyGoesChunkedOrWholeWithItsLength() throws {
        let head = Self.request("POST /items HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n")
        let streamed = try upstreamHead(head)
        #expect(streamed.hasSuffix("Transfer-Encoding: chunked\r\n\r\n") && !streamed.contains("Content-Length"))
        let whole = try upstreamHead(head, wholeBodyLength: 1234)
        #expect(whole.hasSuffix("Content-Length: 1234\r\n\r\n") && !whole.contains("Transfer-Encoding"))
    }

    @Test func anUpgradeKeepsItsUpgradeField() throws {
        let head = Self.request("GET /ws HTTP/1.1\r\nHost: h\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Key: k\r\n\r\n")
        #expect(
            try upstreamHead(head, upgrade: true).hasSuffix(
                "Sec-WebSocket-Key: k\r\nAuthorization: Bearer tok\r\n"
                    + "X-Forwarded-For: 127.0.0.1\r\nX-Forwarded-Proto: http\r\nX-Forwarded-Host: localhost:8080\r\n"
                    + "Connection: upgrade\r\nUpgrade: websocket\r\n\r\n"))
    }

    // MARK: answer

    func clientHead(
        _ response: ResponseHead, framing: ExchangeRules.ClientFraming, closing: Bool = false, clientVersion: HTTPVersion = .http1_1
    ) throws -> String {
        let out = ByteBuffer()
        try Self.forwarder().writeResponseHead(
            into: out, response, framing: framing, closing: closing, clientVersion: clientVersion, clientHost: "localhost:8080")
        return String(decoding: out.bytes, as: UTF8.self)
    }

    @Test func oneForwarderWritesEachAnswersOwnStatusLineWhileItKeepsTheLastOne() throws {
        let forwarder = try Self.forwarder()
        var lines: [String] = []
        for text in ["HTTP/1.1 200 OK", "HTTP/1.1 200 OK", "HTTP/1.1 404 Not Found", "HTTP/1.1 200 Fine", "HTTP/1.1 200 ", "HTTP/1.1 200 OK"] {
            let out = ByteBuffer()
            forwarder.writeResponseHead(
                into: out, Self.response(text + "\r\nContent-Length: 0\r\n\r\n"), framing: .length(0), closing: false,
                clientVersion: .http1_1, clientHost: nil)
            lines.append(String(decoding: out.bytes, as: UTF8.self).components(separatedBy: "\r\n")[0])
        }
        #expect(lines == ["HTTP/1.1 200 OK", "HTTP/1.1 200 OK", "HTTP/1.1 404 Not Found", "HTTP/1.1 200 Fine", "HTTP/1.1 200 OK", "HTTP/1.1 200 OK"])
    }

    @Test func aRepeatedFieldLineIsMadeAgainWhenItsValueChanges() {
        let line = RepeatedFieldLine(name: "X-Forwarded-Host")
        #expect(line.line(for: "a.example").bytes == Array("X-Forwarded-Host: a.example\r\n".utf8))
        #expect(line.line(for: "a.example").bytes == Array("X-Forwarded-Host: a.example\r\n".utf8))
        #expect(line.line(for: "b.example:8080").bytes == Array("X-Forwarded-Host: b.example:8080\r\n".utf8))
    }

    @Test func theAnswerKeepsItsFieldsInOrderWithoutHopByHopOnes() throws {
        let response = Self.response(
            "HTTP/1.1 200 Fine\r\nX-A: 1\r\nConnection: keep-alive, X-Upstream-Hop\r\nX-Upstream-Hop: h\r\nKeep-Alive: timeout=5\r\n"
                + "Content-Length: 2\r\nX-B:  two \r\n\r\n")
        #expect(try clientHead(response, framing: .length(2)) == "HTTP/1.1 200 Fine\r\nX-A: 1\r\nContent-Length: 2\r\nX-B: two\r\n\r\n")
    }

    @Test func aChunkedAnswerDropsTheLengthAndSaysChunked() throws {
        let response = Self.response("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 9\r\nX-A: 1\r\n\r\n")
        #expect(try clientHead(response, framing: .chunked) == "HTTP/1.1 200 OK\r\nX-A: 1\r\nTransfer-Encoding: chunked\r\n\r\n")
        #expect(try clientHead(response, framing: .close, closing: true, clientVersion: .http1_0) == "HTTP/1.1 200 OK\r\nX-A: 1\r\nConnection: close\r\n\r\n")
    }

    @Test func persistenceIsSaidToTheClientAsItsVersionNeeds() throws {
        let response = Self.response("HTTP/1.0 204 No Content\r\n\r\n")
        #expect(try clientHead(response, framing: .none) == "HTTP/1.1 204 No Content\r\n\r\n")
        #expect(try clientHead(response, framing: .none, clientVersion: .http1_0) == "HTTP/1.1 204 No Content\r\nConnection: keep-alive\r\n\r\n")
        #expect(try clientHead(response, framing: .none, closing: true) == "HTTP/1.1 204 No Content\r\nConnection: close\r\n\r\n")
    }

    @Test func aLocationIntoTheUpstreamPointsAtTheProxyAndAnyOtherIsKept() throws {
        let inside = Self.response("HTTP/1.1 302 Found\r\nlocation: https://API.example.com:8443/v1/next?x=1\r\nContent-Length: 0\r\n\r\n")
        #expect(try clientHead(inside, framing: .length(0)).contains("\r\nlocation: http://localhost:8080/next?x=1\r\n"))
        let outside = Self.response("HTTP/1.1 302 Found\r\nLocation: https://elsewhere.example/v1/next\r\nContent-Length: 0\r\n\r\n")
        #expect(try clientHead(outside, framing: .length(0)).contains("\r\nLocation: https://elsewhere.example/v1/next\r\n"))
    }

    /// A route that strips its prefix gets it back in front of a Location into its upstream (nginx's
    /// `proxy_redirect default` keeps the location's prefix), absolute or path-absolute.
    @Test(
        arguments: [
            ("https://api.example.com:8443/v1/next?x=1", "http://localhost:8080/orders/next?x=1"),
            ("https://api.example.com:8443/v1", "http://localhost:8080/orders/"),
            ("https://api.example.com:8443/v1?x=1", "http://localhost:8080/orders/?x=1"),
            ("/v1/next", "/orders/next"),
            ("/v1", "/orders/"),
            ("/v1next", nil),
            ("/other", nil),
            ("//api.example.com/v1/next", nil),
            ("https://elsewhere.example/v1/next", nil),
        ] as [(String, String?)])
    func aLocationOnAStrippedRouteKeepsTheRoutesPrefix(_ location: String, _ rewritten: String?) throws {
        let routes = """
            listen: 127.0.0.1:8080
            routes:
              - name: orders
                match: {path_prefix: /orders/}
                upstream: https://api.example.com:8443/v1
                credentials: {type: static, token_env: FORWARDER_TEST_TOKEN}
            """
        let c = try ConfigurationLoader.parse(yaml: routes, baseDirectory: "/", environment: ["FORWARDER_TEST_TOKEN": "t"]).configuration
        let forwarder = Forwarder(configuration: c.selecting(route: 0))
        #expect(forwarder.rewrittenLocation(location, clientHost: "localhost:8080") == rewritten)
    }

    @Test func aPathAbsoluteLocationIntoTheBaseLosesTheBase() throws {
        #expect(try Self.forwarder().rewrittenLocation("/v1/next?x=1", clientHost: "localhost:8080") == "/next?x=1")
        #expect(try Self.forwarder().rewrittenLocation("/next", clientHost: "localhost:8080") == nil)
    }

    /// A chunked body the proxy buffered after answering `100 Continue` itself goes with
    /// Content-Length and without the client's Expect (CONTRACT `forward.request_buffering`).
    @Test func anExpectTheProxyAnsweredStaysHere() throws {
        let head = Self.request("PUT /items HTTP/1.1\r\nHost: h\r\nExpect: 100-continue\r\nX-Last: z\r\nTransfer-Encoding: chunked\r\n\r\n")
        let out = ByteBuffer()
        let forwarder = try Self.forwarder()
        forwarder.writeRequestHead(
            into: out, for: head, Forwarder.RequestParts(path: "/items", query: nil, forwardedFor: ByteBuffer(), wholeBodyLength: 5, dropsExpect: true),
            credential: RequestCredential(placement: forwarder.credential.placement, token: nil))
        let text = String(decoding: out.bytes, as: UTF8.self)
        #expect(!text.lowercased().contains("expect"))
        #expect(text.contains("\r\nX-Last: z\r\n") && text.contains("\r\nContent-Length: 5\r\n"))
        // Else the client's Expect goes up (the upstream's 100 comes back).
        #expect(try upstreamHead(head).contains("\r\nExpect: 100-continue\r\n"))
    }

    /// With `preserve_host`, an absolute-form target's authority replaces the client's Host field
    /// (RFC 9112 §3.2.2).
    @Test func aPreservedHostIsTheAbsoluteFormAuthority() throws {
        let forwarder = try Self.forwarder("forward: {preserve_host: true}")
        let head = Self.request("GET https://api.example.com:8443/x HTTP/1.1\r\nHost: attacker.example\r\n\r\n")
        let out = ByteBuffer()
        forwarder.writeRequestHead(
            into: out, for: head, Forwarder.RequestParts(path: "/x", query: nil, forwardedFor: ByteBuffer(), absoluteAuthority: "api.example.com:8443"),
            credential: RequestCredential(placement: forwarder.credential.placement, token: nil))
        let text = String(decoding: out.bytes, as: UTF8.self)
        #expect(text.contains("\r\nHost: api.example.com:8443\r\n"))
        #expect(!text.contains("attacker"))
    }

    @Test func anEmptyReasonGetsTheStandardOne() throws {
        #expect(try clientHead(Self.response("HTTP/1.1 404\r\nContent-Length: 0\r\n\r\n"), framing: .length(0)).hasPrefix("HTTP/1.1 404 Not Found\r\n"))
    }

    @Test func interimAndSwitchingHeadsKeepTheirEndToEndFields() {
        var parser = ResponseParser(limits: ResponseParserLimits(maxHeadBytes: 8192))
        let (_, event) = Array("HTTP/1.1 103 Early Hints\r\nLink: </a.css>\r\nConnection: X-Hop\r\nX-Hop: 1\r\n\r\n".utf8).withUnsafeBytes { parser.parse($0) }
        guard case .informational(let interim)? = event else {
            Issue.record("no interim head")
            return
        }
        var out = ByteBuffer()
        Forwarder.writeInformationalHead(into: out, interim)
        #expect(String(decoding: out.bytes, as: UTF8.self) == "HTTP/1.1 103 Early Hints\r\nLink: </a.css>\r\n\r\n")

        let switching = Self.response("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: a\r\n\r\n")
        out = ByteBuffer()
        Forwarder.writeSwitchingProtocolsHead(into: out, switching)
        #expect(
            String(decoding: out.bytes, as: UTF8.self)
                == "HTTP/1.1 101 Switching Protocols\r\nSec-WebSocket-Accept: a\r\nConnection: upgrade\r\nUpgrade: websocket\r\n\r\n")
    }

    @Test func aReleasedHeld401IsFramedByItsLength() throws {
        let held = Self.response("HTTP/1.1 401 Unauthorized\r\nWWW-Authenticate: Bearer\r\nTransfer-Encoding: chunked\r\n\r\n")
        let released = Forwarder.heldAnswer(held, bodyLength: 17)
        #expect(
            try clientHead(released, framing: .length(17))
                == "HTTP/1.1 401 Unauthorized\r\nWWW-Authenticate: Bearer\r\nContent-Length: 17\r\n\r\n")
    }
}
