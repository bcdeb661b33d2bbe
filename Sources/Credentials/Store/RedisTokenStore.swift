import Config
import Foundation
import Logging
internal import Redis
import Sockets

/// `store.backend: redis`: the session a fleet of proxies shares (issue 13, ARCHITECTURE.md "The
/// store"). The same promises as `FileTokenStore`, across machines:
///
/// - the session is one hash (`P:session`: `generation`, `session`), replaced atomically;
/// - `withExclusiveLock` takes a lease (`SET P:lease <random owner> NX PX lease_time`) instead of
///   `flock`; the caller re-reads the session under it and refreshes only when the stored token is
///   still the one it meant to replace;
/// - `save` is fenced (`RedisScripts.save`): it commits only when the generation is the one this
///   process last read and no other process holds the lease, so a holder that stalled past its
///   lease cannot overwrite a newer session with a rotated-away refresh token;
/// - every write publishes the new generation on `P:changed`; `hasChanged()` reads that
///   subscription without waiting, with a slow poll of the generation as the fallback.
///
/// The Redis client (`Redis/RedisClient.swift`) reaches the primary, through the sentinels and
/// their failovers; this type keeps only the session's rules. Every call blocks (within
/// `connect_timeout` / `command_timeout`) and runs on the token thread or in a command, never on an
/// event loop: the request path never reaches this type.
public final class RedisTokenStore: TokenStore {
    public let configuration: RedisStoreConfiguration
    public let metrics: StoreMetrics
    private let logger: Logger
    private let sessionKey: String
    /// Seals every session written, opens sealed ones read (`store.encryption_key_*`).
    private let seal: SessionSeal?
    private let leaseKey: String
    private let channel: String
    /// This process's lease value: random, so that only the holder can release or write under it.
    private let owner: String
    private let schedule = LeaseWaitSchedule()
    private let client: RedisClient

    /// The connection subscribed to `P:changed` (a subscribed connection takes no other command).
    private var subscriber: RedisConnection?
    private var nextSubscribeAttempt: Double = 0
    private var subscribeBackoff = 0.5
    private var nextSlowPoll: Double = 0
    /// The generation this process last read or wrote: what the fenced write expects. nil until the
    /// first read (a `login` writes whatever is there).
    private var knownGeneration: Int64?
    /// Set by a `read()` that found the session lost: the raw generation field it saw ("" for none),
    /// what `restore` expects to find still.
    private var lostGeneration: String?
    /// The highest generation this process has read or written; a write-back goes above it.
    private var highestGeneration: Int64 = 0
    /// When the tokens of the newest session this process read or wrote were issued.
    private var newestIssuedAt: Double = 0
    private var unavailable: String?
    public private(set) var lastReadNeedsReseal = false

    /// How often the generation is read when no notification came (pub/sub is the fast path).
    static let slowPollInterval = 5.0
    public init(
        configuration: RedisStoreConfiguration, logger: Logger, metrics: StoreMetrics = StoreMetrics(backend: "redis"), seal: SessionSeal? = nil
    ) throws {
        self.configuration = configuration
        self.seal = seal
        self.logger = logger
        self.metrics = metrics
        sessionKey = configuration.key + ":session"
        leaseKey = configuration.key + ":lease"
        channel = configuration.key + ":changed"
        client = RedisClient(configuration: RedisClientConfiguration(configuration))
        var random = SystemRandomNumberGenerator()
        owner = (0..<4).map { _ in String(random.next() as UInt32, radix: 16) }.joined(separator: "-")
        if let password = configuration.password?.value { registerSecret(password) }
        if let password = configuration.sentinel?.password?.value { registerSecret(password) }
    }

    /// Where the session lives, for messages (`redis://host:port/db key P`), without a secret.
    public var location: String { configuration.location }

    // MARK: - TokenStore

    public func load() throws -> StoredSession? {
        switch try read() {
        case .session(let session): return session
        case .noSession: return nil
        case .lost(let why):
            logger.error("\(location): \(why); serving as with no session")
            return nil
        }
    }

