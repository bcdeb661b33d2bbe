internal import Redis

/// The Lua scripts of the Redis store (run with EVAL: Redis runs each one atomically, so the checks
/// and the write they guard cannot interleave with another client's commands).
///
/// Keys of one session, under the configured prefix P (`store.key`):
/// - `P:session`: a hash, `generation` (grows by one with every write, never reset: a logout deletes
///   only the `session` field, so a later login cannot bring an old generation back) and `session`
///   (the JSON document the file store keeps). A generation without a document is the record that
///   the session ended (`logout`); no hash at all, or one that cannot be read, is a store that lost
///   the session (a Redis restarted without persistence, a key overwritten), which a process that
///   holds the session writes back with `restore`;
/// - `P:lease`: the refresh lease, a random owner value set with `SET NX PX`;
/// - `P:changed`: the pub/sub channel; every write publishes the new generation.
enum RedisScripts {
    /// How every write begins (KEYS[1] the session, KEYS[2] the lease, ARGV[1] this process's owner
    /// value): refused while another process holds the lease; `kind` is the session key's type.
    private static let leaseGuard = """
        local holder = redis.call('GET', KEYS[2])
        if holder and holder ~= ARGV[1] then return {0, 'lease'} end
        local kind = redis.call('TYPE', KEYS[1])['ok']
        """

    /// KEYS: session, lease. ARGV: owner, expected generation ("" = any), document, channel.
    /// Commits only when no other process holds the lease (ours, or none: an expired lease that
    /// nobody took over means nobody else wrote) and the generation is the one the refresh read.
    /// A write that takes any generation (a `login`) replaces a key that is no session hash.
    /// Answers {1, new generation} or {0, "lease" | "generation"}.
    static let save = RedisScript(
        """
        \(leaseGuard)
        local current = 0
        if kind == 'hash' then
            current = tonumber(redis.call('HGET', KEYS[1], 'generation') or '0') or 0
        elseif kind ~= 'none' then
            if ARGV[2] ~= '' then return {0, 'generation'} end
            redis.call('DEL', KEYS[1])
        end
        if ARGV[2] ~= '' and current ~= tonumber(ARGV[2]) then return {0, 'generation'} end
        current = current + 1
        redis.call('HSET', KEYS[1], 'generation', current, 'session', ARGV[3])
        redis.call('PUBLISH', ARGV[4], current)
        return {1, current}
        """)

    /// KEYS: session, lease. ARGV: owner, channel. Deletes the document, keeps the generation growing:
    /// the generation left alone is the record that the session ended, which stops every process
    /// from writing its session back. A key that is no hash (overwritten) is replaced by that record.
    static let remove = RedisScript(
        """
        \(leaseGuard)
        if kind ~= 'hash' and kind ~= 'none' then redis.call('DEL', KEYS[1]) end
        redis.call('HDEL', KEYS[1], 'session')
        local current = redis.call('HINCRBY', KEYS[1], 'generation', 1)
        redis.call('PUBLISH', ARGV[2], current)
        return {1, current}
        """)

    /// KEYS: session, lease. ARGV: owner, generation seen (the raw `generation` field; "" when the
    /// key was missing, no hash, or had none), document, channel, highest generation this process
    /// knew. Writes a session back into a store that lost it: commits only when no other process
    /// holds the lease and the key is still as it was read (any write since, a logout's included,
    /// changed its generation), replacing whatever unreadable value is there. The new generation
    /// is above every one this process knew, so the others see a change. Answers as `save`.
    static let restore = RedisScript(
        """
        \(leaseGuard)
        local seen = ''
        if kind == 'hash' then seen = redis.call('HGET', KEYS[1], 'generation') or '' end
        if seen ~= ARGV[2] then return {0, 'generation'} end
        local current = math.max(tonumber(seen) or 0, tonumber(ARGV[5]) or 0) + 1
        redis.call('DEL', KEYS[1])
        redis.call('HSET', KEYS[1], 'generation', current, 'session', ARGV[3])
        redis.call('PUBLISH', ARGV[4], current)
        return {1, current}
        """)

    /// KEYS: lease. ARGV: owner. Deletes the lease only when it is still ours.
    static let release = RedisScript(
        """
        if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
        return 0
        """)
}

/// Pure readings of the store's replies (unit-tested without a server).
enum RedisReplies {
    /// What the fenced write answered.
    enum WriteResult: Equatable {
        case committed(generation: Int64)
        /// Refused: another process holds the lease, or the session has a newer generation.
        case fenced(reason: String)
        case unreadable
    }

    static func write(_ reply: RedisValue) -> WriteResult {
        guard case .array(let items) = reply, items.count == 2, let flag = items[0].integer else { return .unreadable }
        if flag == 1, let generation = items[1].integer { return .committed(generation: generation) }
        if flag == 0 { return .fenced(reason: items[1].text ?? "unknown") }
        return .unreadable
    }

    /// What `HMGET P:session generation session` found.
    enum SessionHash: Equatable {
        /// A document, with the generation it was written at (nil when the field is missing).
        case document(generation: Int64?, bytes: [UInt8])
        /// A generation and no document: the record a `logout` (or an older version's) leaves.
        case ended(generation: Int64)
        /// No key at all: never written, or lost (a Redis restarted without persistence).
        case empty
        /// A key that is no session hash: of another type (WRONGTYPE), or a generation that is no
        /// number. `seenGeneration` is the raw field, what `RedisScripts.restore` compares.
        case unreadable(seenGeneration: String)
    }

    /// nil for an error that says nothing about the key (LOADING, NOAUTH…): the read failed.
    static func session(_ reply: RedisValue) -> SessionHash? {
        switch reply {
        case .error:
            return reply.errorKind == .wrongType ? .unreadable(seenGeneration: "") : nil
        case .array(let items) where items.count == 2:
            var generation: Int64?
            switch items[0] {
            case .null: break
            case .string(let raw):
                guard let value = items[0].integer else { return .unreadable(seenGeneration: String(decoding: raw, as: UTF8.self)) }
                generation = value
            default:
                guard let value = items[0].integer else { return .unreadable(seenGeneration: "") }
                generation = value
            }
            switch items[1] {
            case .string(let bytes): return .document(generation: generation, bytes: bytes)
            case .null: return generation.map { .ended(generation: $0) } ?? .empty
            default: return .unreadable(seenGeneration: items[0].text ?? "")
            }
        default:
            return nil
        }
    }

    /// A pub/sub push (`message`, channel, payload): the generation it announces, when it is one.
    static func announcedGeneration(_ reply: RedisValue, channel: String) -> Int64? {
        guard let message = reply.publishedMessage, message.channel == channel else { return nil }
        return message.payload.integer
    }
}

/// How long to wait before the next try for a lease another process holds: short at first (a
/// refresh usually takes a few hundred milliseconds), growing to a ceiling. Pure.
struct LeaseWaitSchedule: Sendable {
    var first = 0.02
    var ceiling = 0.25

    func delay(attempt: Int) -> Double {
        guard attempt > 0 else { return first }
        return min(ceiling, first * Double(1 << min(attempt, 10)))
    }
}
