import Basics

// The heads of both directions and the values they share: a request head as the parser keeps it
// (RFC 9112 §3), an upstream response head (RFC 9112 §4), the versions and field lines; and, at the
// end, the writers that append a head (and chunked framing) to a buffer.

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
    @inlinable
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
    @inlinable
    public func isHopByHop(_ index: Int) -> Bool {
        fields.isHopByHop(index, connectionOptions: connectionOptions)
    }
}

// MARK: writing heads

// The serializers (RFC 9112 §3-§7): an upstream request head, a client response head and chunked
// framing, each appended to a caller-owned buffer.

/// Appends a response head and chunked framing to a caller-owned buffer (RFC 9112 §4, §5, §7.1).
/// Nothing is validated here: check names and values with ``isValidFieldName(_:)`` and
/// ``isValidFieldValue(_:)`` where they come from outside.
public enum ResponseWriter {
    /// `HTTP/1.1 200 OK\r\n`
    public static func appendStatusLine(_ buf: ByteBuffer, version: HTTPVersion, code: Int, reason: String) {
        switch version {
        case .http1_0: buf.append("HTTP/1.0 ")
        case .http1_1: buf.append("HTTP/1.1 ")
        }
        if code >= 100 && code <= 999 {
            // The usual three digits, without the divisions of appendDecimal.
            buf.append(UInt8(truncatingIfNeeded: code / 100) &+ UInt8(ascii: "0"))
            buf.append(UInt8(truncatingIfNeeded: code / 10 % 10) &+ UInt8(ascii: "0"))
            buf.append(UInt8(truncatingIfNeeded: code % 10) &+ UInt8(ascii: "0"))
        } else {
            appendDecimal(buf, code)
        }
        buf.append(asciiSP)
        buf.append(utf8: reason)
        buf.appendCRLF()
    }

    /// `name: value\r\n`
    public static func appendField(_ buf: ByteBuffer, name: String, value: String) {
        buf.append(utf8: name)
        buf.append(asciiColon)
        buf.append(asciiSP)
        buf.append(utf8: value)
        buf.appendCRLF()
    }

    /// The blank line that ends the head.
    public static func appendEndOfHead(_ buf: ByteBuffer) {
        buf.appendCRLF()
    }

    /// `size` in lowercase hex, then CRLF. A size of 0 (or less) appends nothing: an empty chunk would be
    /// the last chunk, so skip empty data altogether (or use ``appendChunk(_:_:)``, which does).
    public static func appendChunkHeader(_ buf: ByteBuffer, size: Int) {
        guard size > 0 else { return }
        let digits = (Int.bitWidth - size.leadingZeroBitCount + 3) / 4
        for shift in stride(from: (digits - 1) * 4, through: 0, by: -4) {
            let nibble = UInt8((size >> shift) & 0xF)
            buf.append(nibble < 10 ? nibble + UInt8(ascii: "0") : nibble - 10 + UInt8(ascii: "a"))
        }
        buf.appendCRLF()
    }

    /// One whole chunk (size line, data, CRLF); empty data appends nothing.
    public static func appendChunk(_ buf: ByteBuffer, _ data: UnsafeRawBufferPointer) {
        guard !data.isEmpty else { return }
        appendChunkHeader(buf, size: data.count)
        buf.append(data)
        buf.appendCRLF()
    }

    /// The CRLF after a chunk's data.
    public static func appendChunkEnd(_ buf: ByteBuffer) {
        buf.appendCRLF()
    }

    /// `0\r\n\r\n`: the last chunk and an empty trailer section.
    public static func appendLastChunk(_ buf: ByteBuffer) {
        buf.append("0\r\n\r\n")
    }

