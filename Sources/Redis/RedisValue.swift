/// One reply of the Redis protocol (RESP2), copied out of hiredis's reply object.
package enum RedisValue: Equatable, Sendable {
    case string([UInt8])
    case integer(Int64)
    case array([RedisValue])
    case null
    case status(String)
    case error(String)

    package var text: String? {
        switch self {
        case .string(let bytes): return String(decoding: bytes, as: UTF8.self)
        case .status(let text): return text
        case .integer(let value): return String(value)
        case .array, .null, .error: return nil
        }
    }

    package var errorText: String? {
        if case .error(let message) = self { return message }
        return nil
    }

    /// The kind of an error reply: its first word (RESP, "Simple errors": the first word after the
    /// `-` is the error's kind, WRONGTYPE, READONLY, …). Decisions read this, never the rest of the
    /// text, which is Redis's words for a person.
    package var errorKind: RedisErrorKind? {
        guard case .error(let message) = self else { return nil }
        switch message.prefix(while: { $0 != " " }) {
        case "WRONGTYPE": return .wrongType
        case "READONLY": return .readOnly
        case "MASTERDOWN": return .masterDown
        default: return .other
        }
    }

    package var integer: Int64? {
        switch self {
        case .integer(let value): return value
        case .string, .status: return text.flatMap { Int64($0) }
        case .array, .null, .error: return nil
        }
    }

    /// A pub/sub push (`message`, channel, payload: Redis Pub/Sub, "Format of pushed messages"):
    /// its channel and payload; nil for any other reply (a subscription's confirmation included).
    package var publishedMessage: (channel: String, payload: RedisValue)? {
        guard case .array(let items) = self, items.count == 3, items[0].text == "message", let channel = items[1].text else { return nil }
        return (channel, items[2])
    }
}

/// The error kinds a decision is made on (`RedisValue.errorKind`).
package enum RedisErrorKind: Equatable, Sendable {
    /// The key holds another type.
    case wrongType
    /// A replica (a primary demoted by a failover) refused a write.
    case readOnly
    /// A replica lost its primary.
    case masterDown
    /// Any other error (NOAUTH, LOADING, ERR …).
    case other
}

/// A failure to reach Redis or to read its answer. The connection that threw it is unusable.
/// Messages name the server, never a key's value.
package struct RedisConnectionError: Error, Sendable, CustomStringConvertible {
    package var description: String

    package init(description: String) {
        self.description = description
    }
}

/// A command as the Redis protocol frames it (RESP2: an array of bulk strings), for the TLS
/// transport; binary-safe, so a value is never cut at a byte.
package enum RESP {
    package static func command(_ arguments: [String]) -> [UInt8] {
        var out = Array("*\(arguments.count)\r\n".utf8)
        for argument in arguments {
            let bytes = Array(argument.utf8)
            out += Array("$\(bytes.count)\r\n".utf8)
            out += bytes
            out += [13, 10]
        }
        return out
    }
}
