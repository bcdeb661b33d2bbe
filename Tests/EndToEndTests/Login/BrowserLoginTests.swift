import Foundation
import TestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// `tokenproxy login` with `login: browser` against django-oauth-toolkit (dot_server.py: Django's
/// login form, PKCE required), driven by scripted_browser.py as `$BROWSER`. What the identity
/// provider counted at its token endpoint is what the tests assert.
@Suite("Browser login (authorization code + PKCE), end to end", .tags(.endToEnd), .timeLimit(.minutes(35)))
struct BrowserLoginTests {
    static let password = "ann-password-1"

    struct Stats: Decodable {
        struct Exchange: Decodable {
            let has_verifier: Bool
            let redirect_uri: String?
            let scope_sent: Bool
        }
        let grants: [String: [String: Int]]
        let exchanges: [Exchange]
        var codeGrants: Int { grants["authorization_code"]?.values.reduce(0, +) ?? 0 }
    }

    struct Setup {
        let server: PythonServer
        let dir: TempDir
        let config: String
        let browserLog: String

        func stats() throws -> Stats {
            let result = try curl([server.baseURL + "/test/stats"])
            return try JSONDecoder().decode(Stats.self, from: Data(result.body))
        }

        /// The scripted browser's steps, one JSON object each.
        func steps() -> [[String: Any]] {
            guard let text = try? String(contentsOfFile: browserLog, encoding: .utf8) else { return [] }
            return text.split(separator: "\n").compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
        }

        func browserEnvironment(_ extra: [String: String] = [:]) -> [String: String] {
            [
                "BROWSER": RepositoryPaths.servers.appendingPathComponent("scripted_browser.py").path,
                "SCRIPTED_BROWSER_USER": "ann", "SCRIPTED_BROWSER_PASSWORD": BrowserLoginTests.password,
                "SCRIPTED_BROWSER_LOG": browserLog, "DISPLAY": "",
            ].merging(extra) { $1 }
        }

        var storePath: String { dir.file("state/tokens.json") }
    }

    static func setup(serverArguments: [String] = [], redirect: String? = nil, scope: String = "openid read") throws -> Setup {
        let server = try PythonServer("dot_server", arguments: serverArguments, startupTimeout: 90)
        let dir = try TempDir(prefix: "tokenproxy-browser")
        let config = """
            listen: 127.0.0.1:0
            upstream: http://127.0.0.1:9
            credentials:
              type: oauth2_refresh
              login: browser
              issuer_url: \(server.baseURL)/o
              client_id: tokenproxy
              scope: "\(scope)"
              authorization_params: {prompt: login}
            \(redirect.map { "  redirect_uri: \($0)" } ?? "")
            log:
              level: debug
            """
        let path = try dir.write("tokenproxy.yaml", config)
        return Setup(server: server, dir: dir, config: path, browserLog: dir.file("browser.log"))
    }

    static func login(_ setup: Setup, _ arguments: [String] = [], env: [String: String], stdin: String? = nil) throws -> CommandResult {
        try ProxyProcess.run(args: ["login", "--config", setup.config, "--timeout", "60s"] + arguments, env: env, stdin: stdin, timeout: 120)
    }

