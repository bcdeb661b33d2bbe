/// The Lua scripts of the Redis store (run with EVAL: Redis runs each one atomically, so the checks
/// and the write they guard cannot interleave with another client's commands).
///
/// Keys of one session, under the configured prefix P (`store.key`):
/// - `P:session`: a hash, `generation` (grows by one with every write, never reset: a logout deletes
///   only the `session` field, so a later login cannot bring an old generation back) and `session`
///   (the JSON document the file store keeps);
/// - `P:lease`: the refresh lease, a random owner value set with `SET NX PX`;
/// - `P:changed`: the pub/sub channel; every write publishes the new generation.
enum RedisScripts {
    /// KEYS: session, lease. ARGV: owner, expected generation ("" = any), document, channel.
    /// Commits only when no other process holds the lease (ours, or none: an expired lease that
    /// nobody took over means nobody else wrote) and the generation is the one the refresh read.
    /// Answers {1, new generation} or {0, "lease" | "generation"}.
    static let save = """
        local holder = redis.call('GET', KEYS[2])
        if holder and holder ~= ARGV[1] then return {0, 'lease'} end
        local current = tonumber(redis.call('HGET', KEYS[1], 'generation') or '0')
        if ARGV[2] ~= '' and current ~= tonumber(ARGV[2]) then return {0, 'generation'} end
        current = current + 1
        redis.call('HSET', KEYS[1], 'generation', current, 'session', ARGV[3])
        redis.call('PUBLISH', ARGV[4], current)
        return {1, current}
        """

    /// KEYS: session, lease. ARGV: owner, channel. Deletes the document, keeps the generation growing.
    static let remove = """
        local holder = redis.call('GET', KEYS[2])
        if holder and holder ~= ARGV[1] then return {0, 'lease'} end
        redis.call('HDEL', KEYS[1], 'session')
        local current = redis.call('HINCRBY', KEYS[1], 'generation', 1)
        redis.call('PUBLISH', ARGV[2], current)
        return {1, current}
        """

    /// KEYS: lease. ARGV: owner. Deletes the lease only when it is still ours.
    static let release = """
        if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
        return 0
        """
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

    /// `HMGET P:session generation session`: the generation (0 when never written) and the document.
    static func session(_ reply: RedisValue) -> (generation: Int64, document: [UInt8]?)? {
        guard case .array(let items) = reply, items.count == 2 else { return nil }
        let generation: Int64
        switch items[0] {
        case .null: generation = 0
        default:
            guard let value = items[0].integer else { return nil }
            generation = value
        }
        switch items[1] {
        case .null: return (generation, nil)
        case .string(let bytes): return (generation, bytes)
        default: return nil
        }
    }

    /// A pub/sub push (`message`, channel, payload): the generation it announces, when it is one.
    static func announcedGeneration(_ reply: RedisValue, channel: String) -> Int64? {
        guard case .array(let items) = reply, items.count == 3, items[0].text == "message", items[1].text == channel else { return nil }
        return items[2].integer
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
