internal import CHiredis
import Sockets

/// One reply of the Redis protocol (RESP2), copied out of hiredis's reply object.
enum RedisValue: Equatable, Sendable {
    case string([UInt8])
    case integer(Int64)
    case array([RedisValue])
    case null
    case status(String)
    case error(String)

    var text: String? {
        switch self {
        case .string(let bytes): return String(decoding: bytes, as: UTF8.self)
        case .status(let text): return text
        case .integer(let value): return String(value)
        case .array, .null, .error: return nil
        }
    }

    var errorText: String? {
        if case .error(let message) = self { return message }
        return nil
    }

    var integer: Int64? {
        switch self {
        case .integer(let value): return value
        case .string, .status: return text.flatMap { Int64($0) }
        case .array, .null, .error: return nil
        }
    }
}

/// A failure to reach Redis or to read its answer. The connection that threw it is unusable.
/// Messages name the server, never a key's value.
struct RedisConnectionError: Error, Sendable, CustomStringConvertible {
    var description: String
}

/// One blocking connection to a Redis server through hiredis (`redisConnectWithTimeout`, then
/// `redisSetTimeout` for every command). The only file that touches hiredis's C types
/// (ARCHITECTURE.md "Modules"). Used by one thread at a time: the token thread, or a command.
final class RedisConnection {
    private let context: UnsafeMutablePointer<redisContext>
    let endpoint: String

    /// Connects within `connectTimeout` and sets `commandTimeout` for every later read and write.
    init(host: String, port: Int, connectTimeout: Double, commandTimeout: Double) throws(RedisConnectionError) {
        endpoint = host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)"
        guard let context = tp_redis_connect(host, Int32(port), Self.milliseconds(connectTimeout)) else {
            throw RedisConnectionError(description: "redis \(endpoint): out of memory")
        }
        if tp_redis_failed(context) != 0 {
            let why = String(cString: tp_redis_error_text(context))
            tp_redis_free(context)
            throw RedisConnectionError(description: "redis \(endpoint): cannot connect: \(why)")
        }
        if tp_redis_set_timeout(context, Self.milliseconds(commandTimeout)) != 0 {
            tp_redis_free(context)
            throw RedisConnectionError(description: "redis \(endpoint): cannot set the command timeout")
        }
        // hiredis opens its socket without O_CLOEXEC: keep it out of exec'd children (credentials.command).
        try? Syscall.setCloseOnExec(tp_redis_fd(context))
        self.context = context
    }

    deinit { tp_redis_free(context) }

    /// Sends one command and waits for its reply (at most the command timeout). A Redis error reply
    /// comes back as `.error`; an I/O or protocol failure throws, and the connection is then dead.
    func command(_ arguments: [String]) throws(RedisConnectionError) -> RedisValue {
        let bytes = arguments.map { Array($0.utf8) }
        let reply: UnsafeMutablePointer<redisReply>? = withCStrings(bytes) { pointers, lengths in
            tp_redis_command(context, Int32(pointers.count), pointers.baseAddress, lengths.baseAddress)
        }
        guard let reply else { throw failure("the command failed") }
        defer { tp_redis_reply_free(reply) }
        return Self.value(of: UnsafePointer(reply))
    }

    /// Replies that have arrived without being asked for (pub/sub messages), without waiting: the
    /// socket is read only when poll(2) says it has bytes. Throws when the server closed the connection.
    func pendingReplies() throws(RedisConnectionError) -> [RedisValue] {
        var out: [RedisValue] = []
        while true {
            var reply: UnsafeMutablePointer<redisReply>? = nil
            let found = tp_redis_buffered_reply(context, &reply)
            if found < 0 { throw failure("unreadable reply") }
            if found == 1, let reply {
                out.append(Self.value(of: UnsafePointer(reply)))
                tp_redis_reply_free(reply)
                continue
            }
            guard (try? Syscall.waitReadable(tp_redis_fd(context), milliseconds: 0)) == true else { return out }
            // Readable: bytes, or the end of the stream (then hiredis reports the error).
            if tp_redis_buffer_read(context) != 0 { throw failure("the connection was closed") }
            var again: UnsafeMutablePointer<redisReply>? = nil
            let more = tp_redis_buffered_reply(context, &again)
            if more < 0 { throw failure("unreadable reply") }
            if more == 1, let again {
                out.append(Self.value(of: UnsafePointer(again)))
                tp_redis_reply_free(again)
                continue
            }
            return out  // a partial reply: the rest comes with the next poll
        }
    }

    private func failure(_ what: String) -> RedisConnectionError {
        let detail = tp_redis_failed(context) != 0 ? String(cString: tp_redis_error_text(context)) : what
        return RedisConnectionError(description: "redis \(endpoint): \(detail.isEmpty ? what : detail)")
    }

    private static func value(of reply: UnsafePointer<redisReply>) -> RedisValue {
        switch tp_redis_reply_kind(reply) {
        case Int32(tp_redis_string.rawValue):
            return .string(bytes(of: reply))
        case Int32(tp_redis_status.rawValue):
            return .status(String(decoding: bytes(of: reply), as: UTF8.self))
        case Int32(tp_redis_error.rawValue):
            return .error(String(decoding: bytes(of: reply), as: UTF8.self))
        case Int32(tp_redis_integer.rawValue):
            return .integer(tp_redis_reply_integer(reply))
        case Int32(tp_redis_array.rawValue):
            let count = tp_redis_reply_count(reply)
            return .array((0..<count).map { value(of: tp_redis_reply_element(reply, $0)!) })
        default:
            return .null
        }
    }

    private static func bytes(of reply: UnsafePointer<redisReply>) -> [UInt8] {
        let length = tp_redis_reply_length(reply)
        guard length > 0, let start = tp_redis_reply_bytes(reply) else { return [] }
        return start.withMemoryRebound(to: UInt8.self, capacity: length) { Array(UnsafeBufferPointer(start: $0, count: length)) }
    }

    private static func milliseconds(_ seconds: Double) -> Int {
        guard seconds.isFinite, seconds > 0 else { return 1 }
        return max(1, Int(min(seconds, 86_400) * 1000))
    }
}

/// Calls `body` with C pointers to each byte array and their lengths (binary-safe: no NUL terminator is relied on).
private func withCStrings<R>(
    _ arrays: [[UInt8]], _ body: (UnsafeBufferPointer<UnsafePointer<CChar>?>, UnsafeBufferPointer<Int>) -> R
) -> R {
    let lengths = arrays.map(\.count)
    // One buffer holding every argument, so each pointer stays valid for the call.
    var joined: [UInt8] = []
    joined.reserveCapacity(lengths.reduce(0, +) + arrays.count)
    var offsets: [Int] = []
    for array in arrays {
        offsets.append(joined.count)
        joined += array
        joined.append(0)
    }
    return joined.withUnsafeBufferPointer { buffer in
        let base = UnsafeRawPointer(buffer.baseAddress!).assumingMemoryBound(to: CChar.self)
        let pointers: [UnsafePointer<CChar>?] = offsets.map { base + $0 }
        return pointers.withUnsafeBufferPointer { p in lengths.withUnsafeBufferPointer { l in body(p, l) } }
    }
}