    /// The standard reason phrase (RFC 9110 §15), or "" for a code without one.
    public static func reasonPhrase(for code: Int) -> String {
        switch code {
        case 100: return "Continue"
        case 101: return "Switching Protocols"
        case 103: return "Early Hints"
        case 200: return "OK"
        case 201: return "Created"
        case 202: return "Accepted"
        case 203: return "Non-Authoritative Information"
        case 204: return "No Content"
        case 205: return "Reset Content"
        case 206: return "Partial Content"
        case 300: return "Multiple Choices"
        case 301: return "Moved Permanently"
        case 302: return "Found"
        case 303: return "See Other"
        case 304: return "Not Modified"
        case 307: return "Temporary Redirect"
        case 308: return "Permanent Redirect"
        case 400: return "Bad Request"
        case 401: return "Unauthorized"
        case 402: return "Payment Required"
        case 403: return "Forbidden"
        case 404: return "Not Found"
        case 405: return "Method Not Allowed"
        case 406: return "Not Acceptable"
        case 407: return "Proxy Authentication Required"
        case 408: return "Request Timeout"
        case 409: return "Conflict"
        case 410: return "Gone"
        case 411: return "Length Required"
        case 412: return "Precondition Failed"
        case 413: return "Content Too Large"
        case 414: return "URI Too Long"
        case 415: return "Unsupported Media Type"
        case 416: return "Range Not Satisfiable"
        case 417: return "Expectation Failed"
        case 421: return "Misdirected Request"
        case 422: return "Unprocessable Content"
        case 425: return "Too Early"
        case 426: return "Upgrade Required"
        case 428: return "Precondition Required"
        case 429: return "Too Many Requests"
        case 431: return "Request Header Fields Too Large"
        case 451: return "Unavailable For Legal Reasons"
        case 500: return "Internal Server Error"
        case 501: return "Not Implemented"
        case 502: return "Bad Gateway"
        case 503: return "Service Unavailable"
        case 504: return "Gateway Timeout"
        case 505: return "HTTP Version Not Supported"
        default: return ""
        }
    }
}

/// Appends `n` in decimal ASCII, without an intermediate String.
public func appendDecimal(_ buf: ByteBuffer, _ n: Int) {
    if n < 0 {
        buf.append(UInt8(ascii: "-"))
        // Int.min has no positive counterpart; go through its magnitude.
        appendUnsigned(buf, n.magnitude)
    } else {
        appendUnsigned(buf, UInt(n))
    }
}

private func appendUnsigned(_ buf: ByteBuffer, _ n: UInt) {
    var divisor: UInt = 1
    while n / divisor >= 10 { divisor *= 10 }
    var rest = n
    while divisor > 0 {
        buf.append(UInt8(rest / divisor) + UInt8(ascii: "0"))
        rest %= divisor
        divisor /= 10
    }
}

/// Appends an upstream request head to a caller-owned buffer (RFC 9112 §3, §5): one buffer per
/// request, no intermediate strings. A client's fields are copied by
/// ``FieldBlock/copyField(_:to:)``. Chunked body framing is shared with ``ResponseWriter``.
public enum RequestWriter {
    /// `METHOD prefix+path[?query] HTTP/1.1\r\n`: the target is the upstream's base path followed by
    /// the client's normalised path and its query as it came.
    public static func appendRequestLine(_ buf: ByteBuffer, method: String, pathPrefix: String, path: String, query: String?) {
        buf.append(utf8: method)
        buf.append(asciiSP)
        if !pathPrefix.isEmpty { buf.append(utf8: pathPrefix) }
        buf.append(utf8: path)
        if let query {
            buf.append(UInt8(ascii: "?"))
            buf.append(utf8: query)
        }
        buf.append(" HTTP/1.1\r\n")
    }

    /// `name: value\r\n` for a field the proxy sets itself.
    public static func appendField(_ buf: ByteBuffer, name: StaticString, value: String) {
        buf.append(name)
        buf.append(": ")
        buf.append(utf8: value)
        buf.appendCRLF()
    }

    /// `name: value\r\n` with a value given as bytes (the Authorization value).
    public static func appendField(_ buf: ByteBuffer, name: StaticString, value: [UInt8]) {
        buf.append(name)
        buf.append(": ")
        buf.append(value)
        buf.appendCRLF()
    }

    /// A whole field line known when the program is built (`Name: value\r\n`).
    @inline(__always)
    public static func appendFieldLine(_ buf: ByteBuffer, _ line: StaticString) {
        buf.append(line)
    }

    /// The blank line that ends the head.
    public static func appendEndOfHead(_ buf: ByteBuffer) {
        buf.appendCRLF()
    }
}
