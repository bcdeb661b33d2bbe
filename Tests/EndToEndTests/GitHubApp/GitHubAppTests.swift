import Foundation
import Synchronization
import TestSupport
import Testing

/// `type: github_app` (CONTRACT.md "GitHub App installation tokens") against `github_api.py`, a
/// GitHub API fake that verifies the app JWT with the app's public key (RS256, iss, iat, exp) as
/// GitHub does, mints installation tokens answered `201 Created`, and serves a protected API
/// that takes only a currently valid installation token.
@Suite("GitHub App installation tokens", .tags(.endToEnd), .timeLimit(.minutes(35)))
struct GitHubAppTests {
    /// The app's key pair (made by openssl), the fake, and a folder for the configuration.
    final class World: Sendable {
        static let appID = "123456"
        static let installationID = "7890123"
        let dir: TempDir
        let keyPath: String
        let github: PythonServer

        init(ttl: Int? = nil) throws {
            dir = try TempDir(prefix: "tokenproxy-github-app")
            keyPath = try Self.makeKey(in: dir, name: "app.private-key.pem")
            let publicKey = try Self.publicKey(of: keyPath, in: dir)
            github = try PythonServer(
                "github_api",
                arguments: ["--public-key", publicKey, "--app-id", Self.appID, "--installation-id", Self.installationID]
                    + (ttl.map { ["--ttl", String($0)] } ?? []))
        }

        /// A new RSA key (PEM, mode 0600) at `name` in `dir`.
        static func makeKey(in dir: TempDir, name: String, kind: String = "rsa") throws -> String {
            let path = try SecretlessWorld.makeKey(kind, in: dir, name: name)
            guard chmod(path, 0o600) == 0 else { throw HarnessError("chmod \(path) failed") }
            return path
        }

        /// The public half of the key at `path`, as a PEM file beside it.
        static func publicKey(of path: String, in dir: TempDir) throws -> String {
            let out = dir.file(URL(fileURLWithPath: path).lastPathComponent + ".pub")
            let result = try runCommand("/usr/bin/openssl", arguments: ["pkey", "-in", path, "-pubout", "-out", out])
            guard result.status == 0 else { throw HarnessError("openssl pkey -pubout failed: \(result.stderr)") }
            return out
        }

        /// A configuration whose credentials are the app's; `credentials` adds lines to them, `extra` adds top-level sections.
        func config(credentials: String = "", extra: String = "") -> String {
            """
            listen: 127.0.0.1:0
            upstream: \(github.baseURL)/api
            workers: 1
            drain_timeout: 1s
            admin:
              listen: 127.0.0.1:0
            credentials:
              type: github_app
              app_id: "\(Self.appID)"
              installation_id: "\(Self.installationID)"
              private_key_file: \(keyPath)
              api_url: \(github.baseURL)
            \(credentials.split(separator: "\n").map { "  " + $0 }.joined(separator: "\n"))
            log:
              level: debug
            \(extra)
            """
        }

        func serve(_ yaml: String) throws -> ProxyProcess {
            try ProxyProcess(config: yaml, directory: dir)
        }

        func stats() throws -> [String: Any] {
            try #require(try curl([github.baseURL + "/test/stats"]).json)
        }

        func mints() throws -> Int { try stats()["mints"] as? Int ?? -1 }

        func rejected() throws -> [String: Int] { try stats()["rejected"] as? [String: Int] ?? [:] }

        func api(_ key: String) throws -> Int { (try stats()["api"] as? [String: Int])?[key] ?? -1 }

        /// Every JWT the fake received and every installation token it issued.
        func secrets() throws -> [String] { try stats()["secrets"] as? [String] ?? [] }

        func control(_ path: String, body: String? = nil) throws {
            var arguments = ["-X", "POST", github.baseURL + path]
            if let body { arguments += ["--data-binary", body] }
            let result = try curl(arguments)
            guard result.status == 200 else { throw HarnessError("\(path) answered \(result.status)") }
        }

        func stop() {
            github.stop()
            dir.remove()
        }
    }

