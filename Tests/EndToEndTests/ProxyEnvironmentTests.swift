import Foundation
import TestSupport
import Testing

/// CONTRACT.md: upstream calls honour HTTP_PROXY / HTTPS_PROXY / NO_PROXY as curl does, and a proxy
/// in effect is logged at start. The forward proxy here is a second echo server: it answers every
/// request itself, echoing the absolute-form target a client sends to a proxy.
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
        #expect(echo.path == "http://upstream.invalid:8080/base/via?x=1")
        #expect(echo.values("Authorization") == ["Bearer \(e2eToken)"])
        // A second request on the kept-alive connection goes the same way.
        let again = try curl([f.url("/again")])
        #expect(try Echo(again.body).path == "http://upstream.invalid:8080/base/again")
        // The proxy's credentials reach the proxy, never the log.
        #expect(echo.values("Proxy-Authorization") == ["Basic cHJveHktdXNlcjpwcm94eS1zZWNyZXQ="])
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
