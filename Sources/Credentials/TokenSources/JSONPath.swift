import Foundation
import IdentityHTTP

/// A JSON value from an identity provider's answer. Decoded with `JSONDecoder` so that `true` stays a
/// boolean and never passes for the number 1.
enum JSONValue: Decodable, Equatable, Sendable {
    case null
    case bool(Bool)
    case number(Double)
    case string(String)
    case array([JSONValue])
    case object([String: JSONValue])

    init(from decoder: Decoder) throws {
        let container = try decoder.singleValueContainer()
        if container.decodeNil() {
            self = .null
        } else if let value = try? container.decode(Bool.self) {
            self = .bool(value)
        } else if let value = try? container.decode(Double.self) {
            self = .number(value)
        } else if let value = try? container.decode(String.self) {
            self = .string(value)
        } else if let value = try? container.decode([String: JSONValue].self) {
            self = .object(value)
        } else {
            self = .array(try container.decode([JSONValue].self))
        }
    }

    /// The value of a JSON text, or nil when `bytes` are no JSON (an HTML page, an empty body, bad UTF-8).
    static func parse(_ bytes: [UInt8]) -> JSONValue? {
        guard !bytes.isEmpty else { return nil }
        return try? JSONDecoder().decode(JSONValue.self, from: Data(bytes))
    }

    subscript(key: String) -> JSONValue? {
        if case .object(let members) = self { return members[key] }
        return nil
    }

    var string: String? {
        if case .string(let value) = self { return value }
        return nil
    }

    /// A finite JSON number, or a string that holds one (`"3600"`, as some backends send).
    var number: Double? {
        switch self {
        case .number(let value): return value.isFinite ? value : nil
        case .string(let text):
            guard let value = Double(text.trimmingWhitespace()), value.isFinite else { return nil }
            return value
        default: return nil
        }
    }
}

/// A dotted path into a JSON answer (`access_token`, `data.tokens.access`): each segment names a
/// member of an object. Array indices are not supported.
struct JSONPath: Equatable, Sendable, CustomStringConvertible {
    let segments: [String]

    /// Nil when `text` is empty or has an empty segment (`a..b`, `.a`, `a.`).
    init?(_ text: String) {
        let segments = text.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
        guard !segments.isEmpty, segments.allSatisfy({ !$0.isEmpty }) else { return nil }
        self.segments = segments
    }

    /// The value at this path, or nil when a segment is missing or crosses something that is no object.
    func lookup(in value: JSONValue) -> JSONValue? {
        var current = value
        for segment in segments {
            guard let next = current[segment] else { return nil }
            current = next
        }
        return current
    }

    var description: String { segments.joined(separator: ".") }
}

/// What to say about an answer that is no JSON object, without quoting it (it may hold a token).
func unreadableAnswer(_ response: HTTPCallResponse, from who: String) -> String {
    if JSONValue.parse(response.body) != nil {
        return "\(who) answered with JSON that is not an object (HTTP \(response.status))"
    }
    let base = "\(who) answered with something that is not JSON (HTTP \(response.status))"
    let contentType = response.header("content-type")?.lowercased() ?? ""
    let first = response.body.first { $0 != 0x20 && $0 != 0x09 && $0 != 0x0A && $0 != 0x0D }
    if contentType.contains("html") || first == UInt8(ascii: "<") { return base + ": an HTML page" }
    if response.body.isEmpty { return base + ": an empty body" }
    return base
}
