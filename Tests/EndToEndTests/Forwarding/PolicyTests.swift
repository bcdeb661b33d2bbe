import Foundation
import TestSupport
import Testing

/// The `access:` and `forward:` sections, limits, and other listen and token sources
/// (CONTRACT.md, configuration file and errors table).
@Suite(.tags(.endToEnd), .timeLimit(.minutes(35))) struct PolicyTests {
    @Test func requireHeaderRefusesClientsWithoutTheKeyAndStripsIt() throws {
        let key = "proxy-key-\(UUID().uuidString)"
        let f = try Fixture(
            extra: "access:\n  require_header: X-Proxy-Key\n  require_value_env: PROXY_KEY",
            environment: ["PROXY_KEY": key])
        expectProxyError(try curl([f.url("/k")]), status: 403, code: "forbidden_client")
        expectProxyError(try curl(["-H", "X-Proxy-Key: wrong-key-value", f.url("/k")]), status: 403, code: "forbidden_client")
        let ok = try curl(["-H", "X-Proxy-Key: \(key)", f.url("/k")])
        #expect(ok.status == 200)
        let echo = try Echo(ok.body)
        #expect(!echo.has("X-Proxy-Key"), "the access header reached the upstream")
        try f.finish()
        #expect(!f.proxy.stderr.contains(key), "the proxy key appeared in stderr")
    }

    @Test func allowPathsAndMethodsRestrictRequests() throws {
        let f = try Fixture(extra: "access:\n  allow_paths: [\"/users/\"]\n  allow_methods: [GET]")
        #expect(try curl([f.url("/users/1")]).status == 200)
        expectProxyError(try curl([f.url("/orders/1")]), status: 403, code: "forbidden_path")
        expectProxyError(try curl(["-X", "DELETE", f.url("/users/1")]), status: 403, code: "forbidden_path")
        // The check applies after dot-segments are removed.
        expectProxyError(try curl(["--path-as-is", f.url("/users/../orders/1")]), status: 403, code: "forbidden_path")
        try f.finish()
    }

    @Test func clientAuthorizationRejectAnswers400() throws {
        let f = try Fixture(extra: "forward:\n  client_authorization: reject")
        let r = try curl(["-H", "Authorization: Bearer mine-123456", f.url("/r")])
        expectProxyError(r, status: 400, code: "client_authorization_rejected")
        #expect(try curl([f.url("/r")]).status == 200)
        try f.finish()
    }

    @Test func clientAuthorizationKeepForwardsTheClientsHeader() throws {
        let f = try Fixture(extra: "forward:\n  client_authorization: keep")
        let kept = try Echo(try curl(["-H", "Authorization: Bearer mine-123456", f.url("/k")]).body)
        #expect(kept.values("Authorization") == ["Bearer mine-123456"])
        let injected = try Echo(try curl([f.url("/k")]).body)
        #expect(injected.values("Authorization") == ["Bearer \(e2eToken)"])
        try f.finish()
    }

    @Test func bodyOverMaxBodyBytesIs413() throws {
        let f = try Fixture(extra: "limits:\n  max_body_bytes: 1KiB")
        let response = try f.exchange(rawRequest("POST", "/upload", host: f.host, body: testBytes(count: 4096))).response
        expectProxyError(response, status: 413, code: "body_too_large")
        let small = try curl(["--data-binary", "small body", f.url("/upload")])
        #expect(small.status == 200)
        try f.finish()
    }

    @Test func expectContinueGets100ThenTheAnswer() throws {
        let f = try Fixture()
        let client = try f.connect()
        let body = Array("continued body".utf8)
        try client.send(
            rawRequest("POST", "/continue", host: f.host, headers: [("Expect", "100-continue")], body: [], contentLength: false)
                .dropLast(2) + Array("Content-Length: \(body.count)\r\n\r\n".utf8))
        let interim = try client.readResponse(timeout: 5)
        #expect(interim.status == 100, "\(interim)")
        try client.send(body)
        let final = interim.status == 100 ? try client.readFinalResponse() : interim
        #expect(final.status == 200)
        let echo = try Echo(final.body)
        #expect(echo.body == "continued body")
        try f.finish()
    }

    @Test func unixSocketListenerServesRequests() throws {
        let upstream = try PythonServer("echo_upstream")
        let dir = try TempDir()
        let socketPath = dir.file("proxy.sock")
        let proxy = try ProxyProcess(
            config: staticTokenConfig(listen: "unix:\(socketPath)", upstream: "\(upstream.baseURL)/base"),
            directory: dir,
            environment: ["E2E_TOKEN": e2eToken])
        #expect(proxy.address == "unix:\(socketPath)")
        let r = try curl(["--unix-socket", socketPath, "http://localhost/over-unix"])
        #expect(r.status == 200)
        #expect(try Echo(r.body).values("Authorization") == ["Bearer \(e2eToken)"])
        try proxy.stopAndExpectCleanExit()
    }

    @Test func environmentOverridesListenAndUpstream() throws {
        let upstream = try PythonServer("echo_upstream")
        let proxy = try ProxyProcess(
            config: staticTokenConfig(listen: "127.0.0.1:1", upstream: "http://127.0.0.1:9/nowhere"),
            environment: [
                "E2E_TOKEN": e2eToken,
                "TOKENPROXY_LISTEN": "127.0.0.1:0",
                "TOKENPROXY_UPSTREAM": upstream.baseURL + "/over",
            ])
        let r = try curl([proxy.baseURL + "/ridden"])
        #expect(r.status == 200)
        #expect(try Echo(r.body).path == "/over/ridden")
        try proxy.stopAndExpectCleanExit()
    }

    @Test func tokenFileIsReadRelativeToTheConfigFolder() throws {
        let upstream = try PythonServer("echo_upstream")
        let dir = try TempDir()
        let fileToken = "file-token-\(UUID().uuidString)"
        try dir.write("secrets/token", fileToken + "\n", mode: 0o600)
        let proxy = try ProxyProcess(
            config: proxyConfig(upstream: upstream.baseURL, credentials: "type: static\ntoken_file: secrets/token", more: "log:\n  level: debug"),
            directory: dir)
        let r = try curl([proxy.baseURL + "/f"])
        #expect(try Echo(r.body).values("Authorization") == ["Bearer \(fileToken)"])
        try proxy.stopAndExpectCleanExit()
        #expect(!proxy.stderr.contains(fileToken))
    }

    @Test func nonLoopbackListenIsRefusedWithoutAllowRemote() throws {
        let dir = try TempDir()
        let config = try dir.write(
            "tokenproxy.yaml",
            """
            listen: 0.0.0.0:0
            upstream: http://127.0.0.1:9
            credentials:
              type: static
              token_env: E2E_TOKEN
            """)
        let result = try ProxyProcess.run(args: ["check", "--config", config], env: ["E2E_TOKEN": e2eToken])
        #expect(result.status == 2, "\(result.output)")
        #expect(result.output.contains("allow_remote") || result.output.contains("listen"), "\(result.output)")
    }
}
