import Foundation
import TestSupport
import Testing

/// CONTRACT.md, "What the proxy does with a request", point 1: what reaches the upstream.
@Suite(.tags(.endToEnd), .timeLimit(.minutes(35))) struct ForwardingTests {
    @Test func bearerTokenFromTheEnvironmentReachesTheUpstream() throws {
        let f = try Fixture()
        let r = try curl([f.url("/hello")])
        #expect(r.status == 200, "\(r.bodyString) \(r.stderr)")
        let echo = try Echo(r.body)
        #expect(echo.values("Authorization") == ["Bearer \(e2eToken)"])
        #expect(echo.method == "GET")
        try f.finish()
    }

    @Test func clientsOwnAuthorizationIsReplaced() throws {
        let f = try Fixture()
        let r = try curl(["-H", "Authorization: Bearer client-own-credential", f.url("/x")])
        #expect(r.status == 200)
        let echo = try Echo(r.body)
        #expect(echo.values("Authorization") == ["Bearer \(e2eToken)"])
        #expect(!String(decoding: r.body, as: UTF8.self).contains("client-own-credential"))
        try f.finish()
    }

    @Test func pathIsAppendedToTheUpstreamBasePathAndQueryIsKept() throws {
        let f = try Fixture(basePath: "/v1")
        let r = try curl([f.url("/users/42?fields=a,b&q=two%20words")])
        #expect(r.status == 200)
        let echo = try Echo(r.body)
        #expect(echo.path == "/v1/users/42?fields=a,b&q=two%20words")
        try f.finish()
    }

    @Test func rootPathMapsToTheBasePath() throws {
        let f = try Fixture(basePath: "/base")
        let response = try f.exchange(rawRequest("GET", "/?a=1", host: f.host)).response
        #expect(response.status == 200)
        let echo = try Echo(response.body)
        #expect(echo.path == "/base/?a=1" || echo.path == "/base?a=1", "\(echo.path)")
        try f.finish()
    }

    @Test func dotSegmentsAreRemovedBeforeForwarding() throws {
        let f = try Fixture()
        let response = try f.exchange(rawRequest("GET", "/a/./b/../c/%2e%2e/d?x=../y", host: f.host)).response
        #expect(response.status == 200, "\(response)")
        let echo = try Echo(response.body)
        // RFC 3986 §5.2.4 on the path only; the query is kept as it came. `%2e%2e` is left to the
        // upstream's judgement only if the proxy does not decode it; both readings are accepted.
        #expect(echo.path == "/base/a/c/%2e%2e/d?x=../y" || echo.path == "/base/a/d?x=../y", "\(echo.path)")
        try f.finish()
    }

    @Test func plainDotSegmentsCollapse() throws {
        let f = try Fixture()
        let r = try curl(["--path-as-is", f.url("/a/b/../../c/./d")])
        #expect(r.status == 200)
        #expect(try Echo(r.body).path == "/base/c/d")
        try f.finish()
    }

    @Test func pathClimbingAboveRootIsABadRequest() throws {
        let f = try Fixture()
        let response = try f.exchange(rawRequest("GET", "/../x", host: f.host)).response
        expectProxyError(response, status: 400, code: "bad_request")
        try f.finish()
    }

    @Test func hopByHopHeadersAreRemovedAndForwardedHeadersSet() throws {
        let f = try Fixture()
        let client = try f.connect()
        try client.send(
            rawRequest(
                "GET", "/hop", host: f.host,
                headers: [
                    ("X-First", "1"),
                    ("Connection", "keep-alive, X-Custom-Hop"),
                    ("X-Custom-Hop", "gone"),
                    ("Keep-Alive", "timeout=5"),
                    ("Proxy-Authorization", "Basic Zm9vOmJhcg=="),
                    ("Proxy-Connection", "keep-alive"),
                    ("TE", "trailers"),
                    ("X-Forwarded-For", "6.6.6.6"),
                    ("X-Second", "two, values"),
                    ("x-third", "Mixed Case Value"),
                ]))
        let response = try client.readResponse()
        #expect(response.status == 200, "\(response)")
        let echo = try Echo(response.body)
        for name in ["Connection", "X-Custom-Hop", "Keep-Alive", "Proxy-Authorization", "Proxy-Connection", "TE", "Transfer-Encoding", "Upgrade"] {
            #expect(!echo.has(name), "\(name) reached the upstream: \(echo.headers)")
        }
        #expect(echo.values("X-Forwarded-For") == ["127.0.0.1"])
        #expect(echo.values("X-Forwarded-Proto") == ["http"])
        #expect(echo.values("Host") == ["127.0.0.1:\(f.upstream.port)"])
        // Names, order and values of the end-to-end headers are kept.
        #expect(echo.values("X-Second") == ["two, values"])
        #expect(echo.values("x-third") == ["Mixed Case Value"])
        #expect(echo.headers.contains { $0 == ["x-third", "Mixed Case Value"] })
        let order = echo.names.filter { ["x-first", "x-second", "x-third"].contains($0) }
        #expect(order == ["x-first", "x-second", "x-third"])
        try f.finish()
    }

    /// Names with an underscore never go up (nginx's `underscores_in_headers off`): a WSGI or CGI
    /// server reads `X_Forwarded_For` as HTTP_X_FORWARDED_FOR, which would spoof the proxy's own field.
    /// The drops are counted.
    @Test func fieldNamesWithAnUnderscoreAreDroppedAndCounted() throws {
        let f = try Fixture(extra: "admin:\n  listen: 127.0.0.1:0")
        let client = try f.connect()
        try client.send(
            rawRequest(
                "GET", "/underscore", host: f.host,
                headers: [("X_Forwarded_For", "6.6.6.6"), ("X-Kept", "yes"), ("X_Forwarded_Host", "evil.example")]))
        let response = try client.readResponse()
        #expect(response.status == 200, "\(response)")
        let echo = try Echo(response.body)
        #expect(echo.values("X-Forwarded-For") == ["127.0.0.1"])
        #expect(!echo.names.contains { $0.contains("_") }, "\(echo.headers)")
        #expect(echo.values("X-Kept") == ["yes"])
        #expect(try series(f.proxy, "tokenproxy_dropped_header_fields_total") == 2)
        try f.finish()
    }

    @Test func proxyAddsNoHeadersOfItsOwn() throws {
        let f = try Fixture()
        let client = try f.connect()
        try client.send(rawRequest("GET", "/bare", host: f.host))
        let echo = try Echo(try client.readResponse().body)
        for name in ["Accept", "Expect", "Content-Type", "User-Agent", "Content-Length", "Transfer-Encoding"] {
            #expect(!echo.has(name), "\(name) was added: \(echo.headers)")
        }
        // Uploads: libcurl would add Expect: 100-continue to a large or chunked body, and a Content-Type to a POST.
        let big = testBytes(count: 2 * 1024 * 1024)
        try client.send(rawRequest("POST", "/big-upload", host: f.host, body: big))
        let upload = try Echo(try client.readResponse().body)
        try client.send(
            rawRequest("PUT", "/chunked-upload", host: f.host, headers: [("Transfer-Encoding", "chunked")], body: chunked(big), contentLength: false))
        let chunkedUpload = try Echo(try client.readResponse().body)
        for echo in [upload, chunkedUpload] {
            #expect(echo.body_len == big.count)
            for name in ["Accept", "Expect", "Content-Type", "User-Agent"] {
                #expect(!echo.has(name), "\(name) was added: \(echo.headers)")
            }
        }
        try f.finish()
    }

    @Test func upstreamStatusAndBodyPassThrough() throws {
        let f = try Fixture()
        let r = try curl([f.url("/status/404")])
        #expect(r.status == 404)
        #expect(r.json?["status"] as? Int == 404)
        let noContent = try curl([f.url("/status/204")])
        #expect(noContent.status == 204)
        #expect(noContent.body.isEmpty)
        try f.finish()
    }

    @Test func absoluteFormForTheUpstreamItselfIsTreatedLikeOriginForm() throws {
        let f = try Fixture()
        let response = try f.exchange(rawRequest("GET", "http://127.0.0.1:\(f.upstream.port)/abs?q=1", host: "127.0.0.1:\(f.upstream.port)")).response
        #expect(response.status == 200, "\(response)")
        #expect(try Echo(response.body).path == "/base/abs?q=1")
        try f.finish()
    }

    /// The proxy's answer to the echo upstream's redirect to `target`.
    static func redirect(_ f: Fixture, to target: String) throws -> CurlResult {
        try curl([f.url("/redirect?to=\(target.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!)")])
    }

    @Test func upstreamRedirectIntoTheBaseURLIsRewrittenToTheProxy() throws {
        let f = try Fixture()
        let target = "\(f.upstream.baseURL)/base/next?x=1"
        let r = try Self.redirect(f, to: target)
        #expect(r.status == 302)
        let location = try #require(r.header("Location"))
        // Absolute (pointing at the proxy) or relative, as nginx's `proxy_redirect default` may give.
        let resolved = URL(string: location, relativeTo: URL(string: f.proxy.baseURL + "/redirect"))!.absoluteURL
        #expect(["127.0.0.1", "localhost"].contains(resolved.host ?? ""), "\(location)")
        #expect(resolved.port == f.proxy.port, "\(location)")
        #expect(resolved.path == "/next", "\(location)")
        #expect(resolved.query == "x=1", "\(location)")
        try f.finish()
    }

    @Test func upstreamRedirectElsewhereIsPassedOnUnchanged() throws {
        let f = try Fixture()
        let target = "https://elsewhere.example/base/next?x=1"
        let r = try Self.redirect(f, to: target)
        #expect(r.status == 302)
        #expect(r.header("Location") == target)
        try f.finish()
    }
}
