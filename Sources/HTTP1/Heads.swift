import Basics

// The heads of both directions and the values they share: a request head as the parser keeps it
// (RFC 9112 §3), an upstream response head (RFC 9112 §4), the versions and field lines.

/// A parsed and validated request head.
///
/// The fields are kept as the parser received them (``FieldBlock``): the head's bytes in one array and,
/// per field, where its name and value are. A request costs no String per field (Host aside, which
/// every request reads). The arrays are shared with the parser until it starts the next head: a
/// caller that has dropped the head by then (the usual case: one exchange at a time) lets the parser
/// reuse their memory.
public struct RequestHead: Sendable {
    /// As sent; methods are case-sensitive (RFC 9110 §9.1).
    public var method: String
    /// The raw request-target (see ``RequestTarget/parse(_:)``).
    public var target: String {
        didSet { targetIsPlainPath = RequestTarget.isPlainPath(target) }
    }
    /// `RequestTarget.isPlainPath(target)`: a path that parsing and dot-segment removal give back as it
    /// is. Found by the parser in its pass over the request line, so the access check needs no other.
    public private(set) var targetIsPlainPath: Bool
    public var version: HTTPVersion
    public var framing: BodyFraming
    /// HTTP/1.1 unless `Connection: close`; HTTP/1.0 only with `Connection: keep-alive` (RFC 9112 §9.3).
    public var keepAlive: Bool
    /// The request carries `Expect: 100-continue` (RFC 9110 §10.1.1).
    public var expectContinue: Bool
    /// The lowercased options listed in the Connection fields other than `close` and `keep-alive`
    /// (RFC 9110 §7.6.1): more hop-by-hop fields, `upgrade` among them.
    public var connectionOptions: [String]
    /// Fields the parser left out: names with an underscore (`parseRequestHead`).
    public var droppedFieldCount: Int
    public let fields: FieldBlock
    /// The Host field's value, made once: every request reads it at least twice (the access check, the
    /// forwarded host), and there is at most one (RFC 9112 §3.2). The same as `first("host")`.
    public let host: String?

    /// The parser's initializer: `host` is the Host field's value.
    init(
        method: String, target: String, targetIsPlainPath: Bool, version: HTTPVersion, fields: FieldBlock, host: String?,
        framing: BodyFraming, keepAlive: Bool, expectContinue: Bool, connectionOptions: [String], droppedFieldCount: Int
    ) {
        self.method = method
        self.target = target
        self.targetIsPlainPath = targetIsPlainPath
        self.version = version
        self.fields = fields
        self.host = host
        self.framing = framing
        self.keepAlive = keepAlive
        self.expectContinue = expectContinue
        self.connectionOptions = connectionOptions
        self.droppedFieldCount = droppedFieldCount
    }

    /// A head built from Strings (tests, tools); a field's `rawValue`, when set, is its value's bytes.
    public init(
        method: String, target: String, version: HTTPVersion, fields: [HTTPField],
        framing: BodyFraming, keepAlive: Bool, expectContinue: Bool, connectionOptions: [String]
    ) {
        let host = fields.first { asciiCaseInsensitiveEquals($0.name, "host") }.map { $0.value }
        self.init(
            method: method, target: target, targetIsPlainPath: RequestTarget.isPlainPath(target), version: version,
            fields: FieldBlock(fields), host: host, framing: framing,
            keepAlive: keepAlive, expectContinue: expectContinue, connectionOptions: connectionOptions, droppedFieldCount: 0)
    }

    /// Whether field `index` must not be forwarded (RFC 9110 §7.6.1), by this head's own Connection options.
    public func isHopByHop(_ index: Int) -> Bool {
        fields.isHopByHop(index, connectionOptions: connectionOptions)
    }

    /// The value of the first field with this name (all lower case), compared case-insensitively.
    /// Inlinable: where the name is the literal "host", the compare folds away and `host` is read.
    @inlinable
    public func first(_ lowercasedName: String) -> String? {
        if lowercasedName == "host" { return host }
        return fields.first(lowercasedName)
    }

    /// The same for a name written in the code (all lower case): compared as bytes, with no String
    /// compare or copy of the name.
    public func first(named lowercasedName: StaticString) -> String? {
        for index in 0..<fields.count where fields.nameEquals(index, lowercasedName) { return fields.value(index) }
        return nil
    }
}

