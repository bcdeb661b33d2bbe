import Foundation
import TestSupport
import Testing

/// `client_auth` against Authlib's authorization server (RFC 7523 §2.2 through its
/// `JWTBearerClientAssertion`, the keys registered as a JWKS), with the real binary.
@Suite("Client authentication", .serialized, .tags(.endToEnd), .timeLimit(.minutes(40)))
struct ClientAuthTests {
    @Test(
        "private_key_jwt with an RS256, PS256 or ES256 key gets tokens, and every token request signs a new assertion",
        arguments: [("rsa", "RS256"), ("rsa", "PS256"), ("ec", "ES256")])
    func privateKeyJWT(kind: String, alg: String) throws {
        let dir = try TempDir(prefix: "tokenproxy-pkjwt")
        let key = try SecretlessWorld.makeKey(kind, in: dir, name: "client-key.pem")
        let world = try SecretlessWorld(clients: ["svc:private_key_jwt:\(key)"], dir: dir)
        let proxy = try world.serve(
            "oauth2_client_credentials", clientID: "svc", directory: dir,
            """
            client_auth: private_key_jwt
            client_key_file: ./client-key.pem
            client_key_id: key-1
            \(alg == "PS256" ? "client_key_alg: PS256" : "")
            """)
        let answer = try curl([proxy.baseURL + "/orders"])
        #expect(answer.status == 200)
        #expect(answer.json?["client"] as? String == "svc")
        let admin = try #require(proxy.adminURL)
        #expect(try curl(["-X", "POST", admin + "/refresh"]).status == 202)
        // The start-up fetch and the forced one: two token requests, two assertions.
        #expect(try eventually { try world.calls("client_credentials") == 2 })
        #expect(try world.count("auth", "private_key_jwt") == 2)
        #expect(try world.count("algs", alg) == 2)
        #expect(try world.stats()["jti_reused"] as? Int == 0)
        #expect(try world.calls("client_credentials", "invalid_client") == 0)
        #expect(!proxy.stderr.contains("BEGIN"))
    }

    @Test("client_secret_jwt signs with the secret (HS256) and never sends it")
    func clientSecretJWT() throws {
        let secret = "hs-secret-\(UUID().uuidString)"
        let world = try SecretlessWorld(clients: ["hs:client_secret_jwt:\(secret)"])
        let proxy = try world.serve(
            "oauth2_client_credentials", clientID: "hs", directory: world.dir, environment: ["HS_SECRET": secret],
            """
            client_auth: client_secret_jwt
            client_secret_env: HS_SECRET
            """)
        #expect(try curl([proxy.baseURL + "/x"]).status == 200)
        #expect(try world.count("auth", "client_secret_jwt") == 1)
        #expect(try world.count("algs", "HS256") == 1)
        #expect(!proxy.stderr.contains(secret))
    }

    @Test("oauth2_refresh with private_key_jwt: the password login, the refresh and the revocation all authenticate with a fresh JWT")
    func everyCallSigned() throws {
        let dir = try TempDir(prefix: "tokenproxy-pkjwt-life")
        let key = try SecretlessWorld.makeKey("ec", in: dir, name: "k.pem")
        let world = try SecretlessWorld(clients: ["app:private_key_jwt:\(key)"], dir: dir)
        let config = world.config(
            credentials: """
                type: oauth2_refresh
                token_url: \(world.tokenURL)
                revocation_url: \(world.idp.baseURL)/oauth/revoke
                client_id: app
                client_auth: private_key_jwt
                client_key_file: ./k.pem
                """)
        let path = try dir.write("tokenproxy.yaml", config)
        let login = try ProxyProcess.run(args: ["login", "--config", path, "--username", "bob", "--password-stdin"], stdin: "pw\n")
        #expect(login.status == 0, "\(login.stderr)")
        let proxy = try ProxyProcess(config: config, directory: dir)
        let admin = try #require(proxy.adminURL)
        #expect(try curl(["-X", "POST", admin + "/refresh"]).status == 202)
        #expect(try eventually { try world.calls("refresh_token") == 1 })
        #expect(try curl([proxy.baseURL + "/me"]).json?["sub"] as? String == "bob")
        proxy.terminate()
        _ = try proxy.waitForExit()
        let logout = try ProxyProcess.run(args: ["logout", "--config", path])
        #expect(logout.status == 0, "\(logout.stderr)")
        #expect(try world.count("calls", "revocation") == 1)
        #expect(try world.calls("password") == 1)
        // login, refresh, revocation: three assertions, none reused
        #expect(try world.count("auth", "private_key_jwt") == 3)
        #expect(try world.stats()["jti_reused"] as? Int == 0)
    }

