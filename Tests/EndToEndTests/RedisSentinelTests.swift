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
@Suite("Fleet through Redis Sentinel", .serialized)
struct RedisSentinelTests {
    @Test("two serve processes through three sentinels: the primary killed under load, requests keep being served, one refresh after the failover")
    func failover() throws {
        let primary = try RedisServer()
        let replica = try RedisServer(arguments: ["--replicaof", "127.0.0.1", String(primary.port)])
        let sentinels = try (0..<3).map { _ in try RedisSentinel(master: "tokens", primaryPort: primary.port) }
        defer { for sentinel in sentinels { sentinel.stop() } }
        // A failover needs the sentinels to know the replica and each other.
        #expect(within(60) {
            sentinels.allSatisfy { $0.masterField("tokens", "num-slaves") == "1" && $0.masterField("tokens", "num-other-sentinels") == "2" }
        })
        let addresses = sentinels.map(\.address).joined(separator: ", ")
        let fleet = try Fleet(
            idpArguments: ["--access-ttl", "3600"], lease: "2s",
            storeExtra: "  sentinel: {master: tokens, addresses: [\(addresses)]}", redisServer: primary)
        defer { fleet.stop() }
        #expect(try fleet.login().status == 0)
        let proxies = try (0..<2).map { _ in try fleet.serve() }
        for proxy in proxies { #expect(try send(proxy).status == 200) }
        #expect(try fleet.life.idpCalls("refresh_token") == 0)

        primary.kill()
        // No primary until the sentinels agree: the token held keeps serving.
        for round in 0..<10 {
            for proxy in proxies { #expect(try send(proxy).status == 200, "round \(round)") }
        }
        #expect(within(60) { sentinels.allSatisfy { $0.primaryPort("tokens") == replica.port } }, "the replica was not promoted")

        // A forced refresh through the new primary: one call to the identity provider, and the
        // rotated refresh token lands in the new primary.
        #expect(try curl(["-X", "POST", try #require(proxies[0].adminURL) + "/refresh"]).status == 202)
        #expect(try within(45) { try fleet.life.idpCalls("refresh_token") == 1 })
        #expect(try within(15) {
            let generation = try replica.cli(["HGET", fleet.key + ":session", "generation"])
            return (Int(generation) ?? 0) >= 2
        })
        for proxy in proxies { #expect(try send(proxy).status == 200) }
        #expect(try fleet.life.idpCalls("refresh_token") == 1)
        #expect(try fleet.idpStat("reuse_detected") == 0)
        for proxy in proxies { proxy.terminate() }
        for proxy in proxies { #expect(try proxy.waitForExit() == 0) }
    }
}
