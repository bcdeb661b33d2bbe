import Foundation
import TestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// `store.sentinel` (CONTRACT.md "The fleet store in production", issue 33 point 2) against real
/// servers: a primary, a replica and three redis-sentinel processes. The primary is killed with
/// SIGKILL under load; the valid token keeps serving, the sentinels promote the replica, and the
/// fleet's next refresh goes to the new primary, once.
@Suite("Fleet through Redis Sentinel", .serialized, .tags(.endToEnd, .redis), .timeLimit(.minutes(35)))
struct RedisSentinelTests {
    /// A primary, its replica and three sentinels that know both and each other (a failover needs that).
    struct Topology {
        let primary: RedisServer
        let replica: RedisServer
        let sentinels: [RedisSentinel]

        init() throws {
            // Redis 7 waits 5 s (repl-diskless-sync-delay) before a replica's first sync, and a sentinel
            // counts a replica whose link is still down: without these, a failover could promote an
            // empty replica.
            primary = try RedisServer(arguments: ["--repl-diskless-sync-delay", "0"])
            replica = try RedisServer(arguments: ["--replicaof", "127.0.0.1", String(primary.port), "--repl-diskless-sync-delay", "0"])
            let replica = replica
            guard within(60, { (try? replica.cli(["INFO", "replication"]).contains("master_link_status:up")) == true }) else {
                throw HarnessError("the replica did not sync with the primary within 60 s")
            }
            let primaryPort = primary.port
            let sentinels = try (0..<3).map { _ in try RedisSentinel(master: "tokens", primaryPort: primaryPort) }
            self.sentinels = sentinels
            let ready = within(60) {
                sentinels.allSatisfy { $0.masterField("tokens", "num-slaves") == "1" && $0.masterField("tokens", "num-other-sentinels") == "2" }
            }
            guard ready else { throw HarnessError("the sentinels did not find the replica and each other within 60 s") }
        }

        var storeExtra: String { "  sentinel: {master: tokens, addresses: [\(sentinels.map(\.address).joined(separator: ", "))]}" }

        /// Waits until the replica holds the session generation `generation` (replication is asynchronous).
        func replicated(_ key: String, generation: Int) -> Bool {
            within(30) { (try? replica.cli(["HGET", key + ":session", "generation"])) == String(generation) }
        }

        /// Waits until every sentinel names the replica as the primary.
        func promoted() -> Bool { within(60) { sentinels.allSatisfy { $0.primaryPort("tokens") == replica.port } } }

        func stop() { for sentinel in sentinels { sentinel.stop() } }
    }

    @Test("three serve processes through three sentinels: the primary killed under load, requests keep being served, one refresh after the failover")
    func failover() throws {
        let topology = try Topology()
        defer { topology.stop() }
        let (primary, replica) = (topology.primary, topology.replica)
        let fleet = try Fleet(idpArguments: ["--access-ttl", "3600"], lease: "2s", storeExtra: topology.storeExtra, redisServer: primary)
        defer { fleet.stop() }
        #expect(try fleet.login().status == 0)
        let proxies = try (0..<3).map { _ in try fleet.serve() }
        for proxy in proxies { #expect(try send(proxy).status == 200) }
        #expect(try fleet.life.idpCalls("refresh_token") == 0)

        #expect(topology.replicated(fleet.key, generation: 1))
        let load = Load(proxies)
        #expect(load.waitFor(10))
        primary.kill()
        // No primary until the sentinels agree: the token held keeps serving.
        #expect(load.waitFor(20))
        #expect(topology.promoted(), "the replica was not promoted")
        #expect(load.waitFor(10))
        let statuses = load.stop()
        #expect(statuses.keys.sorted() == [200], "\(statuses)")

        // A forced refresh through the new primary: one call to the identity provider, and the
        // rotated refresh token lands in the new primary.
        #expect(try curl(["-X", "POST", try #require(proxies[0].adminURL) + "/refresh"]).status == 202)
        #expect(try within(45) { try fleet.life.idpCalls("refresh_token") == 1 })
        #expect(
            try within(15) {
                let generation = try replica.cli(["HGET", fleet.key + ":session", "generation"])
                return (Int(generation) ?? 0) >= 2
            })
        try expectServedByOneRefreshWithoutWriteBack(fleet, proxies)
    }

    @Test(
        "a graceful failover (SENTINEL FAILOVER) leaves the old primary running as a replica: the fleet follows +switch-master and the next refresh lands once in the new primary"
    )
    func switchMasterIsFollowed() throws {
        let topology = try Topology()
        defer { topology.stop() }
        let fleet = try Fleet(idpArguments: ["--access-ttl", "3600"], lease: "2s", storeExtra: topology.storeExtra, redisServer: topology.primary)
        defer { fleet.stop() }
        #expect(try fleet.login().status == 0)
        let proxies = try (0..<3).map { _ in try fleet.serve() }
        for proxy in proxies { #expect(try send(proxy).status == 200) }

        #expect(topology.replicated(fleet.key, generation: 1))
        let watchers = try topology.sentinels[0].cli(["CLIENT", "LIST"])
        _ = try topology.sentinels[0].cli(["SENTINEL", "FAILOVER", "tokens"])
        #expect(topology.promoted(), "the replica was not promoted")
        // The old primary still answers (reads, and -READONLY to writes): only the sentinels' message
        // says that it moved.
        let moved = "moved the primary of tokens to 127.0.0.1:\(topology.replica.port)"
        for proxy in proxies { #expect(proxy.waitForStderr(containing: moved, timeout: 60), "\(proxy.stderr.suffix(2000))\n\(watchers)") }
        #expect(within(30) { (try? topology.primary.cli(["ROLE"]).hasPrefix("slave")) == true })

        #expect(try curl(["-X", "POST", try #require(proxies[1].adminURL) + "/refresh"]).status == 202)
        #expect(try within(45) { try fleet.life.idpCalls("refresh_token") == 1 })
        #expect(try within(15) { (Int(try topology.replica.cli(["HGET", fleet.key + ":session", "generation"])) ?? 0) >= 2 })
        try expectServedByOneRefreshWithoutWriteBack(fleet, proxies)
    }

    /// After the failover: every proxy still serves, the one refresh was the only one and no
    /// refresh token was reused, the promoted replica had the session (none wrote it back), and
    /// every proxy exits cleanly.
    private func expectServedByOneRefreshWithoutWriteBack(
        _ fleet: Fleet, _ proxies: [ProxyProcess], sourceLocation: SourceLocation = #_sourceLocation
    ) throws {
        for proxy in proxies { #expect(try send(proxy).status == 200, sourceLocation: sourceLocation) }
        #expect(try fleet.life.idpCalls("refresh_token") == 1, sourceLocation: sourceLocation)
        #expect(try fleet.idpStat("reuse_detected") == 0, sourceLocation: sourceLocation)
        for proxy in proxies {
            #expect(!proxy.stderr.contains("wrote its session back"), "the promoted replica had the session", sourceLocation: sourceLocation)
        }
        for proxy in proxies { proxy.terminate() }
        for proxy in proxies { #expect(try proxy.waitForExit() == 0, sourceLocation: sourceLocation) }
    }
}
