import Foundation
import TestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// Issue 13's "Done when": several real `tokenproxy serve` processes share one session in a real
/// `redis-server`; the identity provider rotates refresh tokens, revokes a whole family when a
/// rotated one is replayed, and counts every call.
@Suite("Fleet: one session in Redis, end to end", .serialized, .tags(.endToEnd, .redis), .timeLimit(.minutes(40)))
struct FleetTests {
    @Test("3 serve processes × 50 concurrent requests meeting an expired token: exactly one refresh, no request fails")
    func expiredTokenOneRefreshAcrossTheFleet() throws {
        let fleet = try Fleet(idpArguments: ["--access-ttl", "4", "--token-delay-ms", "300"])
        defer { fleet.stop() }
        #expect(try fleet.login(margin: "1ms").status == 0)
        let proxies = try (0..<3).map { _ in try fleet.serve(margin: "1ms") }
        let expiresAt = try #require(try fleet.stored()?["expires_at"] as? Double)
        for proxy in proxies { #expect(try send(proxy).status == 200) }
        #expect(within(10) { Date().timeIntervalSince1970 > expiresAt + 0.05 })
        let results = concurrently(150) { index in try send(proxies[index % 3]) }
        let statuses = results.map { (try? $0.get().status) ?? -1 }
        #expect(statuses == Array(repeating: 200, count: 150), "\(statuses)")
        #expect(try fleet.life.idpCalls("refresh_token") == 1)
        #expect(try fleet.idpStat("reuse_detected") == 0)
        // The metric says how often the identity provider was called; the others read the store.
        #expect(try fleetSum(proxies, refreshedByIdP) == 1)
        #expect(try fleetSum(proxies, race("won")) == 1)
        #expect(try fleetSum(proxies, reusedFromStore) >= 2)
        fleet.collectSecrets()
        for proxy in proxies { proxy.terminate() }
        for proxy in proxies { #expect(try proxy.waitForExit() == 0) }
        fleet.life.assertNoLeaks(proxies)
    }

    @Test("3 serve processes × 50 concurrent requests meeting upstream 401s: exactly one refresh, every request retried to 200")
    func upstream401OneRefreshAcrossTheFleet() throws {
        let fleet = try Fleet(idpArguments: ["--access-ttl", "3600", "--token-delay-ms", "300"])
        defer { fleet.stop() }
        #expect(try fleet.login().status == 0)
        let proxies = try (0..<3).map { _ in try fleet.serve() }
        for proxy in proxies { #expect(try send(proxy).status == 200) }
        try fleet.life.api("/test/reject-seen")
        try fleet.life.api("/test/reset-stats")
        let results = concurrently(150) { index in try send(proxies[index % 3], "GET", "/orders/\(index)") }
        let statuses = results.map { (try? $0.get().status) ?? -1 }
        #expect(statuses == Array(repeating: 200, count: 150), "\(statuses)")
        #expect(try fleet.life.idpCalls("refresh_token") == 1)
        #expect(try fleet.idpStat("reuse_detected") == 0)
        let stats = try fleet.life.apiStats()
        #expect(stats["ok"] as? Int == 150)
        let unauthorized = stats["unauthorized"] as? Int ?? -1
        #expect(unauthorized >= 1 && unauthorized <= 150)
        // Every 401 was retried (150 answers of 200). The metric counts only the retries that waited
        // for a refresh: a 401 whose proxy had meanwhile picked up the new token from Redis is retried
        // at once without being counted (ProxyCore's ExchangeTokens.acquire), hence at most.
        let retries = try fleetSum(proxies, "tokenproxy_upstream_401_retries_total")
        #expect(retries >= 1 && retries <= Double(unauthorized), "retries \(retries), 401s seen by the API \(unauthorized)")
        #expect(try fleetSum(proxies, refreshedByIdP) == 1)
        fleet.collectSecrets()
        for proxy in proxies { proxy.terminate() }
        for proxy in proxies { _ = try proxy.waitForExit() }
        fleet.life.assertNoLeaks(proxies)
    }

    @Test("the refresher killed with SIGKILL mid-refresh: another process refreshes after the lease, the session survives, nothing is replayed")
    func refresherKilledMidRefresh() throws {
        let fleet = try Fleet(idpArguments: ["--access-ttl", "3600"], lease: "2s")
        defer { fleet.stop() }
        try Self.refresherKilledMidRefresh(in: fleet)
    }

    /// Also run over rediss:// (RedisTLSTests).
    static func refresherKilledMidRefresh(in fleet: Fleet) throws {
        #expect(try fleet.login().status == 0)
        let refresher = try fleet.serve()
        let other = try fleet.serve()
        #expect(try send(refresher).status == 200 && send(other).status == 200)
        let before = try #require(try fleet.stored()?["refresh_token"] as? String)
        let generation = try fleet.generation()

        // The identity provider holds the next refresh before processing it; the refresher dies waiting.
        try fleet.life.idp("/test/hold?count=1&when=before")
        defer { try? fleet.life.idp("/test/release") }
        #expect(try curl(["-X", "POST", try #require(refresher.adminURL) + "/refresh"]).status == 202)
        #expect(try within(10) { try fleet.idpStat("held_now") == 1 })
        refresher.terminate(signal: SIGKILL)
        _ = try refresher.waitForExit()
        #expect(try within(5) { try fleet.life.idpCalls("refresh_token", "abandoned") == 1 })

        // The survivor's refresh waits out the dead holder's lease (2 s) at most, then goes through.
        let started = Date()
        #expect(try curl(["-X", "POST", try #require(other.adminURL) + "/refresh"]).status == 202)
        #expect(try within(15) { try fleet.life.idpCalls("refresh_token") == 1 })
        let took = Date().timeIntervalSince(started)
        #expect(took < 12, "took \(took) s")
        #expect(try within(5) { try fleet.generation() == generation + 1 })
        let after = try #require(try fleet.stored()?["refresh_token"] as? String)
        #expect(after != before)
        #expect(try fleet.idpStat("reuse_detected") == 0)
        #expect(try fleet.life.idpCalls("refresh_token", "invalid_grant") == 0)
        #expect(try send(other).status == 200)
        // A new process starts from the surviving session: no login.
        let newcomer = try fleet.serve()
        #expect(try send(newcomer).status == 200)
        #expect(try fleet.life.idpCalls("password") == 1)
        fleet.collectSecrets()
        other.terminate()
        newcomer.terminate()
        _ = try other.waitForExit()
        _ = try newcomer.waitForExit()
        fleet.life.assertNoLeaks([refresher, other, newcomer])
    }

    @Test("Redis restarted mid-run keeps the session; Redis stopped past a token's lifetime: serve while valid, then 503, then recover without a restart")
    func redisRestartAndOutage() throws {
        let fleet = try Fleet(idpArguments: ["--access-ttl", "6"], lease: "2s")
        defer { fleet.stop() }
        #expect(try fleet.login(margin: "1s").status == 0)
        let proxies = try (0..<2).map { _ in try fleet.serve(margin: "1s") }
        for proxy in proxies { #expect(try send(proxy).status == 200) }

        // A restart (append-only file): the session survives and the next refresh goes through it.
        try fleet.redis.restart()
        let generation = try fleet.generation()
        #expect(generation >= 1)
        #expect(try within(12) { try fleet.generation() > generation })
        for proxy in proxies { #expect(try within(5) { try send(proxy).status == 200 }) }
        #expect(try fleet.idpStat("reuse_detected") == 0)

        // An outage longer than a token's lifetime.
        let refreshes = try fleet.life.idpCalls("refresh_token")
        let expiresAt = try #require(try fleet.stored()?["expires_at"] as? Double)
        fleet.collectSecrets()
        let said = "no refresh until Redis is back"
        let saidBefore = proxies.map { $0.stderr.components(separatedBy: said).count }
        fleet.redis.stop()
        if Date().timeIntervalSince1970 < expiresAt - 0.5 {
            #expect(try send(proxies[0]).status == 200)
            #expect(try curl([try #require(proxies[0].adminURL) + "/readyz"]).status == 200)
        }
        #expect(within(10) { Date().timeIntervalSince1970 > expiresAt + 0.3 })
        for proxy in proxies {
            let response = try send(proxy)
            #expect(response.status == 503)
            #expect(response.jsonObject["error"] as? String == "token_unavailable")
            #expect(try curl([try #require(proxy.adminURL) + "/readyz"]).status == 503)
        }
        // No process refreshed on its own: a lone refresh would rotate the token away from the others.
        #expect(try fleet.life.idpCalls("refresh_token") == refreshes)
        // Said once per process for this outage, however many refreshes failed meanwhile.
        for (index, proxy) in proxies.enumerated() {
            #expect(proxy.stderr.components(separatedBy: said).count - saidBefore[index] == 1)
        }

        try fleet.redis.restart()
        for proxy in proxies { #expect(try within(20) { try send(proxy).status == 200 }) }
        #expect(try fleet.life.idpCalls("refresh_token") == refreshes + 1)
        #expect(try fleet.idpStat("reuse_detected") == 0)
        for proxy in proxies { #expect(proxy.stderr.contains("reachable again")) }
        fleet.collectSecrets()
        for proxy in proxies { proxy.terminate() }
        for proxy in proxies { _ = try proxy.waitForExit() }
        fleet.life.assertNoLeaks(proxies)
    }

    @Test(
        "Redis restarted without persistence, then the key overwritten with garbage, under load: the session is written back, zero 401s; a logout still ends it everywhere"
    )
    func lostSessionIsWrittenBackButALogoutEndsIt() throws {
        let fleet = try Fleet(idpArguments: ["--access-ttl", "3600"], persistentRedis: false)
        defer { fleet.stop() }
        #expect(try fleet.login().status == 0)
        let proxies = try (0..<3).map { _ in try fleet.serve() }
        for proxy in proxies { #expect(try send(proxy).status == 200) }
        let token = try #require(try fleet.stored()?["access_token"] as? String)
        let generation = try fleet.generation()
        fleet.collectSecrets()

        let load = Load(proxies)
        #expect(load.waitFor(30))
        // A restart without persistence: Redis comes back empty, with no record of a logout.
        try fleet.redis.restart()
        #expect(try within(20) { try fleet.stored()?["access_token"] as? String == token })
        #expect(try fleet.generation() > generation)
        #expect(load.waitFor(60))
        // Overwritten with something that is no session (another type of key): noticed by the slow
        // poll of the generation (5 s), written back the same way.
        try fleet.redis.cli(["SET", fleet.key + ":session", "garbage"])
        #expect(try within(20) { try fleet.stored()?["access_token"] as? String == token })
        #expect(load.waitFor(60))
        let counts = load.stop()
        #expect(counts[401] == nil, "\(counts)")
        #expect(counts.keys.sorted() == [200], "\(counts)")
        // One process wrote each time; nobody had to call the identity provider for it.
        #expect(try fleet.life.idpCalls("refresh_token") == 0)
        let writeBacks = proxies.map { $0.stderr.components(separatedBy: "wrote its session back").count - 1 }
        #expect(writeBacks.reduce(0, +) == 2, "\(writeBacks)")
        #expect(try fleetSum(proxies, #"tokenproxy_store_operations_total{backend="redis",operation="restore",result="ok"}"#) == 2)

        // A logout leaves its record: every proxy ends the session, none writes it back.
        #expect(try fleet.life.command(["logout"]).status == 0)
        for proxy in proxies {
            #expect(try within(10) { try send(proxy).status == 401 })
            #expect(try send(proxy).jsonObject["error"] as? String == "login_required")
        }
        #expect(try fleet.stored() == nil)
        #expect(try fleet.life.command(["status", "--json"]).status == 1)
        fleet.collectSecrets()
        for proxy in proxies { proxy.terminate() }
        for proxy in proxies { _ = try proxy.waitForExit() }
        fleet.life.assertNoLeaks(proxies)
    }

    @Test(
        "the key goes back to an older generation (a promoted replica that missed the last write): the newer session is written back, the rotated refresh token is never replayed"
    )
    func olderGenerationIsTreatedAsLost() throws {
        let fleet = try Fleet(idpArguments: ["--access-ttl", "3600"])
        defer { fleet.stop() }
        #expect(try fleet.login().status == 0)
        let proxies = try (0..<2).map { _ in try fleet.serve() }
        for proxy in proxies { #expect(try send(proxy).status == 200) }
        let older = try fleet.redis.cli(["--raw", "HGET", fleet.key + ":session", "session"])
        let olderGeneration = try fleet.generation()
        let olderRefreshToken = try #require(try fleet.stored()?["refresh_token"] as? String)

        // One refresh rotates the refresh token (the identity provider revokes the family if the old
        // one comes back), and both processes see the new generation.
        #expect(try curl(["-X", "POST", try #require(proxies[0].adminURL) + "/refresh"]).status == 202)
        #expect(try within(15) { try fleet.generation() == olderGeneration + 1 })
        let newer = try #require(try fleet.stored()?["refresh_token"] as? String)
        #expect(newer != olderRefreshToken)
        for proxy in proxies { #expect(try send(proxy).status == 200) }

        // What a replica promoted before it had the last write holds: the older hash, announced.
        _ = try fleet.redis.cli(["HSET", fleet.key + ":session", "generation", String(olderGeneration), "session", older])
        _ = try fleet.redis.cli(["PUBLISH", fleet.key + ":changed", String(olderGeneration)])
        #expect(
            try within(20) {
                try fleet.generation() > olderGeneration + 1 && fleet.stored()?["refresh_token"] as? String == newer
            })
        #expect(proxies.contains { $0.stderr.contains("went back to generation \(olderGeneration)") })
        #expect(proxies.contains { $0.stderr.contains("wrote its session back") })

        // The next refresh uses the newest refresh token: no reuse detected, no login needed. (Asked
        // again until one goes through: a forced refresh soon after the last one is deferred.)
        let admin = try #require(proxies[0].adminURL)
        #expect(
            try within(15) {
                _ = try curl(["-X", "POST", admin + "/refresh"])
                return try fleet.life.idpCalls("refresh_token") == 2
            })
        #expect(try fleet.idpStat("reuse_detected") == 0)
        #expect(try fleet.life.idpCalls("refresh_token", "invalid_grant") == 0)
        for proxy in proxies { #expect(try within(5) { try send(proxy).status == 200 }) }
        fleet.collectSecrets()
        for proxy in proxies { proxy.terminate() }
        for proxy in proxies { _ = try proxy.waitForExit() }
        fleet.life.assertNoLeaks(proxies)
    }

    @Test("a lease holder stalled past its lease (SIGSTOP, then SIGCONT) cannot overwrite the newer session")
    func stalledHolderIsFenced() throws {
        let fleet = try Fleet(idpArguments: ["--access-ttl", "3600"], lease: "1s")
        defer { fleet.stop() }
        #expect(try fleet.login().status == 0)
        let stalled = try fleet.serve()
        let other = try fleet.serve()
        #expect(try send(stalled).status == 200 && send(other).status == 200)

        // Its refresh is processed by the identity provider, and the answer held; then it stops.
        try fleet.life.idp("/test/hold?count=1&when=after")
        defer { try? fleet.life.idp("/test/release") }
        #expect(try curl(["-X", "POST", try #require(stalled.adminURL) + "/refresh"]).status == 202)
        #expect(try within(10) { try fleet.idpStat("held_now") == 1 })
        kill(stalled.processIdentifier, SIGSTOP)
        defer { kill(stalled.processIdentifier, SIGCONT) }
        #expect(try within(10) { try !fleet.leaseHeld() })

        // Meanwhile the session moves on: a new login writes a newer generation.
        #expect(try fleet.life.login().status == 0)
        let newer = try #require(try fleet.stored())
        let newerAccess = try #require(newer["access_token"] as? String)
        let generation = try fleet.generation()
        fleet.collectSecrets()

        try fleet.life.idp("/test/release")
        kill(stalled.processIdentifier, SIGCONT)
        #expect(stalled.waitForStderr(containing: "the refreshed session was not stored", timeout: 15))
        #expect(try fleet.generation() == generation)
        #expect(try fleet.stored()?["access_token"] as? String == newerAccess)
        #expect(try series(stalled, race("fenced")) == 1)
        #expect(try fleet.idpStat("reuse_detected") == 0)
        // Both serve with the newer session.
        #expect(try send(stalled).status == 200)
        #expect(try within(5) { try send(other).status == 200 })
        #expect(try fleet.life.idpCalls("refresh_token", "invalid_grant") == 0)
        stalled.terminate()
        other.terminate()
        _ = try stalled.waitForExit()
        _ = try other.waitForExit()
        fleet.life.assertNoLeaks([stalled, other])
    }

    @Test("login, status, token and logout work against the Redis store as against the file")
    func commandsAgainstRedis() throws {
        let fleet = try Fleet(idpArguments: ["--access-ttl", "3600"])
        defer { fleet.stop() }
        let login = try fleet.login()
        #expect(login.status == 0, "\(login.stderr)")
        #expect(login.stderr.contains("redis 127.0.0.1:\(fleet.redis.port) db 0, key \(fleet.key)"))
        let status = try fleet.life.command(["status", "--json"])
        #expect(status.status == 0)
        #expect(status.stdout.contains(#""session":"active""#))
        #expect(status.stdout.contains(#""last_refresh_outcome":"login""#))
        let token = try fleet.life.command(["token"])
        #expect(token.status == 0)
        #expect(token.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == (try fleet.stored()?["access_token"] as? String))
        #expect(try fleet.life.idpCalls("refresh_token") == 0)
        fleet.collectSecrets()
        let proxy = try fleet.serve()
        #expect(try send(proxy).status == 200)
        let logout = try fleet.life.command(["logout"])
        #expect(logout.status == 0)
        // A running proxy hears of it through pub/sub, within about a second.
        let loggedOut = Date()
        #expect(try within(5) { try send(proxy).status == 401 })
        let pickedUp = Date().timeIntervalSince(loggedOut)
        #expect(pickedUp < 2.5, "picked up after \(pickedUp) s")
        #expect(try fleet.idpStat("revocations") == 1)
        #expect(try fleet.stored() == nil)
        #expect(try fleet.life.command(["status", "--json"]).status == 1)
        #expect(try fleet.life.command(["token"]).status == 1)
        proxy.terminate()
        _ = try proxy.waitForExit()
        fleet.life.assertNoLeaks([proxy])
    }

    @Test("check shows the Redis store with its password masked, a rediss:// store with its TLS files, and refuses an inline password")
    func checkValidatesTheStore() throws {
        let dir = try TempDir(prefix: "tokenproxy-fleet-check")
        let base = """
            upstream: http://127.0.0.1:9
            credentials: {type: oauth2_client_credentials, token_url: "http://127.0.0.1:9/t", client_id: c, client_secret_env: CS}

            """
        let env = ["CS": "client-secret-value-1", "REDIS_PW": "redis-password-value-1"]
        let good = try dir.write("good.yaml", base + "store: {backend: redis, url: \"redis://fleet@127.0.0.1:6379/4\", password_env: REDIS_PW, key: a/b}\n")
        let ok = try ProxyProcess.run(args: ["check", "--config", good], env: env)
        #expect(ok.status == 0, "\(ok.output)")
        #expect(ok.stdout.contains("store.backend: redis"))
        #expect(ok.stdout.contains("store.password: ****** (from env REDIS_PW)"))
        #expect(!ok.output.contains("redis-password-value-1"))
        let tls = try dir.write("tls.yaml", base + "store: {backend: redis, url: \"rediss://127.0.0.1:6380/0\"}\n")
        let shown = try ProxyProcess.run(args: ["check", "--config", tls], env: env)
        #expect(shown.status == 0, "\(shown.output)")
        #expect(shown.stdout.contains("store.ca_file: system CAs"))
        let half = try dir.write("half.yaml", base + "store: {backend: redis, url: \"rediss://127.0.0.1:6380/0\", client_cert_file: ./tls.yaml}\n")
        let refused = try ProxyProcess.run(args: ["check", "--config", half], env: env)
        #expect(refused.status == 2)
        #expect(refused.stderr.contains("store.client_key_file"), "\(refused.stderr)")
        let inline = try dir.write("inline.yaml", base + "store: {backend: redis, url: \"redis://u:inline-pw-1@127.0.0.1/0\"}\n")
        let inlineResult = try ProxyProcess.run(args: ["check", "--config", inline], env: env)
        #expect(inlineResult.status == 2)
        #expect(inlineResult.stderr.contains("store.url"))
        #expect(!inlineResult.output.contains("inline-pw-1"))
    }
}