    @Test("requests carry the installation token minted with a verified app JWT, narrowed by repositories and permissions")
    func tokenAndNarrowing() throws {
        let world = try World()
        defer { world.stop() }
        let proxy = try world.serve(world.config(credentials: "repositories: [tools, infra]\npermissions: {contents: read, issues: write}"))
        let answer = try curl([proxy.baseURL + "/repos/my-org/tools"])
        #expect(answer.status == 200, "\(answer.bodyString)\n\(proxy.stderr)")
        #expect(answer.json?["scheme"] as? String == "Bearer")
        #expect(answer.json?["path"] as? String == "/api/repos/my-org/tools")
        #expect(answer.json?["token_number"] as? Int == 1)
        let stats = try world.stats()
        #expect(stats["mints"] as? Int == 1)
        #expect((stats["rejected"] as? [String: Int])?.isEmpty == true, "\(stats["rejected"] ?? "")")
        let body = try #require((stats["bodies"] as? [[String: Any]])?.first)
        #expect(body["repositories"] as? [String] == ["tools", "infra"])
        #expect(body["permissions"] as? [String: String] == ["contents": "read", "issues": "write"])
        // A direct request without the token is refused by the protected API: the fake does check.
        #expect(try curl([world.github.baseURL + "/api/repos/my-org/tools"]).status == 401)
    }

    @Test("50 concurrent requests meeting an expired installation token make exactly one mint, and all are served")
    func oneMintAtExpiry() throws {
        let world = try World(ttl: 6)
        defer { world.stop() }
        let proxy = try world.serve(world.config(extra: "limits:\n  refresh_wait: 60s"))
        #expect(try within(30) { try world.mints() == 1 }, "the first token is fetched at start")
        // The background refresh before expiry is held at the fake, and the token expires meanwhile.
        try world.control("/test/hold")
        #expect(try within(30) { try world.stats()["held_now"] as? Int == 1 }, "the refresh before expiry is in flight")
        try world.control("/test/ttl?seconds=3600")
        #expect(try within(30) { try world.stats()["valid_tokens"] as? Int == 0 }, "the first token expired")

        let requests = BackgroundRequests(50) { _ in try send(proxy, "GET", "/rate_limit", timeout: 90) }
        // Every request is in the proxy, waiting for the one mint in flight.
        #expect(try within(60) { (try metric(proxy, "tokenproxy_open_connections") ?? 0) >= 50 })
        try world.control("/test/release")
        let answers = requests.wait().map { try? $0.get() }
        #expect(answers.map { $0?.status ?? -1 } == Array(repeating: 200, count: 50), "\(proxy.stderr.suffix(3000))")
        #expect(answers.allSatisfy { $0?.json?["token_number"] as? Int == 2 })
        #expect(try world.mints() == 2, "one mint at start, one for the 50 requests")
        #expect(try world.api("unauthorized") == 0)
        #expect(try world.rejected().isEmpty)
    }

