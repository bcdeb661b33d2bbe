import Foundation
import TestSupport
import Testing

/// Sessions sealed at rest, end to end (CONTRACT.md "The fleet store in production", issue 33): the
/// real binary, the OAuth test server, and the store file's raw bytes searched for the tokens.
@Suite("Sealed store, end to end", .tags(.endToEnd, .redis), .timeLimit(.minutes(35)))
struct SealedStoreTests {
    static func newKey() -> String { Data((0..<32).map { _ in UInt8.random(in: 0...255) }).base64EncodedString() }

    /// The key id beside a sealed session document.
    static func kid(_ document: [String: Any]?) -> String? { (document?["sealed"] as? [String: Any])?["kid"] as? String }

    /// `store:` lines (after the backend's own) for a current key file and, optionally, previous keys.
    static func keys(_ current: String, previous: String? = nil) -> String {
        "  encryption_key_file: ./\(current)" + (previous.map { "\n  encryption_previous_keys_file: ./\($0)" } ?? "")
    }

    /// Issue 39 point 3, on the file store and in Redis: a session sealed under a previous key is
    /// written back under the current one as soon as a process reads it (here `serve` at start), not
    /// at the next refresh, so the previous key can be dropped at once.
    @Test(
        "a session sealed under a previous key is sealed under the current one at start, without a refresh; the previous key can then go",
        arguments: ["file", "redis"])
    func previousKeyResealedAtRead(backend: String) throws {
        let fleet = try Fleet(idpArguments: ["--access-ttl", "3600"])
        defer { fleet.stop() }
        let life = fleet.life
        let store = backend == "redis" ? fleet.storeYAML + "\n" : "store:\n"
        let stored: () throws -> [String: Any]? = { backend == "redis" ? try fleet.stored() : life.store() }
        _ = try life.dir.write("k1.key", Self.newKey() + "\n", mode: 0o600)
        _ = try life.dir.write("k2.key", Self.newKey() + "\n", mode: 0o600)
        _ = try life.dir.write("old.keys", try String(contentsOfFile: life.dir.file("k1.key"), encoding: .utf8), mode: 0o600)
        _ = try life.dir.write("tokenproxy.yaml", life.config(extra: store + Self.keys("k1.key")))
        #expect(try life.login().status == 0)
        let kid1 = try #require(Self.kid(try stored()))

        let refreshes = try life.idpCalls("refresh_token")
        var proxy = try life.serve(extra: store + Self.keys("k2.key", previous: "old.keys"))
        #expect(try send(proxy).status == 200)
        #expect(
            try eventually(timeout: 30) { try Self.kid(stored()).map { $0 != kid1 } ?? false },
            "still sealed under the previous key: \(proxy.stderr)")
        #expect(try life.idpCalls("refresh_token") == refreshes, "no refresh")
        try proxy.stopAndExpectCleanExit()
        life.record("serve with the previous key", proxy.stderr)

