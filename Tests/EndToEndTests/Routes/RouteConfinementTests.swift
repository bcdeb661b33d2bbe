import Foundation
import TestSupport
import Testing

/// A route's token stays inside the route's upstream base path (CONTRACT point 1 and "Several APIs
/// in one process"; issue 29, points 1, 2 and 4), end to end: the real binary in front of a real
/// nginx (which decodes `%2F` and `%2E` and resolves dot-segments before it serves a path) or the
/// echo upstream.
@Suite("A route's token stays inside its upstream base path", .tags(.endToEnd), .timeLimit(.minutes(35)))
struct RouteConfinementTests {
    static let ordersToken = "orders-token-\(UUID().uuidString.lowercased())"
    static let otherToken = "other-token-\(UUID().uuidString.lowercased())"

    /// nginx answering every path with the path it resolved and the Authorization it got.
    static func nginx() throws -> Nginx {
        try Nginx(server: #"location / { return 200 "$uri|$http_authorization\n"; }"#)
    }

    static func proxy(_ yaml: String) throws -> ProxyProcess {
        try ProxyProcess(config: yaml, environment: ["ORDERS_TOKEN": ordersToken, "OTHER_TOKEN": otherToken])
    }

    /// Sends `target` byte for byte (no client-side normalisation) and reads the answer.
    static func get(_ proxy: ProxyProcess, _ target: String) throws -> HTTPResponse {
        let client = try RawHTTPClient(port: proxy.port)
        defer { client.close() }
        try client.send(rawRequest("GET", target, host: proxy.address, headers: [("Connection", "close")]))
        return try client.readResponse()
    }

    @Test(arguments: ["/orders../admin/users", "/orders%2e%2e/admin/users", "/orders%2E%2E/admin/users", "/ordersx/admin"])
    func aPathPrefixMatchesWholeSegmentsOnly(target: String) throws {
        let nginx = try Self.nginx()
        let proxy = try Self.proxy(
            """
            listen: 127.0.0.1:0
            workers: 1
            routes:
              - name: orders
                match: {path_prefix: /orders}
                upstream: \(nginx.baseURL)/v1
                credentials: {type: static, token_env: ORDERS_TOKEN}
            """)
        let response = try Self.get(proxy, target)
        expectProxyError(response, status: 404, code: "no_route")
        #expect(nginx.servedPaths().isEmpty, "nginx served \(nginx.servedPaths())")
        // The prefix itself and what lies under it still reach the base path, with the token.
        for (path, upstreamPath) in [("/orders", "/v1/"), ("/orders/7", "/v1/7"), ("/orders/a/../b", "/v1/b")] {
            let inside = try Self.get(proxy, path)
            #expect(inside.status == 200, "\(path): \(inside)")
            #expect(inside.bodyString == "\(upstreamPath)|Bearer \(Self.ordersToken)\n", "\(path)")
        }
        proxy.terminate()
        _ = try proxy.waitForExit()
    }

    /// A `..` set apart by an encoded slash is a dot-segment to nginx: refused, whether a route
    /// strips a prefix or not.
    @Test(
        arguments: [
            ("/orders/", "/orders/..%2F..%2Fadmin/users"), ("/orders/", "/orders/%2e%2e%2F%2e%2e%2Fadmin"),
            ("/orders/", "/orders/x/..%5C..%5C..%2Fadmin"), (nil, "/..%2Fadmin"), (nil, "/a/..%2F..%2Fadmin"), (nil, "/%2e%2e%2fadmin"),
        ] as [(String?, String)])
    func anEncodedSlashCannotHideADotSegment(prefix: String?, target: String) throws {
        let nginx = try Self.nginx()
        let yaml: String
        if let prefix {
            yaml = """
                listen: 127.0.0.1:0
                workers: 1
                routes:
                  - name: orders
                    match: {path_prefix: \(prefix)}
                    upstream: \(nginx.baseURL)/v1
                    credentials: {type: static, token_env: ORDERS_TOKEN}
                """
        } else {
            yaml = """
                listen: 127.0.0.1:0
                workers: 1
                upstream: \(nginx.baseURL)/v1
                credentials: {type: static, token_env: ORDERS_TOKEN}
                """
        }
        let proxy = try Self.proxy(yaml)
        let response = try Self.get(proxy, target)
        expectProxyError(response, status: 400, code: "bad_request")
        #expect(nginx.servedPaths().isEmpty, "nginx served \(nginx.servedPaths()) with the route's token")
        proxy.terminate()
        _ = try proxy.waitForExit()
    }

    /// An upstream redirect on a stripped route comes back with the route's prefix, so a client
    /// that follows it (re-posting its body) stays on the same route and token.
    @Test func aRedirectOnAStrippedRouteKeepsTheRoutesPrefix() throws {
        let orders = try PythonServer("echo_upstream")
        let other = try PythonServer("echo_upstream")
        let proxy = try Self.proxy(
            """
            listen: 127.0.0.1:0
            workers: 1
            routes:
              - name: orders
                match: {path_prefix: /orders/}
                upstream: \(orders.baseURL)/v1
                credentials: {type: static, token_env: ORDERS_TOKEN}
              - name: other
                upstream: \(other.baseURL)
                credentials: {type: static, token_env: OTHER_TOKEN}
            """)
        for location in ["\(orders.baseURL)/v1/next?x=1", "/v1/next?x=1"] {
            let encoded = location.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
            let r = try curl(["-X", "POST", "--data", "body", proxy.baseURL + "/orders/redirect?to=\(encoded)"])
            #expect(r.status == 302, "\(r.bodyString)")
            let given = try #require(r.header("Location"))
            let resolved = URL(string: given, relativeTo: URL(string: proxy.baseURL + "/orders/redirect"))!.absoluteURL
            #expect(resolved.port == proxy.port, "\(location) came back as \(given)")
            #expect(resolved.path == "/orders/next" && resolved.query == "x=1", "\(location) came back as \(given)")
            // Following it re-posts the body to the same route's upstream, with that route's token.
            let followed = try curl(["-X", "POST", "--data", "body", resolved.absoluteString])
            #expect(followed.status == 200)
            let echo = try Echo(followed.body)
            #expect(echo.path == "/v1/next?x=1")
            #expect(echo.value("authorization") == "Bearer \(Self.ordersToken)")
        }
        proxy.terminate()
        _ = try proxy.waitForExit()
        orders.stop()
        other.stop()
    }

    /// With `forward.preserve_host`, the Host that goes upstream is the absolute-form target's
    /// authority (RFC 9112 §3.2.2), never a Host field the client chose beside it; and it passes
    /// `access.allow_hosts` whichever form carried it.
    @Test func anAbsoluteFormTargetsAuthorityIsTheHostThatGoesUpstream() throws {
        let upstream = try PythonServer("echo_upstream")
        defer { upstream.stop() }
        let authority = "127.0.0.1:\(upstream.port)"
        func serve(access: String) throws -> ProxyProcess {
            try Self.proxy(
                """
                listen: 127.0.0.1:0
                workers: 1
                upstream: \(upstream.baseURL)
                forward: {preserve_host: true}
                \(access)
                credentials: {type: static, token_env: ORDERS_TOKEN}
                """)
        }
        func send(_ proxy: ProxyProcess, _ target: String, host: String) throws -> HTTPResponse {
            let client = try RawHTTPClient(port: proxy.port)
            defer { client.close() }
            try client.send(rawRequest("GET", target, host: host))
            return try client.readResponse()
        }
        let open = try serve(access: "")
        let response = try send(open, "http://\(authority)/x", host: "attacker.example")
        #expect(response.status == 200, "\(response)")
        #expect(try Echo(response.body).values("host") == [authority])
        open.terminate()
        _ = try open.waitForExit()

        let narrow = try serve(access: "access: {allow_hosts: [proxy.internal]}")
        expectProxyError(try send(narrow, "http://\(authority)/x", host: "proxy.internal"), status: 403, code: "forbidden_host")
        expectProxyError(try send(narrow, "/x", host: authority), status: 403, code: "forbidden_host")
        let allowed = try send(narrow, "/x", host: "proxy.internal")
        #expect(allowed.status == 200, "\(allowed)")
        #expect(try Echo(allowed.body).values("host") == ["proxy.internal"])
        narrow.terminate()
        _ = try narrow.waitForExit()
    }
}
