import Basics

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
