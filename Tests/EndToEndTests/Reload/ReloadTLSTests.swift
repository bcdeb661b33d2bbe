import Foundation
import TestSupport
import Testing

/// A reload that adds `tls:` to a listener, or `forward_proxy:` to the file (CONTRACT.md "Reload
/// without a restart" and "HTTPS for clients"): new connections follow the new file, and a
/// connection opened before keeps being served as it began.
@Suite(.tags(.endToEnd), .timeLimit(.minutes(35))) struct ReloadTLSTests {
    @Test func aReloadTurnsAListenerToTLSAndOpensTheForwardProxy() throws {
        let ca = try TestCA()
        let upstream = try PythonServer("echo_upstream")
        let directory = try TempDir(prefix: "reload-tls")
        _ = try ca.issue(file: "tls/server", in: directory)
        let own = try freePort()
        func file(tls: Bool, forwardProxy: Bool) -> String {
            """
            listen: 127.0.0.1:0
            workers: 1
            admin:
              listen: 127.0.0.1:0
            \(forwardProxy ? "forward_proxy: {}" : "")
            routes:
              - name: own
                match: {listen: "127.0.0.1:\(own)"}
                upstream: \(upstream.baseURL)/own
                credentials: {type: static, token_env: E2E_TOKEN}
            \(tls ? "    tls: {cert_file: ./tls/server.pem, key_file: ./tls/server-key.pem}" : "")
              - name: api
                match: {host: api.example.test}
                upstream: \(upstream.baseURL)/api
                credentials: {type: static, token_env: E2E_TOKEN}
            """
        }
        let proxy = try ProxyProcess(config: file(tls: false, forwardProxy: false), directory: directory, environment: ["E2E_TOKEN": e2eToken])
        // Before: plain HTTP on the route's listener, and CONNECT is 405.
        let kept = try RawHTTPClient(port: own)
        try kept.send(rawRequest("GET", "/before", host: "127.0.0.1:\(own)"))
        #expect(try kept.readResponse().status == 200)
        let connect = try RawHTTPClient(port: proxy.port)
        try connect.send(Array("CONNECT api.example.test:443 HTTP/1.1\r\nHost: api.example.test:443\r\n\r\n".utf8))
        #expect(try connect.readResponse().status == 405)
        connect.close()

        _ = try directory.write("tokenproxy.yaml", file(tls: true, forwardProxy: true))
        let reload = try curl(["-X", "POST", try #require(proxy.adminURL) + "/reload"])
        #expect(reload.status == 200, "\(reload.body)")

        // After: the route's listener speaks TLS to new connections, with X-Forwarded-Proto https...
        let https = try curl(["--cacert", ca.certificate, "https://127.0.0.1:\(own)/after"])
        #expect(https.status == 200, "\(https.stderr)")
        let seen = try Echo(https.body)
        #expect(seen.path == "/own/after")
        #expect(seen.value("X-Forwarded-Proto") == "https")
        // ...the connection opened before is still served in plain HTTP...
        try kept.send(rawRequest("GET", "/still", host: "127.0.0.1:\(own)"))
        #expect(try kept.readResponse().status == 200)
        kept.close()
        // ...and CONNECT to a host route opens a tunnel whose CA `tokenproxy ca` prints.
        let printed = try ProxyProcess.run(args: ["ca", "--config", directory.file("tokenproxy.yaml")], env: ["E2E_TOKEN": e2eToken])
        #expect(printed.status == 0, "\(printed.stderr)")
        let caFile = try directory.write("proxy-ca.pem", printed.stdout)
        let tunnelled = try curl(
            ["--cacert", caFile, "https://api.example.test/through"],
            environment: ["HTTPS_PROXY": "http://127.0.0.1:\(proxy.port)"])
        #expect(tunnelled.status == 200, "\(tunnelled.stderr)")
        #expect(try Echo(tunnelled.body).path == "/api/through")

        try proxy.stopAndExpectCleanExit()
        upstream.stop()
    }
}
