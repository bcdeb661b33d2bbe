import Config
import Foundation
import Logging
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
/// Every call blocks (within `connect_timeout` / `command_timeout`) and runs on the token thread or
/// in a command, never on an event loop: the request path never reaches this type.
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

    private var connection: RedisConnection?
    private var lastUsed: Double = 0
    private var subscriber: RedisConnection?
    private var nextSubscribeAttempt: Double = 0
    /// With `store.sentinel`: a sentinel's `+switch-master` channel, so that a failover that leaves
    /// the old primary running (demoted to a replica, still answering reads) is followed at once.
    private var sentinelWatch: RedisConnection?
    private var nextSentinelWatchAttempt: Double = 0
    private var sentinelWatchBackoff = 1.0
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
        var random = SystemRandomNumberGenerator()
        owner = (0..<4).map { _ in String(random.next() as UInt32, radix: 16) }.joined(separator: "-")
        if let password = configuration.password?.value { registerSecret(password) }
        if let password = configuration.sentinel?.password?.value { registerSecret(password) }
    }

    /// Where the session lives, for messages (`redis://host:port/db key P`), without a secret.
    public var location: String { "redis \(configuration.server) db \(configuration.database), key \(configuration.key)" }

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
        let reply = try perform(.load, errorIsAnswer: true) { try $0.command(["HMGET", sessionKey, "generation", "session"]) }
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
        let reply = try perform(.restore) {
            try $0.command([
                "EVAL", RedisScripts.restore, "2", sessionKey, leaseKey, owner, seen, try encode(session), channel,
                String(highestGeneration),
            ])
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
            try $0.command(["EVAL", RedisScripts.save, "2", sessionKey, leaseKey, owner, expected, document, channel])
        }
        try commit(reply, what: "write")
        lastReadNeedsReseal = false
        rememberIssued(session)
        awaitReplica("write")
    }

    public func remove() throws {
        let reply = try perform(.remove) { try $0.command(["EVAL", RedisScripts.remove, "2", sessionKey, leaseKey, owner, channel]) }
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
                let connection = try connect()
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
                self.connection = nil
                markUnavailable("\(error)")
                nextSubscribeAttempt = now + subscribeBackoff
            }
        }
        return changed
    }

    /// Reads the sentinel subscription without waiting; true when the sentinels moved this store's
    /// primary. Both connections are then dropped, so the next command and the change channel go
    /// to the new primary through `connect()`. When no sentinel takes the subscription it is tried
    /// again with backoff (2 s up to 30 s); meanwhile a lost connection, `-READONLY` and `-MASTERDOWN`
    /// still lead to the new primary.
    private func followFailovers(now: Double) -> Bool {
        guard let sentinel = configuration.sentinel else { return false }
        if sentinelWatch == nil, now >= nextSentinelWatchAttempt {
            // Backing off: the token thread waits here, up to connect_timeout per sentinel.
            sentinelWatch = try? subscribeToFailovers(sentinel)
            sentinelWatchBackoff = sentinelWatch == nil ? min(sentinelWatchBackoff * 2, 30) : 1
            nextSentinelWatchAttempt = now + sentinelWatchBackoff
        }
        guard let watch = sentinelWatch else { return false }
        var moved = false
        do {
            for message in try watch.pendingReplies() {
                guard let primary = RedisReplies.switchedPrimary(message, master: sentinel.master) else { continue }
                logger.info("redis sentinels moved the primary of \(sentinel.master) to \(primary); following")
                moved = true
            }
        } catch {
            logger.debug("redis sentinel \(watch.endpoint): the +switch-master subscription ended (\(error)); subscribing again")
            sentinelWatch = nil
        }
        if moved {
            connection = nil
            subscriber = nil
            nextSubscribeAttempt = now
        }
        return moved
    }

    /// A subscription to `+switch-master` on the first sentinel that takes it.
    private func subscribeToFailovers(_ sentinel: RedisSentinelConfiguration) throws -> RedisConnection {
        var failures: [String] = []
        for address in sentinel.addresses {
            do {
                let watch = try sentinelConnection(address, sentinel)
                guard case .array = try watch.command(["SUBSCRIBE", "+switch-master"]) else {
                    failures.append("\(watch.endpoint): SUBSCRIBE +switch-master refused")
                    continue
                }
                return watch
            } catch {
                failures.append(String(describing: error))
            }
        }
        throw RedisConnectionError(description: "no sentinel took the +switch-master subscription: \(failures.joined(separator: "; "))")
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
            let reply = try perform(.lease) { try $0.command(["SET", leaseKey, owner, "NX", "PX", milliseconds]) }
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
            let reply = try perform(.release) { try $0.command(["EVAL", RedisScripts.release, "1", leaseKey, owner]) }
            if case .error(let message) = reply { logger.debug("\(location): releasing the lease: \(message)") }
        } catch {
            // It expires by itself after lease_time.
            logger.debug("\(location): the lease was not released (\(error)); it expires by itself")
        }
    }

    // MARK: - Connections

    /// Runs `body` on a live command connection; a failure drops the connection (the next call
    /// reconnects) and says once that Redis is unavailable.
    /// With `errorIsAnswer`, an error reply that names the key's state (WRONGTYPE: the key holds
    /// something else) is returned to the caller instead of thrown.
    private func perform(
        _ operation: StoreMetrics.Operation, errorIsAnswer: Bool = false, _ body: (RedisConnection) throws -> RedisValue
    ) throws -> RedisValue {
        do {
            let connection = try liveConnection()
            let reply = try body(connection)
            lastUsed = Self.monotonic()
            if case .error(let message) = reply, !(errorIsAnswer && reply.errorKind == .wrongType) {
                // A primary demoted by a failover: the next command asks the sentinels again.
                if reply.errorKind == .readOnly || reply.errorKind == .masterDown { self.connection = nil }
                // WRONGTYPE, NOAUTH, LOADING (a restarted Redis reading its data), READONLY (a replica):
                // the command did nothing; the caller fails for a passing reason and tries again later.
                metrics.record(operation, ok: false)
                throw TokenStoreError(description: "\(location): \(operation.rawValue) failed: \(message)")
            }
            metrics.record(operation, ok: true)
            _ = markAvailable()
            return reply
        } catch let error as RedisConnectionError {
            connection = nil
            metrics.record(operation, ok: false)
            markUnavailable(error.description)
            throw TokenStoreError(description: "redis store unavailable: \(error.description)")
        }
    }

    /// The command connection; one idle for more than a second is checked with PING first (Redis may
    /// have restarted since), so a refresh never fails on a connection that died while idle.
    private func liveConnection() throws -> RedisConnection {
        if let connection {
            if Self.monotonic() - lastUsed < 1 { return connection }
            if (try? connection.command(["PING"])) == .status("PONG") { return connection }
            self.connection = nil
        }
        let fresh = try connect()
        connection = fresh
        return fresh
    }

    /// A new connection, authenticated (`AUTH [user] password`) and on the configured database.
    private func connect() throws -> RedisConnection {
        let (host, port) = try primaryAddress() ?? (configuration.host, configuration.port)
        let connection = try RedisConnection(
            host: host, port: port, connectTimeout: configuration.connectTimeout, commandTimeout: configuration.commandTimeout, tls: tlsSettings)
        if let password = configuration.password?.value {
            let arguments = ["AUTH"] + (configuration.user.map { [$0] } ?? []) + [password]
            if case .error(let message) = try connection.command(arguments) {
                throw RedisConnectionError(description: "redis \(connection.endpoint): AUTH refused: \(message)")
            }
        } else if let user = configuration.user {
            // An ACL user without a password (`nopass`): AUTH still names it.
            if case .error(let message) = try connection.command(["AUTH", user, ""]) {
                throw RedisConnectionError(description: "redis \(connection.endpoint): AUTH \(user) refused: \(message)")
            }
        }
        if configuration.database != 0, case .error(let message) = try connection.command(["SELECT", String(configuration.database)]) {
            throw RedisConnectionError(description: "redis \(connection.endpoint): SELECT \(configuration.database) refused: \(message)")
        }
        // A sentinel's answer may lag a failover: the server itself must say it is the primary.
        if configuration.sentinel != nil {
            guard case .array(let role) = try connection.command(["ROLE"]), role.first?.text == "master" else {
                throw RedisConnectionError(description: "redis \(connection.endpoint) is not the primary (yet): asking the sentinels again")
            }
        }
        return connection
    }

    /// With `store.sentinel`, the primary's address as the sentinels name it, asked of each in turn
    /// (Redis Sentinel's client protocol: `SENTINEL get-master-addr-by-name`); nil without sentinels.
    /// Every new connection asks again, so a failover (a lost connection, `-READONLY`,
    /// `-MASTERDOWN`) is followed at the next command.
    private func primaryAddress() throws -> (String, Int)? {
        guard let sentinel = configuration.sentinel else { return nil }
        var failures: [String] = []
        for address in sentinel.addresses {
            do {
                let asked = try sentinelConnection(address, sentinel)
                let reply = try asked.command(["SENTINEL", "get-master-addr-by-name", sentinel.master])
                if case .array(let parts) = reply, parts.count == 2, let host = parts[0].text, let port = parts[1].text.flatMap({ Int($0) }) {
                    return (host, port)
                }
                failures.append("\(asked.endpoint): no primary named \(sentinel.master)")
            } catch {
                failures.append(String(describing: error))
            }
        }
        throw RedisConnectionError(description: "no sentinel named the primary \(sentinel.master): \(failures.joined(separator: "; "))")
    }

    /// `rediss://`: TLS to the primary and to the sentinels alike, with the same files; nil for `redis://`.
    private var tlsSettings: RedisTLS? {
        guard configuration.tls else { return nil }
        return RedisTLS(caFile: configuration.caFile, clientCertFile: configuration.clientCertFile, clientKeyFile: configuration.clientKeyFile)
    }

    /// A connection to one sentinel (with the store's TLS choice), authenticated with the sentinels'
    /// own password when there is one.
    private func sentinelConnection(
        _ address: RedisSentinelConfiguration.Address, _ sentinel: RedisSentinelConfiguration
    ) throws(RedisConnectionError) -> RedisConnection {
        let connection = try RedisConnection(
            host: address.host, port: address.port, connectTimeout: configuration.connectTimeout,
            commandTimeout: configuration.commandTimeout, tls: tlsSettings)
        if let password = sentinel.password?.value, case .error(let message) = try connection.command(["AUTH", password]) {
            throw RedisConnectionError(description: "redis sentinel \(connection.endpoint): AUTH refused: \(message)")
        }
        return connection
    }

    /// The stored generation; -1 when the key cannot be read as a session (overwritten), so that a
    /// process which knew a generation sees a change and reads the store.
    private func currentGeneration() throws -> Int64 {
        let reply = try perform(.watch, errorIsAnswer: true) { try $0.command(["HGET", sessionKey, "generation"]) }
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
        guard configuration.sentinel != nil, let connection else { return }
        let milliseconds = max(1, Int(configuration.commandTimeout * 500))
        do {
            let confirmed = try connection.command(["WAIT", "1", String(milliseconds)]).integer ?? 0
            if confirmed < 1 {
                logger.warning("\(location): no replica confirmed the \(what) within \(milliseconds) ms; a failover now could lose it")
            }
        } catch {
            self.connection = nil
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

/// The session store that `store.backend` names.
public func makeTokenStore(_ configuration: StoreConfiguration, logger: Logger) throws -> (store: any TokenStore, metrics: StoreMetrics) {
    let seal = configuration.encryption.map { SessionSeal($0, binding: SessionSeal.Binding(configuration)) }
    switch configuration.backend {
    case .file:
        return (FileTokenStore(path: configuration.path, logger: logger, seal: seal), StoreMetrics(backend: "file"))
    case .redis:
        guard let redis = configuration.redis else {
            throw ConfigurationError(keyPath: "store.url", reason: "required with store.backend: redis")
        }
        let metrics = StoreMetrics(backend: "redis")
        return (try RedisTokenStore(configuration: redis, logger: logger, metrics: metrics, seal: seal), metrics)
    }
}

/// Where the session is kept, for messages (`login`): a file's path or the Redis key.
public func storeLocation(_ configuration: StoreConfiguration) -> String {
    guard configuration.backend == .redis, let redis = configuration.redis else { return configuration.path }
    return "redis \(redis.server) db \(redis.database), key \(redis.key)"
}
