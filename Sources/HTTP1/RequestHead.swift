/// A parsed and validated request head.
///
/// The fields are kept as the parser received them: the head's bytes in one array and, per field, where
/// its name and value are (the value without the whitespace around it, RFC 9112 §5.1). A request costs
/// no String per field (Host aside, which every request reads); ``name(_:)``, ``value(_:)``,
/// ``first(_:)`` and ``fields`` make Strings when asked, and ``copyField(_:to:)`` forwards a field
/// byte for byte (obs-text included, RFC 9110 §5.5).
/// The arrays are shared with the parser until it starts the next head: a caller that has dropped the
/// head by then (the usual case: one exchange at a time) lets the parser reuse their memory.
public struct RequestHead: Sendable {
    /// As sent; methods are case-sensitive (RFC 9110 §9.1).
    public var method: String
    /// The raw request-target (see ``RequestTarget/parse(_:)``).
    public var target: String
    public var version: HTTPVersion
    public var framing: BodyFraming
    /// HTTP/1.1 unless `Connection: close`; HTTP/1.0 only with `Connection: keep-alive` (RFC 9112 §9.3).
    public var keepAlive: Bool
    /// The request carries `Expect: 100-continue` (RFC 9110 §10.1.1).
    public var expectContinue: Bool
    /// The lowercased tokens listed in all Connection fields (RFC 9110 §7.6.1).
    public var connectionOptions: [String]
    /// Fields the parser left out: names with an underscore (`HeadParsing.swift`, `parseHead`).
    public var droppedFieldCount: Int

    /// The head's bytes (as received, or built by the public initializer); the spans point into them.
    private let bytes: [UInt8]
    private let spans: [FieldSpan]
    /// The Host field's value, made once: every request reads it at least twice (the access check, the
    /// forwarded host), and there is at most one (RFC 9112 §3.2).
    private let host: String?

    /// Where one field is in `bytes`: the name is `start..<colon`, the value `valueStart..<valueEnd`.
    struct FieldSpan: Sendable, Equatable {
        let start: Int
        let colon: Int
        let valueStart: Int
        let valueEnd: Int
    }

    /// The parser's initializer: `fields` point into `bytes`; `host` is the Host field's value.
    init(
        method: String, target: String, version: HTTPVersion, bytes: [UInt8], fields: [FieldSpan], host: String?,
        framing: BodyFraming, keepAlive: Bool, expectContinue: Bool, connectionOptions: [String], droppedFieldCount: Int = 0
    ) {
        self.droppedFieldCount = droppedFieldCount
        self.method = method
        self.target = target
        self.version = version
        self.bytes = bytes
        self.spans = fields
        self.host = host
        self.framing = framing
        self.keepAlive = keepAlive
        self.expectContinue = expectContinue
        self.connectionOptions = connectionOptions
    }

    /// A head built from Strings (tests, tools); a field's `rawValue`, when set, is its value's bytes.
    public init(
        method: String, target: String, version: HTTPVersion, fields: [HTTPField],
        framing: BodyFraming, keepAlive: Bool, expectContinue: Bool, connectionOptions: [String]
    ) {
        var bytes: [UInt8] = []
        var spans: [FieldSpan] = []
        for field in fields {
            let start = bytes.count
            bytes.append(contentsOf: field.name.utf8)
            let colon = bytes.count
            bytes.append(asciiColon)
            bytes.append(asciiSP)
            if let raw = field.rawValue { bytes.append(contentsOf: raw) } else { bytes.append(contentsOf: field.value.utf8) }
            spans.append(FieldSpan(start: start, colon: colon, valueStart: colon + 2, valueEnd: bytes.count))
        }
        let host = fields.first { asciiCaseInsensitiveEquals($0.name, "host") }.map { $0.value }
        self.init(
            method: method, target: target, version: version, bytes: bytes, fields: spans, host: host, framing: framing,
            keepAlive: keepAlive, expectContinue: expectContinue, connectionOptions: connectionOptions)
    }

    /// The number of field lines.
    public var count: Int { spans.count }

    /// Field `index`'s name as sent (case kept).
    public func name(_ index: Int) -> String {
        let span = spans[index]
        return bytes.withUnsafeBufferPointer { String(decoding: UnsafeBufferPointer(rebasing: $0[span.start..<span.colon]), as: UTF8.self) }
    }

    /// Field `index`'s value; bytes that are not UTF-8 (obs-text) become U+FFFD here, and stay as they
    /// are in ``copyField(_:to:)`` and ``field(_:)``'s `rawValue`.
    public func value(_ index: Int) -> String {
        let span = spans[index]
        return bytes.withUnsafeBufferPointer {
            String(decoding: UnsafeBufferPointer(rebasing: $0[span.valueStart..<span.valueEnd]), as: UTF8.self)
        }
    }