    @Test(
        "the browser signs in through Django's form; forged, idle and off-path requests change nothing; one code exchange; a replay finds the listener closed")
    func signsInOnceThroughTheBrowser() throws {
        let setup = try Self.setup()
        defer { setup.server.stop() }
        let result = try Self.login(setup, env: setup.browserEnvironment(["SCRIPTED_BROWSER_FORGE": "1", "SCRIPTED_BROWSER_REPLAY": "1"]))
        #expect(result.status == 0, "\(result.output)")
        #expect(result.stderr.contains("logged in as ann"), "\(result.stderr)")
        let steps = setup.steps()
        let statuses = Dictionary(steps.compactMap { step in (step["step"] as? String).map { ($0, "\(step["status"] ?? "-")") } }) { a, _ in a }
        #expect(statuses["wrong state"] == "400")
        #expect(statuses["no state"] == "400")
        #expect(statuses["error with a wrong state"] == "400")
        #expect(statuses["other path"] == "404")
        #expect(statuses["post"] == "405")
        #expect(statuses["callback"] == "200")
        #expect(statuses["replay"] == "ConnectionRefusedError")
        let callback = try #require(steps.first { $0["step"] as? String == "callback" })
        let headers = try #require(callback["headers"] as? [String: String])
        #expect(headers["cache-control"] == "no-store")
        #expect(headers["referrer-policy"] == "no-referrer")
        #expect(headers["content-security-policy"] == "default-src 'none'")

        let stats = try setup.stats()
        #expect(stats.codeGrants == 1)
        #expect(stats.grants["authorization_code"]?["200"] == 1)
        let exchange = try #require(stats.exchanges.first)
        #expect(exchange.has_verifier)
        #expect(exchange.redirect_uri?.hasPrefix("http://127.0.0.1:") == true)
        #expect(exchange.redirect_uri?.hasSuffix("/callback") == true)

        let status = try ProxyProcess.run(args: ["status", "--config", setup.config])
        #expect(status.status == 0)
        #expect(status.stdout.contains("refreshable: yes"))
        // A refresh with the refresh token the browser login gave.
        let token = try ProxyProcess.run(args: ["token", "--config", setup.config])
        #expect(token.status == 0)
        let store = try #require((try? JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: setup.storePath)))) as? [String: Any])
        for secret in [store["access_token"] as? String, store["refresh_token"] as? String, Self.password] {
            let value = try #require(secret)
            #expect(!result.output.contains(value))
        }
        #expect(!result.stderr.contains("code="))
    }

    @Test("a denied consent ends the login with exit 1 naming access_denied; nothing is exchanged or saved")
    func deniedConsent() throws {
        let setup = try Self.setup()
        defer { setup.server.stop() }
        let result = try Self.login(setup, env: setup.browserEnvironment(["SCRIPTED_BROWSER_CONSENT": "deny"]))
        #expect(result.status == 1)
        #expect(result.stderr.contains("access_denied"), "\(result.stderr)")
        #expect(try setup.stats().codeGrants == 0)
        #expect(!FileManager.default.fileExists(atPath: setup.storePath))
    }

    @Test("no answer within --timeout: exit 1 and nothing saved")
    func timeout() throws {
        let setup = try Self.setup()
        defer { setup.server.stop() }
        let result = try ProxyProcess.run(
            args: ["login", "--config", setup.config, "--timeout", "2s"], env: ["BROWSER": "/bin/true", "DISPLAY": ""], timeout: 60)
        #expect(result.status == 1)
        #expect(result.stderr.contains("--timeout"), "\(result.stderr)")
        #expect(!FileManager.default.fileExists(atPath: setup.storePath))
    }

