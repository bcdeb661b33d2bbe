import Config
import Foundation
import Glibc
import Synchronization
import TestSupport
import Testing

@testable import Credentials

/// `RedisTokenStore` against a real `redis-server` on a free port: the lease, the fence, the
/// notifications and an outage. Each store instance stands for one process.
@Suite("redis store, against a real redis-server", .serialized, .tags(.redis))
struct RedisTokenStoreTests {
    let redis: RedisServer
    let key = "test/\(UUID().uuidString.lowercased())"
    let capture = LogCapture()

    init() throws {
        redis = try RedisServer()
    }

    func store(lease: Double = 5) throws -> RedisTokenStore {
        let configuration = RedisStoreConfiguration(
            url: redis.url, tls: false, host: "127.0.0.1", port: redis.port, key: key, connectTimeout: 1, commandTimeout: 1,
            leaseTime: lease)
        return try RedisTokenStore(configuration: configuration, logger: capture.logger())
    }

    func session(_ access: String, refresh: String = "refresh-1") -> StoredSession {
        StoredSession(kind: "oauth2_refresh", accessToken: access, refreshToken: refresh, expiresAt: 1_900_000_000, issuedAt: 1_899_996_400)
    }

    @Test("a session saved by one process loads in another; a missing one is nil")
    func roundTrip() throws {
        let a = try store()
        let b = try store()
        #expect(try b.load() == nil)
        try a.withExclusiveLock { try a.save(session("access-1")) }
        #expect(try b.load() == session("access-1"))
        #expect(try redis.cli(["HGET", key + ":session", "generation"]) == "1")
    }

    /// Hands a store to another thread. Safe: the test thread does not touch the store again until
    /// that thread has signalled that it is done with it (meanwhile it reads only its Sendable metrics).
    final class Handoff: @unchecked Sendable {
        let store: RedisTokenStore
        init(_ store: RedisTokenStore) { self.store = store }
    }

    @Test("the lease is exclusive: a second process waits until the first gives it back")
    func leaseIsExclusive() throws {
        let a = try store()
        let b = try store()
        let inside = Mutex<[String]>([])
        let bDone = DispatchSemaphore(value: 0)
        let handoff = Handoff(b)
        try a.withExclusiveLock {
            inside.withLock { $0.append("a") }
            Thread.detachNewThread {
                try? handoff.store.withExclusiveLock { inside.withLock { $0.append("b") } }
                bDone.signal()
            }
            // b tried (and failed) to take the lease at least twice while a holds it.
            #expect(eventually { b.metrics.snapshot.succeeded[.lease] >= 2 })
            #expect(inside.withLock { $0 } == ["a"])
        }
        #expect(bDone.wait(timeout: .now() + 10) == .success)
        #expect(inside.withLock { $0 } == ["a", "b"])
        #expect(b.metrics.snapshot.leaseWaits == 1)
        #expect(try redis.cli(["EXISTS", key + ":lease"]) == "0")
    }

    @Test("a lease whose holder died runs out after lease_time and is taken over")
    func deadHolderLeaseExpires() throws {
        _ = try redis.cli(["SET", key + ":lease", "a-process-that-died", "PX", "300"])
        let b = try store()
        var entered = false
        try b.withExclusiveLock { entered = true }
        #expect(entered)
        #expect(b.metrics.snapshot.leaseWaits == 1)
    }

