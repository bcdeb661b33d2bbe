import Foundation
import TestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

@Suite("Token life cycle: seeds, json_refresh and device login, end to end", .serialized, .tags(.endToEnd), .timeLimit(.minutes(40)))
struct TokenLifecycleSeedAndJSONTests {
    @Test("a seeded refresh token starts a session; a refused seed is not tried again after a restart")
    func seeds() throws {
        let life = try Lifecycle(idpArguments: ["--access-ttl", "3600"])
        defer { life.stop() }
        // A valid seed: a refresh token from a login kept elsewhere.
        _ = try life.dir.write("other.yaml", life.config().replacingOccurrences(of: "log:", with: "store:\n  path: ./other/tokens.json\nlog:"))
        #expect(try life.login(config: "other.yaml").status == 0)
        let otherStore = try #require(
            (try? JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: life.dir.file("other/tokens.json"))))) as? [String: Any])
        let seed = try #require(otherStore["refresh_token"] as? String)
        let seedConfig = life.config(extra: "").replacingOccurrences(of: "  refresh_margin:", with: "  refresh_token_env: LIFE_SEED\n  refresh_margin:")
        var env = life.environment
        env["LIFE_SEED"] = seed
        let seeded = try ProxyProcess(config: seedConfig, directory: life.dir, environment: env)
        #expect(try within(10) { try send(seeded).status == 200 })
        #expect(try life.idpCalls("refresh_token") == 1)
        life.collectStoreSecrets()
        #expect(life.store()?["refresh_token"] as? String != seed)
        seeded.terminate()
        _ = try seeded.waitForExit()

        // A bogus seed with no store: refused once, then never again, even after a restart.
        try FileManager.default.removeItem(atPath: life.storePath)
        env["LIFE_SEED"] = "bogus-seed-refresh-token-value"
        let refused = try ProxyProcess(config: seedConfig, directory: life.dir, environment: env)
        #expect(try within(10) { try send(refused).status == 401 })
        #expect(try life.idpCalls("refresh_token", "invalid_grant") == 1)
        refused.terminate()
        _ = try refused.waitForExit()
        let again = try ProxyProcess(config: seedConfig, directory: life.dir, environment: env)
        let response = try send(again)
        #expect(response.status == 401)
        #expect(response.jsonObject["error"] as? String == "login_required")
        #expect(try life.idpCalls("refresh_token", "invalid_grant") == 1)
        let status = try life.command(["status"], config: "status.yaml")
        #expect(status.status == 1)
        #expect(status.stdout.contains("session: ended"))
        again.terminate()
        _ = try again.waitForExit()
        life.record("seed", "")
        life.assertNoLeaks([seeded, refused, again])
        #expect(!refused.stderr.contains("bogus-seed-refresh-token-value"))
    }

    @Test("json_refresh: login, coalesced refresh at expiry, refusal ends the session")
    func jsonRefresh() throws {
        let backend = try PythonServer("json_backend", arguments: ["--user", "alice:json-pw-value", "--access-ttl", "4", "--token-delay-ms", "1000"])
        defer { backend.stop() }
        let dir = try TempDir(prefix: "tokenproxy-json")
        let config = """
            listen: 127.0.0.1:0
            upstream: \(backend.baseURL)/api
            workers: 2
            admin:
              listen: 127.0.0.1:0
            credentials:
              type: json_refresh
              login_url: \(backend.baseURL)/auth/login
              refresh_url: \(backend.baseURL)/auth/refresh
              refresh_margin: 1ms
            log:
              level: debug
            """
        let path = try dir.write("tokenproxy.yaml", config)
        let login = try ProxyProcess.run(args: ["login", "--config", path, "--username", "alice", "--password-stdin"], stdin: "json-pw-value\n")
        #expect(login.status == 0, "\(login.output)")
        let proxy = try ProxyProcess(config: config, directory: dir)
        #expect(try send(proxy, "GET", "/x").status == 200)
        let store = try #require(
            (try? JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: dir.file("state/tokens.json"))))) as? [String: Any])
        let expiresAt = try #require(store["expires_at"] as? Double)
        #expect(within(10) { Date().timeIntervalSince1970 > expiresAt + 0.05 })
        let results = concurrently(20) { _ in try send(proxy, "GET", "/x") }
        #expect(results.map { (try? $0.get().status) ?? -1 } == Array(repeating: 200, count: 20))
        let stats = try curl([backend.baseURL + "/test/stats"]).json ?? [:]
        let calls = stats["calls"] as? [String: [String: Int]]
        #expect(calls?["refresh"]?["ok"] == 1)
        #expect(stats["expired_tokens_seen"] as? Int == 0)

        _ = try curl(["-X", "POST", backend.baseURL + "/test/revoke-all?access=1"])
        #expect(try within(15) { try send(proxy, "GET", "/x").status == 401 })
        let ended = try send(proxy, "GET", "/x")
        #expect(ended.jsonObject["error"] as? String == "login_required")
        proxy.terminate()
        _ = try proxy.waitForExit()
        for text in [proxy.stderr, login.output] {
            #expect(!text.contains("json-pw-value"))
            if let token = store["access_token"] as? String { #expect(!text.contains(token)) }
            if let token = store["refresh_token"] as? String { #expect(!text.contains(token)) }
        }
    }

    @Test("login: device prints the verification URI and code on stderr, polls until approved, saves the session")
    func deviceLogin() throws {
        let life = try Lifecycle(idpArguments: ["--access-ttl", "3600", "--device-interval", "1"])
        defer { life.stop() }
        let config = life.config(admin: false).replacingOccurrences(
            of: "  refresh_margin:", with: "  login: device\n  device_authorization_url: \(life.idp.baseURL)/oauth/device\n  refresh_margin:")
        let path = try life.dir.write("device.yaml", config)
        let process = try ChildProcess(
            RepositoryPaths.tokenproxyBinary.path, arguments: ["login", "--config", path], environment: childEnvironment(life.environment))
        defer { process.stop() }
        let stderr = process.stderr
        let stdout = process.stdout
        let code = stderr.wait(until: Date().addingTimeInterval(15)) { text -> String? in
            guard let range = text.range(of: "enter the code ") else { return nil }
            let code = text[range.upperBound...].prefix { !$0.isWhitespace }
            return code.isEmpty ? nil : String(code)
        }
        let userCode = try #require(code, "no user code on stderr: \(stderr.text)")
        #expect(stderr.text.contains(life.idp.baseURL))
        #expect(try curl(["-X", "POST", life.idp.baseURL + "/test/approve?user_code=\(userCode)"]).status == 200)
        #expect(process.wait(timeout: 20) == 0, "\(stderr.text)")
        #expect(stderr.waitForEnd(until: Date().addingTimeInterval(5)))
        #expect(stdout.text.isEmpty)
        #expect(life.store()?["refresh_token"] is String)
        let status = try life.command(["status"], config: "device.yaml")
        #expect(status.status == 0)
        #expect(status.stdout.contains("session: active"))
        life.record("device login stderr", stderr.text)
        life.assertNoLeaks([])
    }
}