    public func read() throws -> StoreReading {
        lastReadNeedsReseal = false
        let reply = try perform(.load, errorIsAnswer: true) { try client.command(["HMGET", sessionKey, "generation", "session"]) }
        guard let hash = RedisReplies.session(reply) else {
            throw TokenStoreError(description: "\(location): reading \(sessionKey) failed: \(reply.errorText ?? "unexpected answer")")
        }
        switch hash {
        case .empty:
            knownGeneration = 0
            lostGeneration = ""
            return .lost("\(sessionKey) is empty and no logout was recorded (was Redis restarted without persistence?)")
        case .unreadable(let seen):
            knownGeneration = nil
            lostGeneration = seen
            return .lost("\(sessionKey) is not a tokenproxy session hash")
        case .ended(let generation):
            remember(generation)
            return .noSession
        case .document(let generation, let stored):
            let seen = generation.map { String($0) } ?? ""
            remember(generation ?? 0)
            let (document, reseal) = try SessionSeal.document(stored, with: seal)
            guard let session = try? JSONDecoder().decode(StoredSession.self, from: Data(document)), session.version == 1 else {
                lostGeneration = seen
                return .lost("the stored session cannot be read (not a session document this version can read)")
            }
            if let why = steppedBack(to: generation ?? 0, seen: seen, issuedAt: session.issuedAt) { return .lost(why) }
            rememberIssued(session)
            if let token = session.accessToken { registerSecret(token) }
            if let token = session.refreshToken { registerSecret(token) }
            lastReadNeedsReseal = reseal
            return .session(session)
        }
    }

    /// Writes `session` back into a store that lost it (`RedisScripts.restore`), fenced: refused
    /// when another process holds the lease or the key changed since `read()` found it lost.
    public func restore(_ session: StoredSession) throws {
        guard let seen = lostGeneration else {
            throw TokenStoreError(description: "\(location): restore without a lost session read first", fenced: true)
        }
        let document = try encode(session)
        let reply = try perform(.restore) {
            try client.run(
                RedisScripts.restore, keys: [sessionKey, leaseKey], arguments: [owner, seen, document, channel, String(highestGeneration)])
        }
        try commit(reply, what: "write-back")
        rememberIssued(session)
        awaitReplica("write-back")
    }

    /// Generations only grow (every write adds one), so a key below one this process already read
    /// or wrote, holding tokens issued before the newest this process saw, lost writes: a replica
    /// promoted before it had them (a failover after `WAIT` timed out). Its refresh token may be one
    /// the identity provider already rotated, so it is treated as lost and the newer session this
    /// process holds goes back (`restore`, fenced on the generation seen here, written above the
    /// highest one). Newer tokens under a lower generation are a login into a store that lost
    /// everything (a Redis restarted empty): those are taken as they are.
    private func steppedBack(to generation: Int64, seen: String, issuedAt: Double?) -> String? {
        guard generation < highestGeneration, (issuedAt ?? 0) < newestIssuedAt else { return nil }
        knownGeneration = generation
        lostGeneration = seen
        return "\(sessionKey) went back to generation \(generation) after this process saw generation \(highestGeneration) (a failover lost writes?)"
    }

    private func rememberIssued(_ session: StoredSession) {
        newestIssuedAt = max(newestIssuedAt, session.issuedAt ?? 0)
    }

    private func remember(_ generation: Int64) {
        knownGeneration = generation
        lostGeneration = nil
        highestGeneration = max(highestGeneration, generation)
    }