    @Test("a stale writer is fenced: a newer generation is never overwritten")
    func staleWriterIsFenced() throws {
        let a = try store()
        let b = try store()
        try a.withExclusiveLock { try a.save(session("access-1")) }
        _ = try a.load()  // a read generation 1 and then stalled
        try b.withExclusiveLock {
            _ = try b.load()
            try b.save(session("access-2", refresh: "refresh-2"))
        }
        #expect(throws: TokenStoreError.self) {
            try a.withExclusiveLock { try a.save(session("access-stale", refresh: "refresh-rotated-away")) }
        }
        do {
            try a.withExclusiveLock { try a.save(session("access-stale")) }
        } catch let error as TokenStoreError {
            #expect(error.fenced)
            #expect(error.description.contains("newer session"))
        }
        #expect(try b.load() == session("access-2", refresh: "refresh-2"))
        #expect(try redis.cli(["HGET", key + ":session", "generation"]) == "2")
    }

    @Test("a write while another process holds the lease is fenced")
    func leaseHeldElsewhereIsFenced() throws {
        let a = try store()
        _ = try a.load()
        _ = try redis.cli(["SET", key + ":lease", "someone-else", "PX", "10000"])
        do {
            try a.save(session("access-1"))
            Issue.record("the write went through while another process held the lease")
        } catch let error as TokenStoreError {
            #expect(error.fenced)
            #expect(error.description.contains("lease"))
        }
        #expect(try a.load() == nil)
    }

    @Test("a logout keeps the generation growing, so a writer from before it cannot come back after a new login")
    func noGenerationReuseAfterLogout() throws {
        let a = try store()
        let b = try store()
        let c = try store()
        try a.withExclusiveLock { try a.save(session("access-1")) }
        _ = try a.load()  // generation 1
        try b.withExclusiveLock {
            _ = try b.load()
            try b.remove()
        }
        #expect(try b.load() == nil)
        try c.withExclusiveLock { try c.save(session("access-login")) }  // a fresh `login` process: no read first
        #expect(throws: TokenStoreError.self) { try a.withExclusiveLock { try a.save(session("access-stale")) } }
        #expect(try b.load() == session("access-login"))
        #expect(try redis.cli(["HGET", key + ":session", "generation"]) == "3")
    }

    @Test("hasChanged sees another process's write through pub/sub, not its own")
    func notifications() throws {
        let a = try store()
        let b = try store()
        _ = try a.load()
        _ = a.hasChanged()  // subscribes
        #expect(a.hasChanged() == false)
        try b.withExclusiveLock {
            _ = try b.load()
            try b.save(session("access-2"))
        }
        #expect(eventually(timeout: 5) { a.hasChanged() })
        _ = try a.load()
        try a.withExclusiveLock { try a.save(session("access-3")) }
        // Its own write comes back on the channel too, with the generation it already knows.
        usleep(100_000)
        #expect(a.hasChanged() == false)
        #expect(eventually(timeout: 5) { b.hasChanged() })
    }

    @Test("Redis down: operations fail for a passing reason, said once in the log; its return is noticed")
    func outage() throws {
        let a = try store()
        try a.withExclusiveLock { try a.save(session("access-1")) }
        _ = try a.load()
        _ = a.hasChanged()
        redis.stop()
        #expect(throws: TokenStoreError.self) { try a.load() }
        #expect(throws: TokenStoreError.self) { try a.withExclusiveLock {} }
        _ = a.hasChanged()
        #expect(capture.count(level: .warning, containing: "redis store unavailable") == 1)
        #expect(a.metrics.snapshot.available == false)
        try redis.restart()
        #expect(eventually(timeout: 15) { a.hasChanged() })
        #expect(try a.load() == session("access-1"))  // append-only file: the session survived
        #expect(capture.contains("reachable again"))
    }

    @Test("an emptied key is a lost session, a logout's record is none; the write-back is read by the others")
    func emptiedStoreIsLostAndWrittenBack() throws {
        let a = try store()
        let b = try store()
        try a.withExclusiveLock { try a.save(session("access-1")) }
        #expect(try b.read() == .session(session("access-1")))
        _ = try redis.cli(["DEL", key + ":session"])  // what a restart without persistence leaves
        guard case .lost = try a.read() else {
            Issue.record("an emptied key should read as lost")
            return
        }
        try a.withExclusiveLock { try a.restore(session("access-1")) }
        #expect(try b.read() == .session(session("access-1")))
        // Above every generation the writer knew, so the others see a change.
        #expect(try redis.cli(["HGET", key + ":session", "generation"]) == "2")
        try b.withExclusiveLock { try b.remove() }
        #expect(try a.read() == StoreReading.noSession)
        #expect(try a.load() == nil)
    }

    func session(_ access: String, issuedAt: Double) -> StoredSession {
        StoredSession(kind: "oauth2_refresh", accessToken: access, refreshToken: "refresh-" + access, expiresAt: issuedAt + 3600, issuedAt: issuedAt)
    }

    @Test(
        "a key back at a lower generation with older tokens (a failover that lost writes) is lost; one with newer tokens (a login into an emptied store) is a session"
    )
    func lowerGenerationIsLostOnlyWithOlderTokens() throws {
        let a = try store()
        let b = try store()
        try a.withExclusiveLock { try a.save(session("first", issuedAt: 1_800_000_000)) }
        let older = try redis.cli(["--raw", "HGET", key + ":session", "session"])
        #expect(try a.read() == .session(session("first", issuedAt: 1_800_000_000)))
        try a.withExclusiveLock { try a.save(session("second", issuedAt: 1_800_000_100)) }
        #expect(try redis.cli(["HGET", key + ":session", "generation"]) == "2")

        // A promoted replica that missed the second write.
        _ = try redis.cli(["HSET", key + ":session", "generation", "1", "session", older])
        guard case .lost(let why) = try a.read() else {
            Issue.record("an older session under a lower generation should read as lost")
            return
        }
        #expect(why.contains("went back to generation 1 after this process saw generation 2"))
        // A process that never saw generation 2 has nothing newer: it takes the key as it is.
        #expect(try b.read() == .session(session("first", issuedAt: 1_800_000_000)))
        try a.withExclusiveLock { try a.restore(session("second", issuedAt: 1_800_000_100)) }
        #expect(try redis.cli(["HGET", key + ":session", "generation"]) == "3")
        #expect(try b.read() == .session(session("second", issuedAt: 1_800_000_100)))

        // Redis emptied, then a login (any generation): newer tokens at generation 1 are taken.
        _ = try redis.cli(["DEL", key + ":session"])
        let login = try store()
        try login.withExclusiveLock { try login.save(session("login", issuedAt: 1_800_000_200)) }
        #expect(try redis.cli(["HGET", key + ":session", "generation"]) == "1")
        #expect(try a.read() == .session(session("login", issuedAt: 1_800_000_200)))
    }

    @Test("a key overwritten with another type or a garbage document is lost; the write-back replaces it; logout still records the end")
    func garbageIsLostAndReplaced() throws {
        let a = try store()
        try a.withExclusiveLock { try a.save(session("access-1")) }
        _ = try redis.cli(["SET", key + ":session", "garbage"])
        guard case .lost = try a.read() else {
            Issue.record("a string key should read as lost")
            return
        }
        try a.withExclusiveLock { try a.restore(session("access-1")) }
        #expect(try a.read() == .session(session("access-1")))
        _ = try redis.cli(["HSET", key + ":session", "session", "{not json"])
        guard case .lost = try a.read() else {
            Issue.record("a garbage document should read as lost")
            return
        }
        try a.withExclusiveLock { try a.restore(session("access-1")) }
        #expect(try a.read() == .session(session("access-1")))
        _ = try redis.cli(["SET", key + ":session", "garbage"])
        try a.withExclusiveLock { try a.remove() }
        #expect(try a.read() == StoreReading.noSession)
    }

    @Test("a login replaces a key that is no session hash; a fenced write over one is refused")
    func loginOverGarbage() throws {
        let a = try store()
        _ = try redis.cli(["SET", key + ":session", "garbage"])
        try a.withExclusiveLock { try a.save(session("access-login")) }  // a login reads nothing first
        #expect(try a.read() == .session(session("access-login")))
        _ = try redis.cli(["SET", key + ":session", "garbage"])
        do {
            try a.withExclusiveLock { try a.save(session("access-2")) }
            Issue.record("a write expecting a generation should be fenced over a key that is no session hash")
        } catch let error as TokenStoreError {
            #expect(error.fenced)
        }
        _ = try redis.cli(["DEL", key + ":session"])
        _ = try redis.cli(["HSET", key + ":session", "generation", "not-a-number"])
        let b = try store()
        try b.withExclusiveLock { try b.save(session("access-3")) }
        #expect(try a.read() == .session(session("access-3")))
    }

    @Test("a write-back is fenced when another process wrote since the store was found lost")
    func writeBackIsFenced() throws {
        let a = try store()
        let b = try store()
        try a.withExclusiveLock { try a.save(session("access-1")) }
        _ = try redis.cli(["DEL", key + ":session"])
        guard case .lost = try a.read(), case .lost = try b.read() else {
            Issue.record("both should read the emptied key as lost")
            return
        }
        try b.withExclusiveLock { try b.restore(session("access-2")) }
        do {
            try a.withExclusiveLock { try a.restore(session("access-1")) }
            Issue.record("the second write-back should be fenced")
        } catch let error as TokenStoreError {
            #expect(error.fenced)
        }
        #expect(try a.read() == .session(session("access-2")))
        // A logout after the loss: the record stands, and nothing is written back over it.
        _ = try redis.cli(["DEL", key + ":session"])
        guard case .lost = try a.read() else {
            Issue.record("an emptied key should read as lost")
            return
        }
        try b.withExclusiveLock { try b.remove() }
        do {
            try a.withExclusiveLock { try a.restore(session("access-1")) }
            Issue.record("a write-back over a logout should be fenced")
        } catch let error as TokenStoreError {
            #expect(error.fenced)
        }
        #expect(try a.read() == StoreReading.noSession)
    }
}
