import Foundation
import TestSupport
import Testing

/// A throwaway CA, a server certificate for 127.0.0.1 and a client certificate, made with the
/// openssl command for each test run.
struct TestPKI {
    let dir: TempDir
    var caFile: String { dir.file("ca.pem") }
    var serverCert: String { dir.file("server.pem") }
    var serverKey: String { dir.file("server.key") }
    var clientCert: String { dir.file("client.pem") }
    var clientKey: String { dir.file("client.key") }

    init() throws {
        dir = try TempDir(prefix: "tokenproxy-pki")
        _ = try dir.write("san.cnf", "subjectAltName=IP:127.0.0.1,DNS:localhost\n")
        let steps: [[String]] = [
            [
                "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-days", "2",
                "-subj", "/CN=tokenproxy test CA", "-keyout", dir.file("ca.key"), "-out", caFile,
            ],
            [
                "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-subj", "/CN=127.0.0.1",
                "-keyout", serverKey, "-out", dir.file("server.csr"),
            ],
            [
                "x509", "-req", "-in", dir.file("server.csr"), "-CA", caFile, "-CAkey", dir.file("ca.key"),
                "-CAcreateserial", "-days", "2", "-extfile", dir.file("san.cnf"), "-out", serverCert,
            ],
            [
                "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-subj", "/CN=tokenproxy client",
                "-keyout", clientKey, "-out", dir.file("client.csr"),
            ],
            [
                "x509", "-req", "-in", dir.file("client.csr"), "-CA", caFile, "-CAkey", dir.file("ca.key"),
                "-CAcreateserial", "-days", "2", "-out", clientCert,
            ],
        ]
        for step in steps {
            let result = try runCommand("/usr/bin/openssl", arguments: step, timeout: 30)
            guard result.status == 0 else { throw PKIError(message: result.output) }
        }
    }

    struct PKIError: Error { let message: String }
}