        // The previous key dropped: the session still opens, without a login.
        let logins = try life.idpCalls("password")
        proxy = try life.serve(extra: store + Self.keys("k2.key"))
        let response = try send(proxy)
        #expect(response.status == 200, "\(response)")
        #expect(try life.idpCalls("password") == logins, "no new login")
        try proxy.stopAndExpectCleanExit()
        #expect(try life.command(["token"]).status == 0)
        life.assertNoLeaks([proxy])
    }

    /// Seals the store file `argv[2]` as the version before the route binding did (`"version":1`, the
    /// purpose alone as authenticated data) under the base64 key in the file `argv[1]`.
    static let unboundSealScript = """
        import base64, hashlib, json, os, sys
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM
        key = base64.b64decode(open(sys.argv[1]).read().strip())
        document = open(sys.argv[2], "rb").read().strip()
        nonce = os.urandom(12)
        box = nonce + AESGCM(key).encrypt(nonce, document, b"tokenproxy session v1")
        kid = hashlib.sha256(b"tokenproxy store key id" + key).digest()[:8].hex()
        sealed = {"sealed": {"box": base64.b64encode(box).decode(), "kid": kid}, "version": 1}
        open(sys.argv[2], "w").write(json.dumps(sealed))
        """

    /// Issue 39 point 15, upgrade: a session the previous version sealed (no route in its
    /// authenticated data) still opens, once, and is sealed again with the binding at start.
    @Test("a session sealed before the route binding opens and is sealed again with it at start, without a refresh or a login")
    func unboundSealUpgraded() throws {
        let life = try Lifecycle(idpArguments: ["--access-ttl", "3600"])
        defer { life.stop() }
        _ = try life.dir.write("tokenproxy.yaml", life.config())
        #expect(try life.login().status == 0)
        _ = try life.dir.write("k.key", Self.newKey() + "\n", mode: 0o600)
        let python = ProcessInfo.processInfo.environment["PYTHON"] ?? "python3"
        let sealed = try runCommand(python, arguments: ["-c", Self.unboundSealScript, life.dir.file("k.key"), life.storePath])
        #expect(sealed.status == 0, "\(sealed.stderr)")
        #expect(life.store()?["version"] as? Int == 1)
        let kid = try #require(Self.kid(life.store()))

        let refreshes = try life.idpCalls("refresh_token")
        let logins = try life.idpCalls("password")
        let proxy = try life.serve(extra: "store:\n" + Self.keys("k.key"))
        #expect(try send(proxy).status == 200)
        #expect(eventually(timeout: 30) { life.store()?["version"] as? Int == 2 }, "not sealed again: \(proxy.stderr)")
        #expect(Self.kid(life.store()) == kid)
        #expect(try life.idpCalls("refresh_token") == refreshes, "no refresh")
        #expect(try life.idpCalls("password") == logins, "no login")
        try proxy.stopAndExpectCleanExit()
        life.assertNoLeaks([proxy])
    }

    /// Issue 39 point 15, on the file store and in Redis: route `b`'s sealed session copied into route
    /// `a`'s place does not open there. Both routes use the same identity provider and API, so
    /// `b`'s token would be accepted upstream: only the seal's binding keeps it out of `a`'s requests.
    @Test("a sealed session copied into another route's place does not open there and is left as it is", arguments: ["file", "redis"])
    func copiedSessionDoesNotOpen(backend: String) throws {
        let fleet = try Fleet(idpArguments: ["--access-ttl", "3600"])
        defer { fleet.stop() }
        let life = fleet.life
        _ = try life.dir.write("k.key", Self.newKey() + "\n", mode: 0o600)
        let store = backend == "redis" ? fleet.storeYAML + "\n" : "store:\n  path: ./state/tokens.json\n"
        let route = { (name: String) in
            """
              - name: \(name)
                match: {path_prefix: /\(name)/}
                upstream: \(life.api.baseURL)
                credentials:
                  type: oauth2_refresh
                  token_url: \(life.idp.baseURL)/oauth/token
                  client_id: app
                  client_secret_env: LIFE_CLIENT_SECRET
            """
        }
        let yaml = """
            listen: 127.0.0.1:0
            workers: 2
            drain_timeout: 2s
            admin:
              listen: 127.0.0.1:0
            \(store)\(Self.keys("k.key"))
            routes:
            \(route("a"))
            \(route("b"))
            """
        _ = try life.dir.write("tokenproxy.yaml", yaml)
        for name in ["a", "b"] {
            let login = try life.command(["login", "--route", name, "--username", "alice", "--password-stdin"], stdin: life.password + "\n")
            #expect(login.status == 0, "\(login.stderr)")
        }
        // What each route's place holds, raw.
        let place: (String) throws -> String = { name in
            if backend == "redis" { return try fleet.redis.cli(["--raw", "HGET", "\(fleet.key)/\(name):session", "session"]) }
            return try String(contentsOfFile: life.dir.file("state/\(name).json"), encoding: .utf8)
        }
        let sealedB = try place("b")
        #expect(sealedB.contains("\"sealed\""))
        if backend == "redis" {
            #expect(try fleet.redis.cli(["COPY", "\(fleet.key)/b:session", "\(fleet.key)/a:session", "REPLACE"]) == "1")
        } else {
            _ = try life.dir.write("state/a.json", sealedB, mode: 0o600)
        }

        let proxy = try ProxyProcess(config: yaml, directory: life.dir, environment: life.environment)
        #expect(try send(proxy, "GET", "/b/data").status == 200, "route b keeps its own session")
        let upstreamBefore = try life.apiStats()["requests"] as? Int
        let refused = try send(proxy, "GET", "/a/data")
        expectProxyError(refused, status: 401, code: "login_required")
        #expect(refused.json?["route"] as? String == "a", "\(refused)")
        #expect((refused.json?["message"] as? String)?.contains("route a") == true, "\(refused)")
        #expect(try life.apiStats()["requests"] as? Int == upstreamBefore, "route a sent a request upstream")
        let admin = try #require(proxy.adminURL)
        #expect(try curl([admin + "/readyz?route=a"]).status == 503)
        #expect(try curl([admin + "/readyz?route=b"]).status == 200)
        try proxy.stopAndExpectCleanExit()
        #expect(try place("a") == sealedB, "the copied session was changed or deleted")
        #expect(try place("b") == sealedB, "route b's session was changed")
        #expect(try life.command(["token", "--route", "b"]).status == 0)
        life.assertNoLeaks([proxy])
    }

    @Test("a store is sealed at its next write, holds no token, survives a key rotation, and one no key opens asks for a login without being touched")
    func sealRotateAndRefuse() throws {
        let life = try Lifecycle()
        defer { life.stop() }
        let dir = life.dir
        // A login without a key: a plain store.
        #expect(try life.login().status == 0)
        #expect(life.store()?["refresh_token"] != nil)

        // Key A: the next write seals it.
        _ = try dir.write("a.key", Self.newKey() + "\n", mode: 0o600)
        let sealA = "store:\n  encryption_key_file: ./a.key"
        var proxy = try life.serve(extra: sealA)
        let admin = try #require(proxy.adminURL)
        #expect(try send(proxy).status == 200)
        #expect(try curl(["-X", "POST", admin + "/refresh"]).status == 202)
        #expect(try eventually { (life.store()?["sealed"] as? [String: Any])?["kid"] != nil })
        let kidA = try #require((life.store()?["sealed"] as? [String: Any])?["kid"] as? String)
        let token = try life.command(["token"]).stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(!token.isEmpty)
        let raw = try String(contentsOfFile: life.storePath, encoding: .utf8)
        #expect(!raw.contains(token), "the access token is readable in the store")
        #expect(Set(life.store()?.keys.map { $0 } ?? []) == ["sealed", "version"])
        try proxy.stopAndExpectCleanExit()

        // Key B current, A previous: no login, and the next write is sealed under B.
        _ = try dir.write("b.key", Self.newKey() + "\n", mode: 0o600)
        _ = try dir.write("old.keys", try String(contentsOfFile: dir.file("a.key"), encoding: .utf8), mode: 0o600)
        let passwordLogins = try life.idpCalls("password")
        proxy = try life.serve(extra: "store:\n  encryption_key_file: ./b.key\n  encryption_previous_keys_file: ./old.keys")
        #expect(try send(proxy).status == 200)
        #expect(try curl(["-X", "POST", try #require(proxy.adminURL) + "/refresh"]).status == 202)
        #expect(try eventually { ((life.store()?["sealed"] as? [String: Any])?["kid"] as? String).map { $0 != kidA } ?? false })
        let kidB = try #require((life.store()?["sealed"] as? [String: Any])?["kid"] as? String)
        #expect(try life.idpCalls("password") == passwordLogins, "no new login")
        try proxy.stopAndExpectCleanExit()

        // Only a key that never sealed it: 401 login_required naming B's id, /readyz 503, the file untouched.
        _ = try dir.write("c.key", Self.newKey() + "\n", mode: 0o600)
        let before = try Data(contentsOf: URL(fileURLWithPath: life.storePath))
        proxy = try life.serve(extra: "store:\n  encryption_key_file: ./c.key")
        let refused = try send(proxy)
        expectProxyError(refused, status: 401, code: "login_required")
        #expect((refused.json?["message"] as? String)?.contains(kidB) == true, "\(refused)")
        #expect(try curl([try #require(proxy.adminURL) + "/readyz"]).status == 503)
        try proxy.stopAndExpectCleanExit()
        #expect(try Data(contentsOf: URL(fileURLWithPath: life.storePath)) == before, "the sealed session was changed")
        life.assertNoLeaks([])
    }
}