extension RequestHead: Equatable {
    /// Equal when everything parsed is: the fields by their names and values, not by the bytes around them.
    public static func == (a: RequestHead, b: RequestHead) -> Bool {
        a.method == b.method && a.target == b.target && a.version == b.version && a.framing == b.framing
            && a.keepAlive == b.keepAlive && a.expectContinue == b.expectContinue
            && a.connectionOptions == b.connectionOptions && a.fields == b.fields
    }
}

/// The HTTP versions the proxy speaks with clients (RFC 9112 §2.3).
public enum HTTPVersion: Sendable, Equatable {
    case http1_0
    case http1_1
}

/// One header field line as Strings: the name as sent (case kept) and the value with surrounding
/// whitespace removed (RFC 9112 §5.1). ``RequestHead`` and ``ResponseHead`` keep their fields as bytes
/// and make these only on request.
public struct HTTPField: Sendable, Equatable {
    public var name: String
    public var value: String
    /// The value's bytes when they are not valid UTF-8 (obs-text, RFC 9110 §5.5), which `value`
    /// cannot hold as they are: forwarded byte for byte from here.
    public var rawValue: [UInt8]?

    public init(name: String, value: String, rawValue: [UInt8]? = nil) {
        self.name = name
        self.value = value
        self.rawValue = rawValue
    }
}

/// How the request's body is delimited (RFC 9112 §6.3).
public enum BodyFraming: Sendable, Equatable {
    case none
    case contentLength(Int)
    case chunked
}

/// Limits the parser enforces; both come from the `limits:` section of the configuration.
public struct ParserLimits: Sendable {
    /// The largest request head (request line through the blank line), and the largest trailer section.
    public var maxHeaderBytes: Int
    /// The largest request body; 0 means unlimited.
    public var maxBodyBytes: Int

    public init(maxHeaderBytes: Int, maxBodyBytes: Int) {
        self.maxHeaderBytes = maxHeaderBytes
        self.maxBodyBytes = maxBodyBytes
    }
}

/// Why a request was refused (ProxyCore's `ProxyError` gives each its status and error code). Reasons
/// name the cause and never echo a header value.
public enum RequestParseError: Error, Sendable, Equatable {
    /// 400 `bad_request`.
    case badRequest(String)
    /// 431 `headers_too_large`.
    case headersTooLarge
    /// 413 `body_too_large`.
    case bodyTooLarge
    /// 501 `not_implemented`: a transfer coding other than chunked (RFC 9112 §6.1).
    case notImplemented(String)
}

extension RequestParseError {
    /// A refused chunked body in a request's terms.
    init(_ refused: ChunkedBodyError) {
        switch refused {
        case .malformed(let reason): self = .badRequest(reason)
        // `maxHeaderBytes` bounds the trailer section too (RFC 9112 §7.1.2: fields like a head's): 431.
        case .trailersTooLarge: self = .headersTooLarge
        case .bodyTooLarge: self = .bodyTooLarge
        }
    }
}

/// What ``RequestParser/parse(_:)`` reports.
public enum ParseEvent: Sendable, Equatable {
    case head(RequestHead)
    /// Body bytes: a range of the buffer passed to the call that returned this event (no copy).
    case body(Range<Int>)
    /// The message is complete (after any trailers); the parser is ready for the next request.
    case end
    /// The parser stays in the error state afterwards.
    case error(RequestParseError)
}

/// An upstream response head: the status, the reason and the fields (``FieldBlock``, each stored
/// normalised as `Name: value` in one buffer that its owner reuses from response to response: a
/// response costs no String per field, and a field goes to the client as one copy of its bytes).
public struct ResponseHead: Sendable, Equatable {
    /// The proxy answers in HTTP/1.1 whatever version the upstream spoke, so only these are kept.
    public var status = 0
    public var reason = ""
    public var fields = FieldBlock()
    /// The lowercased options listed in the Connection fields other than `close` and `keep-alive`
    /// (RFC 9110 §7.6.1): more hop-by-hop fields.
    public var connectionOptions: [String] = []

    public init() {}

    /// Whether field `index` must not be forwarded (RFC 9110 §7.6.1), by this head's own Connection options.
    public func isHopByHop(_ index: Int) -> Bool {
        fields.isHopByHop(index, connectionOptions: connectionOptions)
    }
}