    @Test("--no-browser: the URL on stdout, a wrong paste is ignored, the pasted final address logs in; localhost binds both families")
    func pasteMode() throws {
        let port = try freePort()
        let setup = try Self.setup(serverArguments: ["--localhost-port", "\(port)"], redirect: "http://localhost:\(port)/callback")
        defer { setup.server.stop() }
        let binary = RepositoryPaths.tokenproxyBinary.path
        let login = try ChildProcess(
            binary, arguments: ["login", "--config", setup.config, "--no-browser", "--timeout", "90s"],
            environment: childEnvironment(["DISPLAY": "", "BROWSER": "/bin/false"]), withStdin: true)
        defer { login.stop(grace: 1) }
        let url = try #require(
            login.stdout.wait(until: Date().addingTimeInterval(30)) { text in
                text.split(separator: "\n").first { $0.hasPrefix("http://") }.map(String.init)
            })
        #expect(url.contains("redirect_uri=http%3A%2F%2Flocalhost%3A\(port)%2Fcallback"))
        // Both families listen (RFC 8252 §8.3): a connection to ::1 gets an answer too.
        if loopbackIPv6Available() {
            let v6 = try curl(["-g", "http://[::1]:\(port)/elsewhere"])
            #expect(v6.status == 404, "\(v6)")
        }
        // The scripted browser stops at the redirect; its address is what a person would paste.
        let browser = try runCommand(
            RepositoryPaths.servers.appendingPathComponent("scripted_browser.py").path, arguments: [url],
            environment: childEnvironment(setup.browserEnvironment(["SCRIPTED_BROWSER_FOLLOW": "0"])), timeout: 60)
        #expect(browser.status == 0)
        let redirect = try #require(setup.steps().first { $0["step"] as? String == "redirect" }?["location"] as? String)
        login.writeStdin(Array("http://localhost:\(port)/callback?code=forged&state=forged\n".utf8))
        #expect(login.stderr.wait(until: Date().addingTimeInterval(30)) { $0.contains("ignored") ? true : nil } == true)
        login.writeStdin(Array((redirect + "\n").utf8))
        let status = try #require(login.wait(timeout: 60))
        #expect(status == 0, "\(login.stderr.text)")
        #expect(try setup.stats().codeGrants == 1)
        #expect(FileManager.default.fileExists(atPath: setup.storePath))
    }

    /// Out of descriptors, the login's loopback listener pauses its accepts as the proxy's own
    /// acceptor does instead of spinning a core on a socket that stays readable (issue 29 point 7:
    /// 295 CPU ticks in 3 s). No identity provider is needed: the login waits at its listener.
    @Test("with descriptors exhausted, the loopback listener waits without spinning a core")
    func exhaustedDescriptorsDoNotSpin() throws {
        let port = try freePort()
        let dir = try TempDir(prefix: "tokenproxy-browser-fd")
        let config = try dir.write(
            "tokenproxy.yaml",
            """
            listen: 127.0.0.1:0
            upstream: http://127.0.0.1:9
            credentials:
              type: oauth2_refresh
              login: browser
              authorization_url: http://127.0.0.1:9/authorize
              token_url: http://127.0.0.1:9/token
              client_id: tokenproxy
              redirect_uri: http://127.0.0.1:\(port)/callback
            """)
        let login = try ChildProcess(
            "/usr/bin/prlimit",
            arguments: ["--nofile=32:32", RepositoryPaths.tokenproxyBinary.path, "login", "--config", config, "--no-browser", "--timeout", "60s"],
            environment: childEnvironment(["DISPLAY": "", "BROWSER": "/bin/false"]), withStdin: true)
        defer { login.stop(grace: 1) }
        #expect(login.stdout.wait(until: Date().addingTimeInterval(30)) { $0.contains("http://") ? true : nil } == true, "\(login.stderr.text)")
        // 80 idle connections: more than the 32 descriptors the process may hold.
        var idle: [RawHTTPClient] = []
        for _ in 0..<80 { if let client = try? RawHTTPClient(port: port) { idle.append(client) } }
        defer { for client in idle { client.close() } }
        let before = try Self.cpuTicks(login.pid)
        Thread.sleep(forTimeInterval: 3)
        let used = try Self.cpuTicks(login.pid) - before
        #expect(login.isRunning)
        // A spinning loop burns about 100 ticks a second; pausing 100 ms between tries, a few.
        #expect(used < 60, "\(used) CPU ticks in 3 s while out of descriptors")
    }

    /// utime + stime of /proc/PID/stat, in clock ticks.
    static func cpuTicks(_ pid: Int32) throws -> Int {
        let stat = try String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8)
        // Fields after the command's closing parenthesis: state is field 3, utime 14, stime 15.
        let fields = try #require(stat.split(separator: ")").last).split(separator: " ")
        return (Int(fields[11]) ?? 0) + (Int(fields[12]) ?? 0)
    }

    @Test("an answer without a refresh token is saved with a warning, and status says refreshable: no")
    func noRefreshToken() throws {
        let setup = try Self.setup(serverArguments: ["--skip-authorization", "--no-refresh-token"])
        defer { setup.server.stop() }
        let result = try Self.login(setup, ["--username", "ann"], env: setup.browserEnvironment())
        #expect(result.status == 0, "\(result.output)")
        #expect(result.stderr.contains("no refresh token"))
        let status = try ProxyProcess.run(args: ["status", "--config", setup.config])
        #expect(status.stdout.contains("refreshable: no"), "\(status.stdout)")
    }

    @Test("a configured port that is taken ends the login before any browser opens")
    func takenPort() throws {
        let holder = try PythonServer("echo_upstream")
        defer { holder.stop() }
        let setup = try Self.setup(redirect: "http://127.0.0.1:\(holder.port)/callback")
        defer { setup.server.stop() }
        let result = try Self.login(setup, env: setup.browserEnvironment())
        #expect(result.status == 1)
        #expect(result.stderr.contains("cannot listen on 127.0.0.1:\(holder.port)"), "\(result.stderr)")
        #expect(setup.steps().isEmpty)
    }
}
