import Foundation
import TestSupport
import Testing

/// CONTRACT.md: upstream calls honour HTTP_PROXY / HTTPS_PROXY / NO_PROXY as curl does, and a proxy
/// in effect is logged at start. The forward proxy here is a second echo server: it accepts the
/// CONNECT that tokenproxy sends for every upstream behind a proxy (docs/ENGINE.md) and serves the
/// tunnel itself. The tinyproxy tests put a real forward proxy (Debian's tinyproxy) between
/// tokenproxy and the upstream.
@Suite(.tags(.endToEnd), .timeLimit(.minutes(35))) struct ProxyEnvironmentTests {
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

    /// The proxy in effect is logged for every route's scheme, not only the first route's (issue 33).
    @Test func theProxyOfARouteOtherThanTheFirstIsLogged() throws {
        let forwardProxy = try PythonServer("echo_upstream")
        defer { forwardProxy.stop() }
        let proxy = try ProxyProcess(
            config: """
                listen: 127.0.0.1:0
                workers: 1
                routes:
                  - name: secure
                    match: {path_prefix: /secure/}
                    upstream: https://secure.invalid
                    credentials: {type: static, token_env: E2E_TOKEN}
                  - name: plain
                    upstream: http://upstream.invalid:8080/base
                    credentials: {type: static, token_env: E2E_TOKEN}
                """,
            environment: ["E2E_TOKEN": e2eToken, "http_proxy": "http://127.0.0.1:\(forwardProxy.port)", "https_proxy": "", "HTTPS_PROXY": ""])
        #expect(
            proxy.waitForStderr(containing: "upstream requests go through the proxy http://127.0.0.1:\(forwardProxy.port) (from http_proxy) (routes plain)"),
            "\(proxy.stderr)")
        let r = try curl([proxy.baseURL + "/x"])
        #expect(r.status == 200, "\(r.bodyString)")
        #expect(try Echo(r.body).tunnel == "upstream.invalid:8080")
        try proxy.stopAndExpectCleanExit()
    }

    /// Issue 39 point 11: `export HTTPS_PROXY=http://127.0.0.1:8080` in the shell that starts the
    /// proxy on 8080 must not send its own calls to itself. Here `http_proxy` names the proxy
    /// listener (the identity provider is plain http) and `HTTPS_PROXY` names the admin listener
    /// as `localhost` (the upstream is https): both are ignored with one warning each, the token is
    /// fetched and the request answered. The ports are fixed before the start, as such a shell's are.
    @Test func aProxyVariableNamingTheProxysOwnListenAddressIsIgnored() throws {
        let idp = try OAuthServer.start()
        defer { idp.stop() }
        let pki = try TestPKI()
        let upstream = try PythonServer("echo_upstream", arguments: ["--tls-cert", pki.serverCert, "--tls-key", pki.serverKey])
        defer { upstream.stop() }
        let listenPort = try freePort()
        let adminPort = try freePort()
        let proxy = try ProxyProcess(
            config: """
                listen: 127.0.0.1:\(listenPort)
                workers: 1
                admin:
                  listen: 127.0.0.1:\(adminPort)
                upstream: https://127.0.0.1:\(upstream.port)/base
                upstream_tls:
                  ca_file: \(pki.caFile)
                credentials:
                  type: oauth2_client_credentials
                  token_url: \(idp.tokenURL)
                  client_id: app
                  client_secret_env: SELF_PROXY_SECRET
                """,
            environment: [
                "SELF_PROXY_SECRET": "secret", "http_proxy": "http://127.0.0.1:\(listenPort)",
                "HTTPS_PROXY": "http://user:proxy-secret@localhost:\(adminPort)", "no_proxy": "", "NO_PROXY": "",
            ])
        let r = try curl([proxy.baseURL + "/self?x=1"])
        #expect(r.status == 200, "\(r.bodyString)\n\(proxy.stderr.suffix(3000))")
        let echo = try Echo(r.body)
        #expect(echo.path == "/base/self?x=1")
        #expect(echo.tunnel == nil)
        #expect(echo.value("Authorization")?.hasPrefix("Bearer ") == true)
        #expect(try idp.stats().count(OAuthGrant.clientCredentials) >= 1)
        let stderr = proxy.stderr
        let warnings = stderr.split(separator: "\n").filter { $0.contains("names tokenproxy's own listen address") }
        #expect(warnings.filter { $0.contains("http_proxy=http://127.0.0.1:\(listenPort) ") }.count == 1, "\(stderr)")
        #expect(warnings.filter { $0.contains("HTTPS_PROXY=http://****@localhost:\(adminPort) ") }.count == 1, "\(stderr)")
        #expect(warnings.count == 2, "\(warnings)")
        #expect(!stderr.contains("go through the proxy"))
        #expect(!stderr.contains("proxy-secret"))
        try proxy.stopAndExpectCleanExit()
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

    @Test func plainHTTPUpstreamThroughTinyproxy() throws {
        let tiny = try Tinyproxy()
        defer { tiny.stop() }
        let f = try FramingFixture(environment: ["http_proxy": tiny.url])
        let port = f.upstream.port
        let client = try f.connect()
        var heads: [String] = []
        for i in 0..<3 {
            try client.send(rawRequest("GET", "/rawhead?n=\(i)", host: f.host))
            let r = try client.readResponse()
            #expect(r.status == 200, "\(r)")
            let b64 = try #require(r.json?["head_b64"] as? String, "\(r)")
            heads.append(String(decoding: try #require(Data(base64Encoded: b64)), as: UTF8.self))
        }
        let body = testBytes(count: 100_000, seed: 2)
        try client.send(rawRequest("POST", "/ok", host: f.host, body: body))
        let posted = try client.readResponse()
        #expect(posted.json?["body_len"] as? Int == body.count)
        #expect(posted.json?["body_sha256"] as? String == (try sha256Hex(body)))

        for head in heads {
            #expect(head.contains("\r\nAuthorization: Bearer \(e2eToken)\r\n"), "\(head)")
        }
        let log = tiny.log()
        let tunnelled = log.contains("CONNECT 127.0.0.1:\(port) ")
        let forwarded = log.contains("GET http://127.0.0.1:\(port)/f/rawhead?n=0 ")
        #expect(tunnelled || forwarded, "tinyproxy never saw the requests:\n\(log)")
        if forwarded {
            // tinyproxy forwarded them itself and said so.
            #expect(heads.allSatisfy { $0.contains("Via: 1.1 \(tiny.viaName)") }, "\(heads)")
        }
        #expect(!log.contains(e2eToken), "the token reached tinyproxy's log")
        #expect(f.proxy.stderr.contains("through the proxy http://127.0.0.1:\(tiny.port)"), "\(f.proxy.stderr)")
        try f.finish()
    }

    @Test func httpsUpstreamThroughTinyproxyIsTunnelled() throws {
        let tiny = try Tinyproxy()
        defer { tiny.stop() }
        let pki = try TestPKI()
        let upstream = try PythonServer("echo_upstream", arguments: ["--tls-cert", pki.serverCert, "--tls-key", pki.serverKey])
        defer { upstream.stop() }
        let f = try Fixture(
            extra: "upstream_tls:\n  ca_file: \(pki.caFile)", upstreamURL: "https://127.0.0.1:\(upstream.port)/base",
            environment: ["HTTPS_PROXY": tiny.url])
        for i in 0..<3 {
            let r = try curl([f.url("/tls?n=\(i)")])
            #expect(r.status == 200, "\(r.bodyString)")
            let echo = try Echo(r.body)
            #expect(echo.path == "/base/tls?n=\(i)")
            #expect(echo.values("Authorization") == ["Bearer \(e2eToken)"])
        }
        let log = tiny.log()
        #expect(log.contains("CONNECT 127.0.0.1:\(upstream.port) "), "tinyproxy tunnelled nothing:\n\(log)")
        #expect(!log.contains(e2eToken))
        try f.finish()
    }
}