@Suite(.tags(.endToEnd), .timeLimit(.minutes(35))) struct UpstreamTLSTests {
    let token = "tls-static-token-\(UUID().uuidString.lowercased())"

    func proxy(upstreamPort: Int, tls: String) throws -> ProxyProcess {
        try ProxyProcess(
            config: """
                listen: 127.0.0.1:0
                upstream: https://127.0.0.1:\(upstreamPort)/base
                workers: 1
                drain_timeout: 2s
                credentials:
                  type: static
                  token_env: TLS_TOKEN
                \(tls)
                """,
            environment: ["TLS_TOKEN": token])
    }

    func stop(_ proxy: ProxyProcess) throws {
        proxy.terminate(signal: SIGTERM)
        #expect(try proxy.waitForExit(timeout: 15) == 0)
        #expect(!proxy.stderr.contains(token))
    }

    @Test func httpsUpstreamIsVerifiedAgainstTheConfiguredCA() throws {
        let pki = try TestPKI()
        let upstream = try PythonServer("echo_upstream", arguments: ["--tls-cert", pki.serverCert, "--tls-key", pki.serverKey])
        defer { upstream.stop() }
        let proxy = try proxy(upstreamPort: upstream.port, tls: "upstream_tls:\n  ca_file: \(pki.caFile)")
        let response = try curl([proxy.baseURL + "/hello"])
        #expect(response.status == 200)
        #expect(response.bodyString.contains("Bearer \(token)"))
        #expect(response.bodyString.contains("/base/hello"))
        try stop(proxy)
    }

    @Test func httpsUpstreamWithAnUnknownCAIsABadGateway() throws {
        let pki = try TestPKI()
        let upstream = try PythonServer("echo_upstream", arguments: ["--tls-cert", pki.serverCert, "--tls-key", pki.serverKey])
        defer { upstream.stop() }
        let proxy = try proxy(upstreamPort: upstream.port, tls: "")
        let response = try curl([proxy.baseURL + "/hello"])
        #expect(response.status == 502)
        #expect(response.bodyString.contains("\"error\":\"bad_gateway\""))
        #expect(!response.bodyString.contains(token))
        try stop(proxy)
    }

    @Test func insecureSkipVerifyIsAcceptedAndLoggedAsAWarning() throws {
        let pki = try TestPKI()
        let upstream = try PythonServer("echo_upstream", arguments: ["--tls-cert", pki.serverCert, "--tls-key", pki.serverKey])
        defer { upstream.stop() }
        let proxy = try proxy(upstreamPort: upstream.port, tls: "upstream_tls:\n  insecure_skip_verify: true")
        let response = try curl([proxy.baseURL + "/hello"])
        #expect(response.status == 200)
        #expect(proxy.stderr.contains("insecure_skip_verify"))
        try stop(proxy)
    }

    /// Issue 32 point 6: a benchmark's (or a user's) clients come back in bursts minutes apart. With
    /// the default `upstream_keepalive_timeout`, the connections of one burst still carry the next
    /// after a pause longer than the old default of 60 s: counted at the TLS server, 64 connections
    /// for two bursts of 64 keep-alive clients, not 128. Each of them sends TCP keep-alive probes.
    @Test(.tags(.slow)) func burstsMinutesApartReuseTheUpstreamTLSConnections() throws {
        let pki = try TestPKI()
        let upstream = try PythonServer("echo_upstream", arguments: ["--tls-cert", pki.serverCert, "--tls-key", pki.serverKey])
        defer { upstream.stop() }
        let proxy = try proxy(upstreamPort: upstream.port, tls: "upstream_tls:\n  ca_file: \(pki.caFile)")
        let clients = 64
        // Slow enough that every client's request is upstream at once: each needs a connection.
        let request = "GET /slow-head?ms=300 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
        func burst() throws {
            let connections = try (0..<clients).map { _ in try RawHTTPClient(port: proxy.port, timeout: 30) }
            for _ in 0..<3 {
                for c in connections { try c.send(request) }
                for c in connections {
                    let status = try c.readResponse().status
                    #expect(status == 200)
                }
            }
        }
        try burst()
        Thread.sleep(forTimeInterval: 65)
        try burst()
        // Asked through the proxy, on a pooled connection: every connection the server saw is the proxy's.
        let answer = try curl([proxy.baseURL + "/connections"])
        #expect(answer.status == 200)
        let object = try JSONSerialization.jsonObject(with: Data(answer.bodyString.utf8)) as? [String: Any]
        let seen = object?["connections"] as? Int
        #expect(seen == clients, "the TLS server accepted \(seen ?? -1) connections for \(clients) clients")
        let sockets = try runCommand("/usr/bin/ss", arguments: ["-Htno", "state", "established", "( dport = :\(upstream.port) )"], timeout: 10)
        let lines = sockets.output.split(separator: "\n")
        #expect(lines.count == clients && lines.allSatisfy { $0.contains("timer:(keepalive") }, "\(sockets.output)")
        try stop(proxy)
    }

    @Test func mutualTLSSendsTheConfiguredClientCertificate() throws {
        let pki = try TestPKI()
        let upstream = try PythonServer(
            "echo_upstream", arguments: ["--tls-cert", pki.serverCert, "--tls-key", pki.serverKey, "--tls-client-ca", pki.caFile])
        defer { upstream.stop() }
        let withCert = try proxy(
            upstreamPort: upstream.port,
            tls: "upstream_tls:\n  ca_file: \(pki.caFile)\n  client_cert_file: \(pki.clientCert)\n  client_key_file: \(pki.clientKey)")
        #expect(try curl([withCert.baseURL + "/mtls"]).status == 200)
        try stop(withCert)
        let withoutCert = try proxy(upstreamPort: upstream.port, tls: "upstream_tls:\n  ca_file: \(pki.caFile)")
        #expect(try curl([withoutCert.baseURL + "/mtls"]).status == 502)
        try stop(withoutCert)
    }
}
