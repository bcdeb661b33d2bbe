import Foundation
import TestSupport
import Testing

/// The TLS listener (CONTRACT.md "HTTPS for clients", issue 32 points 1 and 4), driven by real
/// clients as processes: curl, Python's ssl (tls_client.py) and `openssl s_client`. The upstream is
/// the plain-HTTP echo server.
@Suite(.tags(.endToEnd), .timeLimit(.minutes(35))) struct TLSListenerTests {
    @Test func curlGetsTheUpstreamsAnswerWithTheTokenAndForwardedProtoHTTPS() throws {
        let f = try TLSListenerFixture()
        let r = try f.curl([f.url("/hello?x=1")])
        #expect(r.status == 200, "\(r.stderr) \(f.proxy.stderr.suffix(2000))")
        let seen = try Echo(r.body)
        #expect(seen.path == "/base/hello?x=1")
        #expect(seen.value("Authorization") == "Bearer \(e2eToken)")
        #expect(seen.values("X-Forwarded-Proto") == ["https"], "\(seen.headers)")
        // A body both ways, and a download, on the same kind of connection.
        let upload = testBytes(count: 300_000)
        let dir = try TempDir(prefix: "tls-body")
        let file = try dir.write("upload", Data(upload))
        let posted = try f.curl(["-X", "POST", "--data-binary", "@\(file)", f.url("/upload")])
        #expect(posted.status == 200)
        #expect(try Echo(posted.body).body_sha256 == (try sha256Hex(upload)))
        let big = try f.curl([f.url("/big?bytes=1000000")])
        #expect(big.body == echoPattern(count: 1_000_000))
        try f.finish()
    }

    /// `tls` in a route with its own `listen`: that listener speaks TLS, the shared one stays plain.
    @Test func aRoutesOwnListenerSpeaksTLS() throws {
        let ca = try TestCA()
        let upstream = try PythonServer("echo_upstream")
        let directory = try TempDir(prefix: "route-tls")
        _ = try ca.issue(file: "route", in: directory)
        let port = try freePort()
        let proxy = try ProxyProcess(
            config: """
                \(routesProxyTop)
                routes:
                  - name: shared
                    upstream: \(upstream.baseURL)/shared
                    credentials: {type: static, token_env: E2E_TOKEN}
                  - name: own
                    match: {listen: 127.0.0.1:\(port)}
                    upstream: \(upstream.baseURL)/own
                    credentials: {type: static, token_env: E2E_TOKEN}
                    tls: {cert_file: ./route.pem, key_file: ./route-key.pem}
                """, directory: directory, environment: ["E2E_TOKEN": e2eToken])
        let own = try curl(["--cacert", ca.certificate, "https://127.0.0.1:\(port)/x"])
        #expect(own.status == 200, "\(own.stderr) \(proxy.stderr.suffix(2000))")
        let seen = try Echo(own.body)
        #expect(seen.path == "/own/x")
        #expect(seen.value("Authorization") == "Bearer \(e2eToken)")
        #expect(seen.values("X-Forwarded-Proto") == ["https"])
        // The shared listener is the one of the two `listening on` lines that is not the route's.
        let addresses = proxy.stderr.split(separator: "\n").compactMap { line in
            line.range(of: "listening on 127.0.0.1:").map { String(line[$0.upperBound...].prefix { $0.isNumber }) }
        }
        let sharedPort = try #require(addresses.first { $0 != String(port) }, "\(proxy.stderr)")
        let shared = try curl(["http://127.0.0.1:\(sharedPort)/y"])
        #expect(shared.status == 200)
        #expect(try Echo(shared.body).path == "/shared/y")
        #expect(try Echo(shared.body).values("X-Forwarded-Proto") == ["http"])
        proxy.terminate(signal: SIGTERM)
        #expect(try proxy.waitForExit(timeout: 15) == 0)
        upstream.stop()
    }

    @Test func tls12And13AreServedAndTLS11IsRefused() throws {
        let f = try TLSListenerFixture()
        let curl12 = try f.curl(["--tlsv1.2", "--tls-max", "1.2", f.url("/v12")])
        #expect(curl12.status == 200, "\(curl12.stderr)")
        for (version, name) in [("1.2", "TLSv1.2"), ("1.3", "TLSv1.3")] {
            let outcome = try TLSClient.exchange(
                port: f.proxy.port, caFile: f.ca.certificate, tlsVersion: version,
                requests: [TLSClient.Request("GET", "/v", headers: [("Host", "localhost")])])
            #expect(outcome.tlsVersion == name, "\(outcome)")
            #expect(outcome.responses.first?.status == 200, "\(outcome)")
        }
        // This client really offers TLS 1.1 (at OpenSSL's security level 0): the listener refuses.
        let old = try TLSClient.exchange(
            port: f.proxy.port, caFile: f.ca.certificate, tlsVersion: "1.1",
            requests: [TLSClient.Request("GET", "/v11", headers: [("Host", "localhost")])])
        #expect(old.handshakeSucceeded == false, "\(old)")
        #expect(old.responses.isEmpty)
        #expect(try f.upstreamCount("/base/v11") == 0)
        #expect(try f.curl([f.url("/after")]).status == 200, "the listener still serves")
        try f.finish()
    }

    @Test func alpnIsHTTP11EvenWhenTheClientOffersH2() throws {
        let f = try TLSListenerFixture()
        let outcome = try TLSClient.exchange(
            port: f.proxy.port, caFile: f.ca.certificate, alpn: ["h2", "http/1.1"],
            requests: [TLSClient.Request("GET", "/alpn", headers: [("Host", "localhost")])])
        #expect(outcome.alpn == "http/1.1", "\(outcome)")
        #expect(outcome.responses.first?.status == 200, "\(outcome)")
        // curl offering h2 first (it fails when a server picks h2 and then speaks HTTP/1.1).
        let r = try f.curl(["--http2", f.url("/h2")])
        #expect(r.status == 200, "\(r.stderr)")
        #expect(try Echo(r.body).path == "/base/h2")
        try f.finish()
    }

    /// mTLS: a client certificate signed by `client_ca_file` is required; without one, or with one
    /// from another CA, the handshake fails and nothing reaches the upstream.
    @Test func clientCertificatesAreRequiredWithClientCAFile() throws {
        let clients = try TestCA(name: "tokenproxy test clients")
        let foreign = try TestCA(name: "someone else")
        let f = try TLSListenerFixture(clientCA: clients.certificate)
        let good = try clients.issue(["client-one"], purpose: .client)
        let stranger = try foreign.issue(["client-one"], purpose: .client)

        let accepted = try f.curl(["--cert", good.certificate, "--key", good.key, f.url("/mtls-good")])
        #expect(accepted.status == 200, "\(accepted.stderr)")
        #expect(try Echo(accepted.body).value("Authorization") == "Bearer \(e2eToken)")

        let none = try f.curl([f.url("/mtls-none")])
        #expect(none.status == 0 && none.exitCode != 0, "\(none.status) \(none.bodyString)")
        let wrong = try f.curl(["--cert", stranger.certificate, "--key", stranger.key, f.url("/mtls-foreign")])
        #expect(wrong.status == 0 && wrong.exitCode != 0, "\(wrong.status) \(wrong.bodyString)")
        // The same with Python's ssl, for both TLS versions (with 1.3 the refusal comes after the
        // client's own handshake ends: the request then gets no answer).
        for version in ["1.2", "1.3"] {
            let outcome = try TLSClient.exchange(
                port: f.proxy.port, caFile: f.ca.certificate, tlsVersion: version,
                requests: [TLSClient.Request("GET", "/mtls-none-\(version)", headers: [("Host", "localhost")])])
            #expect(outcome.responses.isEmpty, "\(outcome)")
            let with = try TLSClient.exchange(
                port: f.proxy.port, caFile: f.ca.certificate, clientCertificate: good, tlsVersion: version,
                requests: [TLSClient.Request("GET", "/mtls-good-\(version)", headers: [("Host", "localhost")])])
            #expect(with.responses.first?.status == 200, "\(with)")
        }
        for path in ["/base/mtls-none", "/base/mtls-foreign", "/base/mtls-none-1.2", "/base/mtls-none-1.3"] {
            #expect(try f.upstreamCount(path) == 0, "\(path) reached the upstream")
        }
        #expect(try f.upstreamCount("/base/mtls-good") == 1)
        try f.finish()
    }

    /// Plain HTTP sent to the TLS port gets a plain 400 saying so (as nginx does), then the listener
    /// goes on serving TLS.
    @Test func plainHTTPOnTheTLSPortIsToldToUseHTTPS() throws {
        let f = try TLSListenerFixture()
        let plain = try curl(["http://127.0.0.1:\(f.proxy.port)/plain"])
        #expect(plain.status == 400, "\(plain.stderr)")
        #expect(plain.json?["error"] as? String == "bad_request")
        #expect((plain.json?["message"] as? String)?.contains("https://") == true, "\(plain.body)")
        #expect(try f.curl([f.url("/after")]).status == 200)
        #expect(try f.upstreamCount("/base/plain") == 0)
        try f.finish()
    }

    /// A key file that group or others may read: `check` and `serve` exit 2 naming the file and its mode.
    @Test func aGroupReadableKeyFileIsRefused() throws {
        let ca = try TestCA()
        let directory = try TempDir(prefix: "tls-key-mode")
        let pair = try ca.issue(file: "server", in: directory)
        try FileManager.default.setAttributes([.posixPermissions: 0o644], ofItemAtPath: pair.key)
        let config = try directory.write(
            "tokenproxy.yaml",
            """
            listen: 127.0.0.1:0
            upstream: http://127.0.0.1:9/base
            credentials: {type: static, token_env: E2E_TOKEN}
            tls: {cert_file: ./server.pem, key_file: ./server-key.pem}
            """)
        for command in ["check", "serve"] {
            let result = try ProxyProcess.run(args: [command, "--config", config], env: ["E2E_TOKEN": e2eToken], timeout: 30)
            #expect(result.status == 2, "\(command): \(result.output)")
            #expect(result.output.contains("server-key.pem"), "\(command) names the file: \(result.output)")
            #expect(result.output.contains("644") || result.output.contains("rw-r--r--"), "\(command) names the mode: \(result.output)")
            #expect(!result.output.contains("listening on"))
        }
        // The same file at 0600 is served.
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: pair.key)
        let check = try ProxyProcess.run(args: ["check", "--config", config], env: ["E2E_TOKEN": e2eToken])
        #expect(check.status == 0, "\(check.output)")
    }

    /// Failed handshakes (plain HTTP, TLS 1.0/1.1-only ClientHellos, garbage records), 200 at a time
    /// from one address, while a good client makes 200 requests, each on a new TLS connection: every good
    /// request succeeds, the listener keeps serving, and the log holds one handshake-failure line
    /// for that address per minute.
    @Test func badHandshakesNeitherStopTheListenerNorFloodTheLog() throws {
        let f = try TLSListenerFixture(logLevel: "info")
        let started = Date()
        let good = try TLSClient.Loop(port: f.proxy.port, caFile: f.ca.certificate, count: 200)
        // Bad handshakes in batches of 200 for as long as the good client runs (a batch takes well
        // under a second, the good client's 200 handshakes several).
        var batches = 0
        repeat {
            let bad = try TLSClient.failHandshakes(port: f.proxy.port, count: 200)
            #expect(bad.status == 0 && bad.stdout.contains("\"sent\": 200"), "\(bad.output)")
            batches += 1
        } while good.isRunning && batches < 50
        let outcome = try good.finish()
        #expect(outcome.succeeded == 200 && outcome.failed == 0, "\(outcome)")
        let minutes = Int(Date().timeIntervalSince(started) / 60)
        #expect(try f.curl([f.url("/still-there")]).status == 200)
        let failures = f.proxy.stderr.split(separator: "\n").filter { line in
            line.range(of: "handshake", options: .caseInsensitive) != nil && line.contains("127.0.0.1")
        }
        #expect(failures.count >= 1, "no handshake failure was logged: \(f.proxy.stderr.suffix(3000))")
        #expect(failures.count <= 1 + minutes, "\(failures.count) lines in \(minutes + 1) minute(s): \(failures.prefix(5))")
        try f.finish()
    }

    /// New certificate and key files (each replaced by a rename) while a client keeps opening new
    /// connections: no request fails, new handshakes present the new certificate, and a connection
    /// opened before the change keeps working.
    @Test func theCertificatePairIsReadAgainWhenItsFilesChange() throws {
        let f = try TLSListenerFixture()
        let old = try certificateFingerprint(file: f.certificate.certificate)
        #expect(try presentedCertificateFingerprint(port: f.proxy.port) == old)
        let kept = try TLSClient.Paused(
            port: f.proxy.port, caFile: f.ca.certificate,
            requests: [
                TLSClient.Request("GET", "/kept-1", headers: [("Host", "localhost")]),
                TLSClient.Request("GET", "/kept-2", headers: [("Host", "localhost")]),
            ], pauseAfter: 1)
        let loop = try TLSClient.Loop(port: f.proxy.port, caFile: f.ca.certificate)
        try #require(loop.waitForFirst(), "the client loop did not get going")

        let staging = try TempDir(prefix: "tls-rotation")
        let next = try f.ca.issue(file: "next", in: staging)
        let new = try certificateFingerprint(file: next.certificate)
        #expect(new != old)
        // Staged beside the live files (same file system) so that each rename is atomic.
        let folder = URL(fileURLWithPath: f.certificate.key).deletingLastPathComponent()
        for (from, to) in [(next.key, f.certificate.key), (next.certificate, f.certificate.certificate)] {
            let beside = folder.appendingPathComponent(".incoming-" + URL(fileURLWithPath: to).lastPathComponent).path
            try FileManager.default.copyItem(atPath: from, toPath: beside)
            try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: beside)
            #expect(rename(beside, to) == 0)
        }
        var presented = old
        let deadline = Date().addingTimeInterval(20)
        while presented != new && Date() < deadline {
            presented = try presentedCertificateFingerprint(port: f.proxy.port)
            if presented != new { Thread.sleep(forTimeInterval: 0.2) }
        }
        #expect(presented == new, "new handshakes still present the old certificate")
        #expect(loop.waitForCertificate(new), "the client loop never met the new certificate")

        let outcome = try loop.finish()
        #expect(outcome.failed == 0 && outcome.succeeded > 0, "\(outcome)")
        #expect(outcome.fingerprints.first == old, "\(outcome)")
        #expect(outcome.fingerprints == [old, new], "\(outcome)")
        let keptOutcome = try kept.resume()
        #expect(keptOutcome.responses.map(\.status) == [200, 200], "\(keptOutcome)")
        #expect(keptOutcome.certificateFingerprint == old, "the open connection keeps the pair it began with")
        try f.finish()
    }
}