    private func encode(_ session: StoredSession) throws -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        guard let data = try? encoder.encode(session) else {
            throw TokenStoreError(description: "\(location): cannot encode the session")
        }
        guard let seal else { return String(decoding: data, as: UTF8.self) }
        return String(decoding: try seal.seal(Array(data)), as: UTF8.self)
    }

    public func save(_ session: StoredSession) throws {
        let document = try encode(session)
        let expected = knownGeneration.map { String($0) } ?? ""
        let reply = try perform(.save) {
            try client.run(RedisScripts.save, keys: [sessionKey, leaseKey], arguments: [owner, expected, document, channel])
        }
        try commit(reply, what: "write")
        lastReadNeedsReseal = false
        rememberIssued(session)
        awaitReplica("write")
    }

    public func remove() throws {
        let reply = try perform(.remove) { try client.run(RedisScripts.remove, keys: [sessionKey, leaseKey], arguments: [owner, channel]) }
        try commit(reply, what: "delete")
        awaitReplica("delete")
    }

    public func withExclusiveLock<T>(_ body: () throws -> T) throws -> T {
        try acquireLease()
        defer { releaseLease() }
        return try body()
    }

    /// True when another process wrote the session (a notification or the slow poll saw a newer
    /// generation), or when Redis is reachable again after an outage (the session may have moved
    /// on meanwhile). Never waits for a notification; reconnects with backoff.
    public func hasChanged() -> Bool {
        let now = Self.monotonic()
        // The new primary may hold an older session than the one this process read (replication is
        // asynchronous): read it again.
        var changed = followFailovers(now: now)
        if subscriber == nil, now >= nextSubscribeAttempt {
            do {
                let connection = try client.connect()
                let reply = try connection.command(["SUBSCRIBE", channel])
                guard case .array = reply else { throw RedisConnectionError(description: "\(configuration.endpoint): SUBSCRIBE refused") }
                subscriber = connection
                subscribeBackoff = 0.5
                metrics.record(.watch, ok: true)
                // Notifications sent while nobody listened are lost: look at the generation once.
                let recovered = markAvailable()
                let generation = try currentGeneration()
                if recovered || generation != knownGeneration { changed = true }
                nextSlowPoll = now + Self.slowPollInterval
            } catch {
                metrics.record(.watch, ok: false)
                markUnavailable("\(error)")
                nextSubscribeAttempt = now + subscribeBackoff
                subscribeBackoff = min(subscribeBackoff * 2, 5)
            }
        }
        if let subscriber {
            do {
                for message in try subscriber.pendingReplies() {
                    if let generation = RedisReplies.announcedGeneration(message, channel: channel), generation != knownGeneration {
                        changed = true
                    }
                }
                if now >= nextSlowPoll {
                    nextSlowPoll = now + Self.slowPollInterval
                    if try currentGeneration() != knownGeneration { changed = true }
                }
            } catch {
                metrics.record(.watch, ok: false)
                self.subscriber = nil
                client.disconnect()
                markUnavailable("\(error)")
                nextSubscribeAttempt = now + subscribeBackoff
            }
        }
        return changed
    }

    /// True when the sentinels moved this store's primary (`RedisClient.followFailovers`, which
    /// drops the command connection then); the change subscription is made again at once, on the
    /// new primary.
    private func followFailovers(now: Double) -> Bool {
        var moved = false
        for event in client.followFailovers(now: now) {
            switch event {
            case .moved(let primary):
                logger.info("redis sentinels moved the primary of \(configuration.sentinel?.master ?? "") to \(primary); following")
                moved = true
            case .watchEnded(let sentinel, let why):
                logger.debug("redis sentinel \(sentinel): the +switch-master subscription ended (\(why)); subscribing again")
            }
        }
        if moved {
            subscriber = nil
            nextSubscribeAttempt = now
        }
        return moved
    }

    // MARK: - The lease

    private func acquireLease() throws {
        let milliseconds = String(max(1, Int(configuration.leaseTime * 1000)))
        let started = Self.monotonic()
        // A holder gives the lease back as soon as its write is done, and one that died loses it after
        // lease_time: waiting that long (and the time to reach Redis) is enough to take over. Bounded,
        // because the token thread waits here and a drain waits for the token thread.
        let deadline = started + configuration.leaseTime + configuration.connectTimeout + configuration.commandTimeout + 1
        var attempt = 0
        while true {
            let reply = try perform(.lease) { try client.command(["SET", leaseKey, owner, "NX", "PX", milliseconds]) }
            switch reply {
            case .status("OK"):
                if attempt > 0 { metrics.leaseWaited(seconds: Self.monotonic() - started) }
                return
            case .null:
                break
            case .error(let message):
                throw TokenStoreError(description: "\(location): taking the refresh lease failed: \(message)")
            default:
                throw TokenStoreError(description: "\(location): unexpected answer to SET NX")
            }
            let now = Self.monotonic()
            guard now < deadline else {
                metrics.leaseWaited(seconds: now - started)
                throw TokenStoreError(description: "\(location): the refresh lease is held by another process for longer than \(Int(deadline - started)) s")
            }
            Self.sleep(min(schedule.delay(attempt: attempt), deadline - now))
            attempt += 1
        }
    }

    private func releaseLease() {
        do {
            let reply = try perform(.release) { try client.run(RedisScripts.release, keys: [leaseKey], arguments: [owner]) }
            if case .error(let message) = reply { logger.debug("\(location): releasing the lease: \(message)") }
        } catch {
            // It expires by itself after lease_time.
            logger.debug("\(location): the lease was not released (\(error)); it expires by itself")
        }
    }

    // MARK: - Commands

    /// Runs `body` (one command through the client); a failure to reach Redis says once that Redis
    /// is unavailable (the client reconnects at the next command).
    /// With `errorIsAnswer`, an error reply that names the key's state (WRONGTYPE: the key holds
    /// something else) is returned to the caller instead of thrown.
    private func perform(
        _ operation: StoreMetrics.Operation, errorIsAnswer: Bool = false, _ body: () throws -> RedisValue
    ) throws -> RedisValue {
        do {
            let reply = try body()
            if case .error(let message) = reply, !(errorIsAnswer && reply.errorKind == .wrongType) {
                // WRONGTYPE, NOAUTH, LOADING (a restarted Redis reading its data), READONLY (a replica:
                // the client asks the sentinels again at the next command): the command did nothing;
                // the caller fails for a passing reason and tries again later.
                metrics.record(operation, ok: false)
                throw TokenStoreError(description: "\(location): \(operation.rawValue) failed: \(message)")
            }
            metrics.record(operation, ok: true)
            _ = markAvailable()
            return reply
        } catch let error as RedisConnectionError {
            metrics.record(operation, ok: false)
            markUnavailable(error.description)
            throw TokenStoreError(description: "redis store unavailable: \(error.description)")
        }
    }

    /// The stored generation; -1 when the key cannot be read as a session (overwritten), so that a
    /// process which knew a generation sees a change and reads the store.
    private func currentGeneration() throws -> Int64 {
        let reply = try perform(.watch, errorIsAnswer: true) { try client.command(["HGET", sessionKey, "generation"]) }
        if case .null = reply { return 0 }
        return reply.integer ?? -1
    }

    private func commit(_ reply: RedisValue, what: String) throws {
        switch RedisReplies.write(reply) {
        case .committed(let generation):
            remember(generation)
        case .fenced(let reason):
            let why = reason == "lease" ? "another process holds the refresh lease" : "another process wrote a newer session"
            throw TokenStoreError(description: "\(location): the \(what) was refused: \(why)", fenced: true)
        case .unreadable:
            throw TokenStoreError(description: "\(location): unexpected answer to the \(what)")
        }
    }

    /// With `store.sentinel`: waits, at most half the command timeout, until a replica has the write
    /// just committed (`WAIT 1 ms`). Replication is asynchronous and a failover promotes a replica, so
    /// a rotated refresh token that only the old primary held would be lost with it and the fleet's
    /// next refresh would present the one it replaced (Redis docs, WAIT: acknowledged writes survive
    /// a failover in practice, as Sentinel promotes the most up-to-date replica). The write stands
    /// either way; one no replica confirmed is logged.
    private func awaitReplica(_ what: String) {
        guard configuration.sentinel != nil else { return }
        let milliseconds = max(1, Int(configuration.commandTimeout * 500))
        if let confirmed = client.waitForReplicas(1, milliseconds: milliseconds), confirmed < 1 {
            logger.warning("\(location): no replica confirmed the \(what) within \(milliseconds) ms; a failover now could lose it")
        }
    }

    /// Says once that Redis cannot be reached (issue 13 point 4).
    private func markUnavailable(_ why: String) {
        guard unavailable == nil else { return }
        unavailable = why
        logger.warning(
            "redis store unavailable (\(why)): serving with the token held while it is valid, no refresh until Redis is back; reconnecting with backoff")
    }

    /// True when this ends an outage.
    private func markAvailable() -> Bool {
        guard unavailable != nil else { return false }
        unavailable = nil
        logger.info("redis store \(configuration.server) reachable again")
        return true
    }

    static func monotonic() -> Double { EventLoop.monotonicNow() }

    static func sleep(_ seconds: Double) { Syscall.sleep(seconds) }
}
