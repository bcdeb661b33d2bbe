import Basics
import HTTP1

/// `inject:` (CONTRACT.md "Where the credential goes"): where the token goes in each upstream
/// request. At the top it is every route's default; a route's own `inject` replaces it as a whole.
/// Absent, the token goes as `Authorization: Bearer <token>`.
public struct InjectConfiguration: Sendable, Equatable {
    public enum Placement: Sendable, Equatable {
        /// A field (`header`, default Authorization) whose value is `format` with the token for `{token}`.
        case header(name: String, format: String)
        /// `Authorization: Basic base64(username ":" token)` (RFC 7617 §2): git over HTTPS.
        case basic(username: String)
        /// The token, percent-encoded, as this query parameter of every request.
        case query(parameter: String)
    }

    public var placement: Placement

    public static let defaultFieldName = "Authorization"
    public static let defaultFormat = "Bearer {token}"
    /// What stands for the token in `format`.
    public static let tokenMark = "{token}"

    public init(_ placement: Placement) { self.placement = placement }

    /// The field a client's own copy of follows `forward.client_authorization`; nil for `query`.
    public var fieldName: String? {
        switch placement {
        case .header(let name, _): return name
        case .basic: return Self.defaultFieldName
        case .query: return nil
        }
    }

    /// What `check` prints for it (no token in it: `{token}` stands for it).
    var resolvedDescription: String {
        switch placement {
        case .header(let name, let format): return "\(name): \(format)"
        case .basic(let username): return "Authorization: Basic base64(\(username):{token})"
        case .query(let parameter): return "query parameter \(parameter)={token}"
        }
    }

    /// The same placement as no `inject` at all: `Authorization: Bearer <token>`.
    public var isDefault: Bool {
        if case .header(let name, let format) = placement {
            return name.lowercased() == Self.defaultFieldName.lowercased() && format == Self.defaultFormat
        }
        return false
    }
}

extension InjectConfiguration {
    static let keys = ["header", "format", "basic_username", "query"]

    /// Reads `inject:`, recording every bad combination by key and reason (`check` lists them all).
    static func parse(_ s: YAMLSection, in load: LoadContext) -> InjectConfiguration? {
        load.found.collect { try s.rejectUnknownKeys(keys) }
        let header = load.found.collect { try s.nonEmptyString("header") }
        let format = load.found.collect { try s.string("format") }
        let username = load.found.collect { try s.nonEmptyString("basic_username") }
        let parameter = load.found.collect { try s.nonEmptyString("query") }
        let problems = Self.problems(header: header, format: format, basicUsername: username, query: parameter)
        for problem in problems {
            load.found.record(ConfigurationError(keyPath: s.path(problem.key), reason: problem.reason))
        }
        guard problems.isEmpty else { return nil }
        if let username { return InjectConfiguration(.basic(username: username)) }
        if let parameter { return InjectConfiguration(.query(parameter: parameter)) }
        return InjectConfiguration(.header(name: header ?? defaultFieldName, format: format ?? defaultFormat))
    }

    /// One violation of the rules of `inject`: the key it concerns (within `inject`) and why.
    public struct Problem: Equatable, Sendable {
        public var key: String
        public var reason: String
    }

    /// Every rule `inject`'s values break, in key order (pure: `check` names each one).
    public static func problems(header: String?, format: String?, basicUsername: String?, query: String?) -> [Problem] {
        var problems: [Problem] = []
        let places = [("header", header), ("basic_username", basicUsername), ("query", query)].filter { $0.1 != nil }.map(\.0)
        for place in places.dropFirst() {
            problems.append(Problem(key: place, reason: "does not go with \(places[0]): at most one of header, basic_username and query"))
        }
        if let header {
            if let reason = fieldNameProblem(header) { problems.append(Problem(key: "header", reason: reason)) }
        }
        if let format {
            if basicUsername != nil {
                problems.append(Problem(key: "format", reason: "does not go with basic_username (the value is Basic base64(username:token))"))
            } else if query != nil {
                problems.append(Problem(key: "format", reason: "does not go with query (the parameter's value is the token itself)"))
            } else if let reason = formatProblem(format) {
                problems.append(Problem(key: "format", reason: reason))
            }
        }
        if let basicUsername {
            // RFC 7617 §2: the user-id may not contain a colon; no control character may stand in a field.
            if basicUsername.contains(":") || hasControlCharacter(basicUsername) {
                problems.append(Problem(key: "basic_username", reason: "may contain neither a colon nor a line break or other control character"))
            }
        }
        if let query {
            if hasControlCharacter(query) || query.contains(where: { "&=#? ".contains($0) }) {
                problems.append(Problem(key: "query", reason: "is not a query parameter name (no line break, control character, space, &, =, # or ?)"))
            }
        }
        return problems
    }

    /// Why `format` cannot be a field value template, or nil.
    static func formatProblem(_ format: String) -> String? {
        if hasControlCharacter(format) { return "may not contain a line break or other control character" }
        let marks = occurrences(of: tokenMark, in: format)
        if marks != 1 { return "must contain {token} exactly once (found \(marks))" }
        return nil
    }

    /// Why `name` cannot carry the credential, or nil (RFC 9110 §5.1 token; CONTRACT.md "Where the
    /// credential goes": no hop-by-hop field but Proxy-Authorization, no field the proxy sets itself
    /// or that frames the message).
    static func fieldNameProblem(_ name: String) -> String? {
        guard isValidFieldName(name) else { return "\"\(printable(name))\" is not a valid field name" }
        let lower = name.lowercased()
        if lower == "host" || lower == "content-length" || lower == "transfer-encoding" {
            return "may not be \(name): the proxy sets it (or it frames the message)"
        }
        if lower.hasPrefix("x-forwarded-") { return "may not be an X-Forwarded-* field: the proxy sets those" }
        // Proxy-Authorization is set for the upstream after the client's own is removed.
        if HopByHop.isFixedHopByHop(lower), lower != "proxy-authorization" {
            return "may not be \(name): a hop-by-hop field does not reach the upstream (RFC 9110 §7.6.1)"
        }
        return nil
    }

    /// How many times `mark` stands in `text`, not overlapping.
    static func occurrences(of mark: String, in text: String) -> Int {
        let text = Array(text.utf8)
        let mark = Array(mark.utf8)
        var count = 0
        var i = 0
        while i + mark.count <= text.count {
            if text[i..<(i + mark.count)].elementsEqual(mark) {
                count += 1
                i += mark.count
            } else {
                i += 1
            }
        }
        return count
    }

    private static func hasControlCharacter(_ text: String) -> Bool {
        text.utf8.contains { $0 < 0x20 || $0 == 0x7F }
    }

    /// A name for a message: its control characters shown as `?`.
    private static func printable(_ text: String) -> String {
        String(decoding: text.utf8.map { $0 < 0x20 || $0 == 0x7F ? UInt8(ascii: "?") : $0 }, as: UTF8.self)
    }
}