    @Test("a 401 from the API fetches a new installation token and retries the request once")
    func unauthorizedMintsOnceAndRetries() throws {
        let world = try World()
        defer { world.stop() }
        let proxy = try world.serve(world.config())
        #expect(try send(proxy).status == 200)
        try world.control("/test/revoke")
        let answer = try send(proxy, "POST", "/repos/my-org/tools/issues", body: Array(#"{"title":"x"}"#.utf8))
        #expect(answer.status == 200, "\(answer.bodyString)")
        #expect(answer.json?["token_number"] as? Int == 2)
        #expect(try world.mints() == 2)
        #expect(try world.api("unauthorized") == 1, "one 401, then one retry with the new token")
        #expect(try world.api("ok") == 2)
    }

    @Test("a refused app is logged with GitHub's message, requests get 503 token_unavailable, and no JWT or token reaches a log line")
    func refusedApp() throws {
        let world = try World()
        defer { world.stop() }
        try world.control("/test/refuse?message=Integration%20not%20found")
        let proxy = try world.serve(world.config())
        #expect(proxy.waitForStderr(containing: "Integration not found", timeout: 30), "\(proxy.stderr)")
        let refused = try send(proxy)
        #expect(refused.status == 503, "\(refused.bodyString)")
        #expect(refused.json?["error"] as? String == "token_unavailable")
        #expect(refused.header("Retry-After") != nil)
        #expect(proxy.stderr.contains("HTTP 401"), "\(proxy.stderr)")
        #expect(try world.stats()["attempts"] as? Int ?? 0 >= 1)
        #expect(try world.mints() == 0)
        #expect(try world.api("ok") == 0 && world.api("unauthorized") == 0, "nothing went upstream without a token")

        // GitHub takes the app again: the proxy recovers on its own (backoff), with no restart.
        try world.control("/test/accept")
        #expect(try within(90) { (try? send(proxy).status) == 200 }, "\(proxy.stderr.suffix(2000))")
        let secrets = try world.secrets()
        #expect(secrets.count >= 2, "at least one refused JWT, the accepted one and its token")
        for secret in secrets {
            #expect(!proxy.stderr.contains(secret), "a JWT or installation token is in the log")
        }
        #expect(!proxy.stderr.contains("eyJ"), "no JWT, whole or in part")
        try proxy.stopAndExpectCleanExit()
    }

    @Test("a GitHub whose clock is behind ours refuses the first JWT (iat in its future); the next is signed on its time, read from its Date")
    func clockSkew() throws {
        let world = try World()
        defer { world.stop() }
        try world.control("/test/clock?offset=-120")
        let proxy = try world.serve(world.config())
        let answer = try send(proxy)
        #expect(answer.status == 200, "\(answer.bodyString)\n\(proxy.stderr.suffix(2000))")
        #expect(try world.mints() == 1)
        #expect(try world.rejected() == ["iat": 1], "one JWT refused for its iat, then one accepted")
    }

    /// Issue 39 point 17: an answer dated ten years ahead may not make the proxy sign a JWT that
    /// becomes valid ten years from now. (The fake checks `iat` on its own clock only, so it takes
    /// both JWTs; what matters is what the proxy signed.)
    @Test("a Date more than 10 minutes off is logged and not followed: every app JWT is signed on the local clock")
    func clockSkewBeyondTenMinutesIsNotFollowed() throws {
        let world = try World()
        defer { world.stop() }
        let tenYears = 10 * 365 * 86_400
        try world.control("/test/clock?offset=\(tenYears)")
        let proxy = try world.serve(world.config())
        #expect(try within(30) { try world.mints() == 1 }, "the first token is fetched at start: \(proxy.stderr.suffix(2000))")
        // The second mint comes after the first answer's Date was read.
        let admin = try #require(proxy.adminURL)
        #expect(try curl(["-X", "POST", admin + "/refresh"]).status == 202)
        #expect(try within(30) { try world.mints() == 2 }, "\(proxy.stderr.suffix(2000))")
        let jwts = try world.secrets().filter { $0.hasPrefix("eyJ") }
        #expect(jwts.count == 2, "\(jwts.count) JWTs")
        let latest = Int(Date().timeIntervalSince1970)
        for jwt in jwts {
            let payload = try #require(jwt.split(separator: ".").dropFirst().first)
            var base64 = payload.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
            base64 += String(repeating: "=", count: (4 - base64.count % 4) % 4)
            let data = try #require(Data(base64Encoded: base64))
            let claims = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
            let iat = try #require(claims["iat"] as? Int)
            #expect(iat <= latest, "a JWT issued \(iat - latest) s in the future")
        }
        #expect(proxy.waitForStderr(containing: "not followed"), "\(proxy.stderr.suffix(2000))")
        try proxy.stopAndExpectCleanExit()
    }

    @Test("a replaced key file signs the next mint")
    func keyRotation() throws {
        let world = try World()
        defer { world.stop() }
        let proxy = try world.serve(world.config())
        #expect(try send(proxy).status == 200)
        // GitHub now knows only the new key; the file is replaced the way a secret rotation does it.
        let newKey = try World.makeKey(in: world.dir, name: "new.pem")
        try world.control("/test/public-key", body: "@" + (try World.publicKey(of: newKey, in: world.dir)))
        guard rename(newKey, world.keyPath) == 0 else { throw HarnessError("rename failed") }
        let admin = try #require(proxy.adminURL)
        #expect(try curl(["-X", "POST", admin + "/refresh"]).status == 202)
        #expect(try within(30) { try world.mints() == 2 }, "\(proxy.stderr.suffix(2000))")
        let rejected = try world.rejected()
        #expect(rejected.isEmpty, "the new mint was signed with the new key: \(rejected)")
        let answer = try send(proxy)
        #expect(answer.status == 200 && answer.json?["token_number"] as? Int == 2)
    }

    @Test("tokenproxy token prints the installation token, and a second run reuses it from the store")
    func tokenCommand() throws {
        let world = try World()
        defer { world.stop() }
        let path = try world.dir.write("tokenproxy.yaml", world.config())
        let first = try ProxyProcess.run(args: ["token", "--config", path])
        #expect(first.status == 0, "\(first.stderr)")
        let token = try #require(try world.stats()["last_token"] as? String)
        #expect(first.stdout == token + "\n")
        for secret in try world.secrets() {
            #expect(!first.stderr.contains(secret), "a JWT or the token is in token's log")
        }
        #expect(try curl(["-H", "Authorization: Bearer \(token)", world.github.baseURL + "/api/user"]).status == 200)
        let second = try ProxyProcess.run(args: ["token", "--config", path])
        #expect(second.stdout == token + "\n")
        #expect(try world.mints() == 1)
        #expect((try world.stats()["bodies"] as? [[String: Any]])?.first?.isEmpty == true, "no narrowing: the body is {}")
    }

    @Test("tokenproxy check names every bad key with its reason, and accepts a good file")
    func check() throws {
        let world = try World()
        defer { world.stop() }
        func check(_ yaml: String) throws -> CommandResult {
            try ProxyProcess.run(args: ["check", "--config", try world.dir.write("check.yaml", yaml)])
        }
        let good = try check(world.config(credentials: "repositories: [tools]\npermissions: {contents: read}"))
        #expect(good.status == 0, "\(good.output)")
        #expect(good.stdout.contains("type: github_app") && good.stdout.contains("configuration ok"))
        #expect(!good.stderr.contains("warning"), "\(good.stderr)")

        let bad = try check(
            world.config(credentials: "permissions: {contents: writ}\nrepositories: [my-org/tools]")
                .replacingOccurrences(of: "installation_id: \"\(World.installationID)\"", with: "installation_id: \"78x\"")
                .replacingOccurrences(of: "app_id: \"\(World.appID)\"", with: "app_id: \"12 34\""))
        #expect(bad.status == 2, "\(bad.output)")
        for key in ["credentials.app_id", "credentials.installation_id", "credentials.permissions.contents", "credentials.repositories[0]"] {
            #expect(bad.stderr.contains(key), "\(key) is not named:\n\(bad.stderr)")
        }

        // A key that group or others may read is refused, naming the file and its mode.
        guard chmod(world.keyPath, 0o640) == 0 else { throw HarnessError("chmod failed") }
        try giveToNonRootOwner(world.keyPath)
        let open = try check(world.config())
        #expect(open.status == 2)
        #expect(open.stderr.contains("credentials.private_key_file") && open.stderr.contains("mode 0640"), "\(open.stderr)")
        guard chmod(world.keyPath, 0o600) == 0 else { throw HarnessError("chmod failed") }

        // An EC key cannot sign the app JWT (GitHub takes RS256 only).
        let ecKey = try World.makeKey(in: world.dir, name: "ec.pem", kind: "ec")
        let ec = try check(world.config().replacingOccurrences(of: world.keyPath, with: ecKey))
        #expect(ec.status == 2)
        #expect(ec.stderr.contains("credentials.private_key_file") && ec.stderr.contains("RS256"), "\(ec.stderr)")
        #expect(try world.stats()["attempts"] as? Int == 0, "check makes no network call")
    }
}