    /// Field `index` as Strings, with `rawValue` set when its value is not valid UTF-8.
    public func field(_ index: Int) -> HTTPField {
        let span = spans[index]
        return bytes.withUnsafeBufferPointer { buffer in
            let value = UnsafeBufferPointer(rebasing: buffer[span.valueStart..<span.valueEnd])
            let name = String(decoding: UnsafeBufferPointer(rebasing: buffer[span.start..<span.colon]), as: UTF8.self)
            if let text = String(validating: value, as: UTF8.self) { return HTTPField(name: name, value: text) }
            return HTTPField(name: name, value: String(decoding: value, as: UTF8.self), rawValue: Array(value))
        }
    }

    /// Every field line, in order, as sent (one String pair each: for tests and tools, not the hot path).
    public var fields: [HTTPField] { (0..<count).map(field) }

    /// Whether field `index` has this name, compared ignoring ASCII case; `lowercased` is all lower case.
    public func nameEquals(_ index: Int, _ lowercased: StaticString) -> Bool {
        let span = spans[index]
        return lowercased.withUTF8Buffer { asciiEqualsIgnoringCase(bytes, span.start, span.colon, $0) }
    }

    /// The same for a name known only at run time (all lower case).
    public func nameEquals(_ index: Int, lowercasedName lowercased: String) -> Bool {
        let span = spans[index]
        var lowercased = lowercased
        return lowercased.withUTF8 { asciiEqualsIgnoringCase(bytes, span.start, span.colon, $0) }
    }

    /// The index of the first field with this name (compared ignoring ASCII case; all lower case).
    public func firstIndex(_ lowercasedName: String) -> Int? {
        var lowercased = lowercasedName
        return lowercased.withUTF8 { name in
            for index in spans.indices where asciiEqualsIgnoringCase(bytes, spans[index].start, spans[index].colon, name) {
                return index
            }
            return nil
        }
    }

    /// The value of the first field with this name, compared case-insensitively.
    public func first(_ lowercasedName: String) -> String? {
        if lowercasedName == "host" { return host }
        // Not `.map(value)`: a partial application would copy `self`, retaining every array in it.
        guard let index = firstIndex(lowercasedName) else { return nil }
        return value(index)
    }

    /// Appends field `index` as a field line (`Name: value\r\n`), its name and value byte for byte.
    public func copyField(_ index: Int, to out: inout [UInt8]) {
        let span = spans[index]
        bytes.withUnsafeBytes { raw in
            if span.valueStart == span.colon + 2 && raw[span.colon + 1] == asciiSP {
                // Already "Name: value" (the usual form): one copy.
                out.append(contentsOf: UnsafeRawBufferPointer(rebasing: raw[span.start..<span.valueEnd]))
            } else {
                out.append(contentsOf: UnsafeRawBufferPointer(rebasing: raw[span.start..<span.colon]))
                out.append(asciiColon)
                out.append(asciiSP)
                out.append(contentsOf: UnsafeRawBufferPointer(rebasing: raw[span.valueStart..<span.valueEnd]))
            }
        }
        out.append(asciiCR)
        out.append(asciiLF)
    }

    /// True when field `index` must not be forwarded: the fixed hop-by-hop names (RFC 9110 §7.6.1)
    /// and the names in `connectionOptions` (lowercased, usually this head's own).
    public func isHopByHop(_ index: Int, connectionOptions: [String]) -> Bool {
        let span = spans[index]
        if HopByHop.isFixedHopByHop(length: span.colon - span.start, { nameEquals(index, lowercasedName: $0) }) { return true }
        for option in connectionOptions where nameEquals(index, lowercasedName: option) {
            return true
        }
        return false
    }

    /// Field `index`'s name and value bytes, for comparisons.
    private func fieldBytes(_ index: Int) -> (name: ArraySlice<UInt8>, value: ArraySlice<UInt8>) {
        let span = spans[index]
        return (bytes[span.start..<span.colon], bytes[span.valueStart..<span.valueEnd])
    }
}

extension RequestHead: Equatable {
    /// Equal when everything parsed is: the fields by their names and values, not by the bytes around them.
    public static func == (a: RequestHead, b: RequestHead) -> Bool {
        guard a.method == b.method, a.target == b.target, a.version == b.version, a.framing == b.framing,
            a.keepAlive == b.keepAlive, a.expectContinue == b.expectContinue,
            a.connectionOptions == b.connectionOptions, a.count == b.count
        else { return false }
        for index in 0..<a.count {
            let x = a.fieldBytes(index)
            let y = b.fieldBytes(index)
            guard x.name.elementsEqual(y.name), x.value.elementsEqual(y.value) else { return false }
        }
        return true
    }
}
