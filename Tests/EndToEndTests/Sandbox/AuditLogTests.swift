import Foundation
import TestSupport
import Testing

/// The audit log (CONTRACT.md "Programs in a sandbox", "Audit log"), as an operator reads it: the
/// file `audit.path` names, with curl as the client. Each line is in the file by the time the client
/// has its answer (it is written before the answer's last byte), so the tests read it right after.
@Suite(.tags(.endToEnd), .timeLimit(.minutes(20))) struct AuditLogTests {
    static let host = "api.example.test"
    static let querySecret = "query-secret-5f1d0c"

    /// The audit file's lines as JSON objects.
    static func lines(_ path: String) throws -> [[String: Any]] {
        let text = (try? String(contentsOfFile: path, encoding: .utf8)) ?? ""
        return try text.split(separator: "\n").map { line in
            try #require(JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any], "\(line)")
        }
    }

    /// The keys of `line` in the order the line has them.
    static func keyOrder(_ path: String, matching needle: String) throws -> [String] {
        let text = try String(contentsOfFile: path, encoding: .utf8)
        let line = try #require(text.split(separator: "\n").first { $0.contains(needle) })
        return line.split(separator: ",").compactMap { member in
            let name = member.drop { $0 == "{" }.prefix { $0 != ":" }
            return name.hasPrefix("\"") ? String(name.dropFirst().dropLast()) : nil
        }
    }

    @Test func forwardedRefusedAndConnectDecisionsEachHaveTheirLineAndARotatedFileIsReopened() throws {
        let upstream = try PythonServer("echo_upstream")
        defer { upstream.stop() }
        let f = try ForwardProxyFixture(
            routes: [.init(name: "api", host: Self.host, upstream: upstream.baseURL + "/base", extra: "    access: {allow_paths: [\"/allowed\"]}")],
            forwardProxy: "  other_hosts: tunnel", top: "audit: {path: ./audit.jsonl}")
        let audit = f.proxy.directory.file("audit.jsonl")
        let plain = ["-H", "Host: \(Self.host)"]

        // Forwarded: the path without its query, the route's credential and placement.
        let forwarded = try curl(plain + [f.proxy.baseURL + "/allowed/items?key=\(Self.querySecret)"])
        #expect(forwarded.status == 200, "\(forwarded.bodyString)")
        var lines = try Self.lines(audit)
        let first = try #require(lines.last, "no audit line once the answer was in")
        #expect(first["event"] as? String == "request")
        #expect(first["decision"] as? String == "forwarded")
        #expect(first["route"] as? String == "api")
        #expect(first["caller"] as? String == "default")
        #expect(first["client"] as? String == "127.0.0.1")
        #expect(first["method"] as? String == "GET")
        #expect(first["host"] as? String == Self.host)
        #expect(first["path"] as? String == "/allowed/items")
        #expect(first["status"] as? Int == 200)
        #expect(first["upstream_status"] as? Int == 200)
        #expect(first["credential"] as? String == "static")
        #expect(first["placement"] as? String == "authorization")
        #expect(first["placeholder"] as? Bool == false)
        #expect(first["scrubbed"] as? Int == 0)
        #expect(first["reason"] == nil)
        #expect(
            try Self.keyOrder(audit, matching: "/allowed/items") == [
                "ts", "event", "decision", "route", "caller", "client", "method", "host", "path", "status", "upstream_status", "credential",
                "placement", "placeholder", "scrubbed",
            ])

        // Refused by `access.allow_paths`: nothing went upstream.
        let refused = try curl(plain + [f.proxy.baseURL + "/private?key=\(Self.querySecret)"])
        #expect(refused.status == 403)
        lines = try Self.lines(audit)
        let refusal = try #require(lines.last)
        #expect(refusal["decision"] as? String == "refused")
        #expect(refusal["reason"] as? String == "forbidden_path")
        #expect(refusal["status"] as? Int == 403)
        #expect(refusal["path"] as? String == "/private")
        #expect(refusal["upstream_status"] == nil)

        // A CONNECT to the route's host is intercepted; the request in the tunnel is forwarded.
        let intercepted = try f.curl(["https://\(Self.host)/allowed/tunnelled"])
        #expect(intercepted.status == 200, "\(intercepted.stderr)")
        lines = try Self.lines(audit)
        let connect = try #require(lines.first { $0["event"] as? String == "connect" && $0["decision"] as? String == "intercepted" }, "\(lines)")
        #expect(connect["route"] as? String == "api")
        #expect(connect["method"] as? String == "CONNECT")
        #expect(connect["host"] as? String == "\(Self.host):443")
        #expect(connect["status"] as? Int == 200)
        let inTunnel = try #require(lines.last)
        #expect(inTunnel["path"] as? String == "/allowed/tunnelled" && inTunnel["decision"] as? String == "forwarded", "\(inTunnel)")

        // A CONNECT to a port other than 443, and one to a name that resolves to a loopback address
        // (`other_hosts: tunnel` checks every address): both refused.
        let otherPort = try curl(["https://elsewhere.example.test:8443/"], environment: ["HTTPS_PROXY": f.proxyURL])
        #expect(otherPort.exitCode != 0)
        let loopback = try curl(["https://localhost/"], environment: ["HTTPS_PROXY": f.proxyURL])
        #expect(loopback.exitCode != 0)
        lines = try Self.lines(audit)
        let refusedConnects = lines.filter { $0["event"] as? String == "connect" && $0["decision"] as? String == "refused" }
        #expect(refusedConnects.map { $0["host"] as? String } == ["elsewhere.example.test:8443", "localhost:443"], "\(lines)")
        // Both are 403 forbidden_target to the client; the audit says which rule refused the second.
        #expect(refusedConnects.map { $0["reason"] as? String } == ["forbidden_target", "deny_address"], "\(refusedConnects)")
        #expect(refusedConnects.allSatisfy { $0["status"] as? Int == 403 }, "\(refusedConnects)")

        // The file is the process's own, 0600.
        let mode = try FileManager.default.attributesOfItem(atPath: audit)[.posixPermissions] as? Int
        #expect(mode == 0o600)

        // Rotation: moved away, then SIGUSR1; the next lines go to a new file at the path.
        let rotated = audit + ".1"
        try FileManager.default.moveItem(atPath: audit, toPath: rotated)
        f.proxy.terminate(signal: SIGUSR1)
        #expect(f.proxy.waitForStderr(containing: "audit log reopened"), "\(f.proxy.stderr.suffix(2000))")
        #expect(try curl(plain + [f.proxy.baseURL + "/allowed/after-rotation"]).status == 200)
        #expect(try Self.lines(audit).map { $0["path"] as? String } == ["/allowed/after-rotation"])
        #expect(try Self.lines(rotated).count == lines.count, "the rotated file got a line after SIGUSR1")
        let newMode = try FileManager.default.attributesOfItem(atPath: audit)[.posixPermissions] as? Int
        #expect(newMode == 0o600)

        // No token, secret or query string in any line of the run.
        let everything = try String(contentsOfFile: rotated, encoding: .utf8) + String(contentsOfFile: audit, encoding: .utf8)
        #expect(!everything.contains(e2eToken))
        #expect(!everything.contains(Self.querySecret) && !everything.contains("?"))
        try f.proxy.stopAndExpectCleanExit()
    }

    /// Many clients at once on one worker: the lines of the answers that end in one turn of its
    /// loop are written together, and before any of those answers' last bytes (the proxy's own
    /// flush, a fixed-length body's last bytes sent straight from the upstream's read, a chunked
    /// answer's last chunk). Each client, once it holds its whole answer, finds its line in the file.
    @Test func eachOfManyConcurrentAnswersHasItsLineInTheFileOnceTheClientHasIt() throws {
        let f = try Fixture(extra: "audit: {path: ./audit.jsonl}")
        let audit = f.proxy.directory.file("audit.jsonl")
        let clients = try (0..<24).map { _ in try f.connect(timeout: 60) }
        let endpoints = ["", "/big?bytes=300000", "/stream?bytes=300000"]
        for round in 0..<4 {
            for (index, client) in clients.enumerated() {
                try client.send(rawRequest("GET", "/r\(round)/c\(index)" + endpoints[index % 3], host: f.host))
            }
            for (index, client) in clients.enumerated() {
                let response = try client.readResponse()
                #expect(response.status == 200)
                let path = "/r\(round)/c\(index)" + (index % 3 == 0 ? "" : endpoints[index % 3].prefix { $0 != "?" })
                let text = (try? String(contentsOfFile: audit, encoding: .utf8)) ?? ""
                #expect(text.contains(#""path":"\#(path)""#), "no line for \(path) once its answer was in")
            }
        }
        #expect(try Self.lines(audit).count == 4 * clients.count)
        try f.proxy.stopAndExpectCleanExit()
    }

    /// Each call to the identity provider is a `credential` line: a client-credentials token is
    /// minted at start, and a forced one that fails says why. No token or client secret in the file.
    @Test func eachMintIsACredentialLineAndAFailureSaysWhy() throws {
        let clientSecret = "client-secret-9a7e31"
        var options = OAuthServer.Options()
        options.clients = [.init(id: "app", secret: clientSecret)]
        let idp = try OAuthServer.start(options)
        let upstream = try PythonServer("echo_upstream")
        defer { upstream.stop() }
        let proxy = try ProxyProcess(
            config: """
                \(routesProxyTop)
                audit: {path: ./audit.jsonl}
                routes:
                  - name: minted
                    upstream: \(upstream.baseURL)
                    credentials: {type: oauth2_client_credentials, token_url: "\(idp.tokenURL)", client_id: app, client_secret_env: AUDIT_SECRET}
                """, environment: ["AUDIT_SECRET": clientSecret])
        let audit = proxy.directory.file("audit.jsonl")
        let answered = try curl([proxy.baseURL + "/first"])
        #expect(answered.status == 200)
        let token = try #require(try Echo(answered.body).value("Authorization")?.replacingOccurrences(of: "Bearer ", with: ""))
        let minted = try #require(try Self.lines(audit).first { $0["event"] as? String == "credential" })
        #expect(minted["route"] as? String == "minted")
        #expect(minted["credential"] as? String == "oauth2_client_credentials")
        #expect(minted["action"] as? String == "mint")
        #expect(minted["outcome"] as? String == "success")
        #expect(minted["reason"] == nil)
        #expect(try Self.keyOrder(audit, matching: "\"credential\",") == ["ts", "event", "route", "credential", "action", "outcome"])

        // A forced refresh (SIGHUP) that the identity provider refuses with a 503.
        try idp.failNext(status: 503)
        proxy.terminate(signal: SIGHUP)
        var failure: [String: Any]?
        let deadline = Date().addingTimeInterval(30)
        while failure == nil && Date() < deadline {
            failure = try Self.lines(audit).first { $0["event"] as? String == "credential" && $0["outcome"] as? String == "failure" }
            if failure == nil { Thread.sleep(forTimeInterval: 0.1) }
        }
        let failed = try #require(failure, "no failed credential line: \(proxy.stderr.suffix(2000))")
        #expect(failed["action"] as? String == "mint")
        #expect(failed["reason"] as? String == "http_5xx")

        let text = try String(contentsOfFile: audit, encoding: .utf8)
        #expect(!text.contains(token) && !text.contains(clientSecret))
        try proxy.stopAndExpectCleanExit()
    }

    /// `"-"` writes the lines to stderr; a reload that names a file moves them there from the next
    /// request on, and one that names no audit stops them.
    @Test func stderrFirstThenAFileAfterAReloadThenNone() throws {
        let upstream = try PythonServer("echo_upstream")
        defer { upstream.stop() }
        let base = staticTokenConfig(upstream: upstream.baseURL, logLevel: "info")
        let proxy = try ProxyProcess(config: base + "audit: {path: \"-\"}\n", environment: ["E2E_TOKEN": e2eToken])
        #expect(try curl([proxy.baseURL + "/to-stderr"]).status == 200)
        #expect(proxy.waitForStderr(containing: #""event":"request","decision":"forwarded""#), "\(proxy.stderr.suffix(2000))")
        #expect(proxy.stderr.contains(#""path":"/to-stderr""#))

        try proxy.directory.write("tokenproxy.yaml", base + "audit: {path: ./audit.jsonl}\n")
        proxy.terminate(signal: SIGUSR2)
        #expect(proxy.waitForStderr(containing: "configuration reloaded"), "\(proxy.stderr.suffix(2000))")
        #expect(try curl([proxy.baseURL + "/to-file"]).status == 200)
        let audit = proxy.directory.file("audit.jsonl")
        #expect(try Self.lines(audit).map { $0["path"] as? String } == ["/to-file"])
        #expect(!proxy.stderr.contains(#""path":"/to-file""#))

        try proxy.directory.write("tokenproxy.yaml", base)
        proxy.terminate(signal: SIGUSR2)
        let deadline = Date().addingTimeInterval(15)
        while proxy.stderr.components(separatedBy: "configuration reloaded").count < 3 && Date() < deadline { Thread.sleep(forTimeInterval: 0.1) }
        #expect(try curl([proxy.baseURL + "/no-audit"]).status == 200)
        #expect(try Self.lines(audit).count == 1, "a line after audit: was removed")
        try proxy.stopAndExpectCleanExit()
    }

    /// On a listener that asks for client certificates, `client` is the certificate's subject.
    @Test func theClientOfAnMTLSListenerIsItsCertificatesSubject() throws {
        let clients = try TestCA(name: "audit test clients")
        let f = try TLSListenerFixture(clientCA: clients.certificate, more: "audit: {path: ./audit.jsonl}")
        let agent = try clients.issue(["agent-7"], purpose: .client)
        let answered = try f.curl(["--cert", agent.certificate, "--key", agent.key, f.url("/who")])
        #expect(answered.status == 200, "\(answered.stderr)")
        let line = try #require(try Self.lines(f.proxy.directory.file("audit.jsonl")).last)
        #expect(line["client"] as? String == "CN=agent-7", "\(line)")
        #expect(line["path"] as? String == "/who")
        try f.finish()
    }

    /// `check` refuses an audit file that is a symbolic link or that others may read, naming the key.
    @Test(arguments: ["symlink", "0644"])
    func checkRefusesAnAuditFileOthersCouldReadOrRedirect(_ kind: String) throws {
        let directory = try TempDir(prefix: "audit-check")
        if kind == "symlink" {
            try FileManager.default.createSymbolicLink(atPath: directory.file("audit.jsonl"), withDestinationPath: directory.file("elsewhere"))
        } else {
            _ = try directory.write("audit.jsonl", "", mode: 0o644)
        }
        let path = try directory.write(
            "tokenproxy.yaml", staticTokenConfig(upstream: "http://127.0.0.1:9", more: "audit: {path: ./audit.jsonl}"))
        let result = try ProxyProcess.run(args: ["check", "--config", path], env: ["E2E_TOKEN": e2eToken])
        #expect(result.status == 2, "\(result.output)")
        #expect(result.stderr.contains("audit.path: \(directory.file("audit.jsonl"))"), "\(result.stderr)")
        #expect(result.stderr.contains(kind == "symlink" ? "is a symbolic link" : "has mode 0644"), "\(result.stderr)")
    }
}