    @Test(
        "client_assertion: the projected token is read for every request, a Kubernetes-style swap under load fails no request, and the identity provider sees the new one"
    )
    func projectedAssertionRotation() throws {
        let world = try SecretlessWorld(clients: ["azure-app:federated:system:serviceaccount:default:app"])
        let first = try world.mint()
        let file = try world.project("azure-identity-token", first)
        let proxy = try world.serve(
            "oauth2_client_credentials", clientID: "azure-app", directory: world.dir,
            """
            client_auth: client_assertion
            client_assertion_file: \(file)
            """)
        #expect(try curl([proxy.baseURL + "/a"]).status == 200)
        #expect(try world.stats()["form_client_ids"] as? Int ?? 0 >= 1)
        let firstJTI = try #require(try world.stats()["assertion_subjects"] as? [String: Int]).keys.first

        // A load of requests while the file is swapped and the token fetched again.
        let failures = LockedCount()
        let done = LockedFlag()
        let load = Thread {
            while !done.value {
                if (try? curl([proxy.baseURL + "/load"]))?.status != 200 { failures.add() }
            }
        }
        load.start()
        let second = try world.mint()
        _ = try world.project("azure-identity-token", second)
        let admin = try #require(proxy.adminURL)
        #expect(try curl(["-X", "POST", admin + "/refresh"]).status == 202)
        let seenSecond = try eventually {
            let subjects = try world.stats()["assertion_subjects"] as? [String: Int] ?? [:]
            return subjects.count == 2
        }
        #expect(try curl([proxy.baseURL + "/after"]).status == 200)
        done.set()
        while !load.isFinished { usleep(10_000) }
        #expect(seenSecond)
        #expect(failures.value == 0)
        let subjects = try world.stats()["assertion_subjects"] as? [String: Int] ?? [:]
        #expect(subjects[firstJTI ?? ""] == 1)
        #expect(!proxy.stderr.contains(first) && !proxy.stderr.contains(second))
    }

    @Test("an assertion file that is emptied keeps the last good assertion, with a warning")
    func emptiedAssertionFileKeepsTheLastGood() throws {
        let world = try SecretlessWorld(clients: ["azure-app:federated:system:serviceaccount:default:app"])
        let file = try world.project("token", try world.mint())
        let proxy = try world.serve(
            "oauth2_client_credentials", clientID: "azure-app", directory: world.dir,
            """
            client_auth: client_assertion
            client_assertion_file: \(file)
            """)
        #expect(try curl([proxy.baseURL + "/a"]).status == 200)
        _ = try world.project("token", "")
        #expect(try curl(["-X", "POST", try #require(proxy.adminURL) + "/refresh"]).status == 202)
        #expect(proxy.waitForStderr(containing: "keeping the last good value"))
        #expect(try eventually { try world.count("auth", "federated") == 2 })
        #expect(try curl([proxy.baseURL + "/b"]).status == 200)
    }

    /// Issue 33: a signing key file that goes bad keeps the last good key with a warning, once, and
    /// is not parsed again until it changes.
    @Test("a signing key file that goes bad keeps the last good key, with one warning")
    func badKeyFileKeepsTheLastGood() throws {
        let dir = try TempDir(prefix: "tokenproxy-badkey")
        let key = try SecretlessWorld.makeKey("ec", in: dir, name: "client-key.pem")
        let world = try SecretlessWorld(clients: ["svc:private_key_jwt:\(key)"], dir: dir)
        let proxy = try world.serve(
            "oauth2_client_credentials", clientID: "svc", directory: dir,
            """
            client_auth: private_key_jwt
            client_key_file: ./client-key.pem
            """)
        #expect(try curl([proxy.baseURL + "/a"]).status == 200)
        _ = try dir.write("client-key.pem", "not a key any more\n", mode: 0o600)
        let admin = try #require(proxy.adminURL)
        #expect(try curl(["-X", "POST", admin + "/refresh"]).status == 202)
        #expect(proxy.waitForStderr(containing: "holds no PEM block (-----BEGIN ...); keeping the last good value"), "\(proxy.stderr)")
        #expect(try eventually { try world.calls("client_credentials") == 2 }, "signed with the last good key")
        #expect(try world.calls("client_credentials", "invalid_client") == 0)
        // Another token request with the file unchanged: no second warning. (A forced refresh this
        // soon after the last one is deferred, and done when the back-off allows.)
        #expect(try curl(["-X", "POST", admin + "/refresh"]).status == 202)
        #expect(try within(70) { try world.calls("client_credentials") == 3 })
        #expect(proxy.stderr.components(separatedBy: "keeping the last good value").count == 2, "\(proxy.stderr)")
    }

