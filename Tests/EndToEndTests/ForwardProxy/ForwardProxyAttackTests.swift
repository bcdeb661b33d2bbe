import Foundation
import TestSupport
import Testing

/// The forward proxy's pin (CONTRACT.md "HTTPS for clients"; issue 32 point 2), attacked with raw
/// sockets and Python's ssl (tls_client.py): the host fixed by the CONNECT line binds the SNI and
/// every request in the tunnel; IP literals, loopback, link-local and foreign ports are refused; a
/// route's credentials never reach another host. Two routes, each with its own echo upstream, so
/// that anything misdirected would be seen (and counted) where it must not arrive.
@Suite(.tags(.endToEnd), .timeLimit(.minutes(35))) struct ForwardProxyAttackTests {
    final class TwoRoutes: Sendable {
        let a: PythonServer
        let b: PythonServer
        let f: ForwardProxyFixture

        init(forwardProxy: String = "  other_hosts: refuse", top: String = "", environment: [String: String] = [:]) throws {
            a = try PythonServer("echo_upstream")
            b = try PythonServer("echo_upstream")
            f = try ForwardProxyFixture(
                routes: [
                    .init(name: "a", host: "a.example.test", upstream: a.baseURL + "/a"),
                    .init(name: "b", host: "b.example.test", upstream: b.baseURL + "/b"),
                ], forwardProxy: forwardProxy, top: top, environment: environment)
        }

        /// Every request each upstream has had, by path (the questions themselves left out).
        func counts() throws -> (a: [String: Int], b: [String: Int]) {
            func of(_ server: PythonServer) throws -> [String: Int] {
                try #require(try curl([server.baseURL + "/count"]).json?["counts"] as? [String: Int]).filter { $0.key != "/count" }
            }
            return (try of(a), try of(b))
        }

        func finish(sourceLocation: SourceLocation = #_sourceLocation) throws {
            try f.finish(sourceLocation: sourceLocation)
            a.stop()
            b.stop()
        }
    }

    static func get(_ target: String, host: String) -> TLSClient.Request {
        TLSClient.Request("GET", target, headers: [("Host", host)])
    }

    @Test func anSNIThatNamesAnotherHostFailsTheHandshake() throws {
        let w = try TwoRoutes()
        // The control: the SNI of the CONNECT host is served.
        let good = try w.f.tunnel("a.example.test:443", requests: [Self.get("/sni-ok", host: "a.example.test")])
        #expect(good.connectStatus == 200, "\(good)")
        #expect(good.handshakeSucceeded == true, "\(good)")
        #expect(good.responses.first?.status == 200, "\(good)")
        // The other route's name, and a name no route has, both in the SNI of a tunnel to a.
        // The client verifies nothing here: a handshake that fails, fails at the proxy.
        for name in ["b.example.test", "c.example.test"] {
            let bad = try w.f.tunnel(
                "a.example.test:443", serverName: name, verify: false, requests: [Self.get("/sni-\(name)", host: "a.example.test")])
            #expect(bad.connectStatus == 200, "\(bad)")
            #expect(bad.handshakeSucceeded == false, "SNI \(name) in a tunnel to a.example.test: \(bad)")
            #expect(bad.responses.isEmpty)
        }
        let counts = try w.counts()
        #expect(counts.a == ["/a/sni-ok": 1], "\(counts)")
        #expect(counts.b.isEmpty, "\(counts)")
        try w.finish()
    }

    /// A request in the tunnel whose Host, absolute-form authority or port is not the CONNECT's:
    /// 421 `misdirected_request`, and neither upstream sees anything.
    @Test func aRequestForAnotherHostInTheTunnelIs421() throws {
        let w = try TwoRoutes()
        let misdirected: [(String, TLSClient.Request)] = [
            ("Host of the other route", Self.get("/host-b", host: "b.example.test")),
            ("Host of no route", Self.get("/host-c", host: "c.example.test")),
            ("Host with another port", Self.get("/host-port", host: "a.example.test:8443")),
            ("absolute form of the other route", Self.get("https://b.example.test/absolute-b", host: "a.example.test")),
            ("absolute form with another port", Self.get("https://a.example.test:8443/absolute-port", host: "a.example.test")),
        ]
        for (what, request) in misdirected {
            let outcome = try w.f.tunnel("a.example.test:443", requests: [request])
            #expect(outcome.handshakeSucceeded == true, "\(what): \(outcome)")
            expectProxyError(outcome.responses.first, status: 421, code: "misdirected_request")
        }
        // The control, in the same kind of tunnel: the CONNECT's host (also with its port, and in
        // absolute form) is served, with a's token, at a.
        let served = try w.f.tunnel(
            "a.example.test:443",
            requests: [
                Self.get("/ok-1", host: "a.example.test"), Self.get("/ok-2", host: "a.example.test:443"),
                Self.get("https://a.example.test/ok-3", host: "a.example.test"),
            ])
        #expect(served.responses.map(\.status) == [200, 200, 200], "\(served)")
        for response in served.responses {
            #expect(try echo(response.body).value("Authorization") == "Bearer \(e2eToken)")
        }
        let counts = try w.counts()
        #expect(counts.a == ["/a/ok-1": 1, "/a/ok-2": 1, "/a/ok-3": 1], "\(counts)")
        #expect(counts.b.isEmpty, "\(counts)")
        try w.finish()
    }

    /// IP literals, loopback, link-local (metadata) and a route's host on a port it does not give:
    /// 403 `forbidden_target` whatever `other_hosts` says; with `refuse`, any unknown host too.
    @Test(arguments: ["refuse", "tunnel"])
    func connectTargetsThatAreAlwaysRefused(otherHosts: String) throws {
        let w = try TwoRoutes(forwardProxy: "  other_hosts: \(otherHosts)")
        var refused = ["127.0.0.1:443", "169.254.169.254:80", "169.254.169.254:443", "[::1]:443", "a.example.test:8443", "10.0.0.1:443"]
        // A name that resolves to loopback, through the system resolver.
        refused.append("localhost:443")
        if otherHosts == "refuse" { refused.append("unknown.example.test:443") }
        for target in refused {
            expectRefusedConnect(try w.f.connect(target), status: 403, code: "forbidden_target")
        }
        // The access log has one line per refused CONNECT.
        let logged = w.f.proxy.stderr.split(separator: "\n").filter { $0.contains("method=CONNECT") && $0.contains("status=403") }
        #expect(logged.count == refused.count, "\(logged)")
        // The control: the route's own host on 443 is answered.
        #expect(try w.f.connect("a.example.test:443").connectStatus == 200)
        let counts = try w.counts()
        #expect(counts.a.isEmpty && counts.b.isEmpty, "\(counts)")
        try w.finish()
    }

    /// Python requests' CONNECT (HTTP/1.0, no Host field) is served like any other.
    @Test func anHTTP10ConnectWithoutHostIsServed() throws {
        let w = try TwoRoutes()
        let outcome = try TLSClient.exchange(
            port: w.f.proxy.port, connect: "a.example.test:443", connectVersion: "1.0", connectHost: false, caFile: w.f.caFile,
            requests: [Self.get("/old-connect", host: "a.example.test")])
        #expect(outcome.connectStatus == 200, "\(outcome)")
        #expect(outcome.responses.first?.status == 200, "\(outcome)")
        try w.finish()
    }

    @Test func connectWithoutForwardProxyIs405() throws {
        let f = try Fixture()
        let r = try f.exchange("CONNECT api.example.test:443 HTTP/1.1\r\nHost: api.example.test:443\r\n\r\n").response
        expectProxyError(r, status: 405, code: "method_not_allowed")
        #expect(r.header("Allow") != nil, "\(r)")
        try f.finish()
    }

    /// `require_header` is checked once, on the CONNECT: as the header itself or as
    /// `Proxy-Authorization: Bearer <value>`; the requests in the tunnel need neither.
    @Test func requireHeaderIsCheckedOnTheConnect() throws {
        let key = "proxy-key-\(UUID().uuidString.prefix(8))"
        let w = try TwoRoutes(
            top: """
                access:
                  require_header: X-Proxy-Key
                  require_value_env: PROXY_KEY
                """, environment: ["PROXY_KEY": key])
        for headers in [[], ["X-Proxy-Key: wrong"], ["Proxy-Authorization: Bearer wrong"], ["X-Other: \(key)"]] {
            expectRefusedConnect(try w.f.connect("a.example.test:443", headers: headers), status: 403, code: "forbidden_client")
        }
        var tunnels: [TLSClient.Outcome] = []
        for field in ["X-Proxy-Key: \(key)", "Proxy-Authorization: Bearer \(key)"] {
            let outcome = try w.f.tunnel("a.example.test:443", connectHeaders: [field], requests: [Self.get("/keyed", host: "a.example.test")])
            #expect(outcome.connectStatus == 200, "\(field): \(outcome)")
            tunnels.append(outcome)
        }
        // The requests in the tunnel are not asked for the key again (it was checked on the CONNECT).
        for outcome in tunnels {
            #expect(outcome.responses.first?.status == 200, "\(outcome)")
            let seen = try echo(outcome.responses.first?.body ?? "")
            #expect(!seen.has("X-Proxy-Key") && !seen.has("Proxy-Authorization"))
        }
        // curl sends the key to the proxy only (--proxy-header).
        let r = try w.f.curl(["--proxy-header", "X-Proxy-Key: \(key)", "https://a.example.test/curl-keyed"])
        #expect(r.status == 200, "\(r.stderr)")
        #expect(!w.f.proxy.stderr.contains(key), "the key reached the log")
        try w.finish()
    }
}
