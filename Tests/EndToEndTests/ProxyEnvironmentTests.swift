import Foundation
import TestSupport
import Testing

/// CONTRACT.md: upstream calls honour HTTP_PROXY / HTTPS_PROXY / NO_PROXY as curl does, and a proxy
/// in effect is logged at start. The forward proxy here is a second echo server: it accepts the
/// CONNECT that tokenproxy sends for every upstream behind a proxy (docs/ENGINE.md) and serves the
/// tunnel itself.
@Suite struct ProxyEnvironmentTests {
    @Test func httpProxyFromTheEnvironmentCarriesUpstreamRequests() throws {
        let forwardProxy = try PythonServer("echo_upstream")
        defer { forwardProxy.stop() }
        // A host name that does not resolve: only a proxy can reach it.
        let proxyURL = "http://proxy-user:proxy-secret@127.0.0.1:\(forwardProxy.port)"
        let f = try Fixture(upstreamURL: "http://upstream.invalid:8080/base", environment: ["http_proxy": proxyURL])
        let r = try curl([f.url("/via?x=1")])
        #expect(r.status == 200, "\(r.bodyString)")
        let echo = try Echo(r.body)
        #expect(echo.tunnel == "upstream.invalid:8080")
        #expect(echo.path == "/base/via?x=1")
        #expect(echo.values("Host") == ["upstream.invalid:8080"])
        #expect(echo.values("Authorization") == ["Bearer \(e2eToken)"])
        // A second request goes the same way (on the pooled tunnel).
        let again = try Echo(try curl([f.url("/again")]).body)
        #expect(again.tunnel == "upstream.invalid:8080")
        #expect(again.path == "/base/again")
        // The proxy's credentials reach the proxy (on the CONNECT), never the upstream or the log.
        let proxyAuthorization = (echo.tunnel_headers ?? []).filter { $0.first?.lowercased() == "proxy-authorization" }.map { $0.last ?? "" }
        #expect(proxyAuthorization == ["Basic cHJveHktdXNlcjpwcm94eS1zZWNyZXQ="])
        #expect(echo.values("Proxy-Authorization").isEmpty)
        #expect(f.proxy.stderr.contains("upstream requests go through the proxy http://****@127.0.0.1:\(forwardProxy.port) (from http_proxy)"))
        #expect(!f.proxy.stderr.contains("proxy-secret"))
        try f.finish()
    }

    @Test func noProxyListingTheUpstreamHostGoesDirect() throws {
        // A proxy that nobody listens on: any request through it would fail with 502.
        let f = try Fixture(environment: ["http_proxy": "http://127.0.0.1:9", "no_proxy": "localhost,127.0.0.1"])
        let r = try curl([f.url("/direct")])
        #expect(r.status == 200, "\(r.bodyString)")
        #expect(try Echo(r.body).path == "/base/direct")
        try f.finish()
    }

    @Test func upperCaseHTTPProxyIsIgnoredForPlainHTTPAsCurlDoes() throws {
        // curl reads only the lower-case http_proxy (a CGI request's `Proxy:` header becomes HTTP_PROXY).
        let f = try Fixture(environment: ["HTTP_PROXY": "http://127.0.0.1:9"])
        let r = try curl([f.url("/direct")])
        #expect(r.status == 200, "\(r.bodyString)")
        #expect(try Echo(r.body).path == "/base/direct")
        try f.finish()
    }
}