    @Test("an expired client assertion is not sent: a clear error and a metric")
    func expiredAssertionRefused() throws {
        let world = try SecretlessWorld(clients: ["azure-app:federated:system:serviceaccount:default:app"])
        let stale = try world.mint(ttl: -30)
        let file = try world.project("token", stale)
        let proxy = try world.serve(
            "oauth2_client_credentials", clientID: "azure-app", directory: world.dir,
            """
            client_auth: client_assertion
            client_assertion_file: \(file)
            """)
        #expect(proxy.waitForStderr(containing: "expired"))
        #expect(try curl([proxy.baseURL + "/a"]).status == 503)
        let metrics = try curl([try #require(proxy.adminURL) + "/metrics"]).bodyString
        #expect(metrics.contains("tokenproxy_assertions_refused_total{reason=\"expired\"} ") && !metrics.contains("reason=\"expired\"} 0"))
        #expect(try world.calls("client_credentials") == 0 && world.calls("client_credentials", "invalid_client") == 0)
        #expect(!proxy.stderr.contains(stale))
    }

    @Test("check names an assertion file that holds no JWT")
    func checkRefusesAnAssertionFileWithoutAJWT() throws {
        let dir = try TempDir(prefix: "tokenproxy-assertioncheck")
        _ = try dir.write("token", "not-a-jwt\n")
        let (path, result) = try checkClientCredentials(
            in: dir, clientID: "svc", "client_auth: client_assertion\nclient_assertion_file: ./token")
        #expect(result.status == 2)
        #expect(result.stderr.contains("credentials.client_assertion_file"), "\(result.stderr)")
        #expect(result.stderr.contains("does not hold a JWT"), "\(result.stderr)")
        #expect(!result.stderr.contains("not-a-jwt"))
        // Not there yet (a projected token before the pod starts): check passes.
        try FileManager.default.removeItem(atPath: dir.file("token"))
        #expect(try ProxyProcess.run(args: ["check", "--config", path]).status == 0)
    }

    @Test(
        "check names the key and the reason for a key file that cannot sign",
        arguments: [
            ("client_key_file: ./missing.pem", "credentials.client_key_file", "no such file"),
            ("client_key_file: ./not-a-key.pem", "credentials.client_key_file", "no PEM block"),
            ("client_key_file: ./ec.pem\nclient_key_alg: RS256", "credentials.client_key_file", "cannot sign RS256"),
            ("client_key_file: ./ec.pem\nclient_key_alg: HS512", "credentials.client_key_alg", "HS512"),
            ("client_key_id: k", "credentials.client_key_file", "required"),
            ("client_key_file: ./open.pem", "credentials.client_key_file", "(mode 0644, owner uid "),
        ])
    func checkRefusesBadKeys(lines: String, key: String, reason: String) throws {
        let dir = try TempDir(prefix: "tokenproxy-keycheck")
        let ec = try SecretlessWorld.makeKey("ec", in: dir, name: "ec.pem")
        _ = try dir.write("not-a-key.pem", "hello\n", mode: 0o600)
        _ = try dir.write("open.pem", try String(contentsOfFile: ec, encoding: .utf8), mode: 0o644)
        let result = try checkClientCredentials(in: dir, clientID: "svc", "client_auth: private_key_jwt\n" + lines).result
        #expect(result.status == 2)
        #expect(result.stderr.contains(key), "\(result.stderr)")
        #expect(result.stderr.contains(reason), "\(result.stderr)")
    }
}

final class LockedCount: @unchecked Sendable {
    private let lock = NSLock()
    private var count = 0
    func add() { lock.withLock { count += 1 } }
    var value: Int { lock.withLock { count } }
}

final class LockedFlag: @unchecked Sendable {
    private let lock = NSLock()
    private var flag = false
    func set() { lock.withLock { flag = true } }
    var value: Bool { lock.withLock { flag } }
}
