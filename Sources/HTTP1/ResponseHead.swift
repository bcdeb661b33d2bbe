/// An upstream response head kept as bytes. Each field line is stored normalised ("Name: value",
/// whitespace around the value removed, RFC 9112 §5.1) in one buffer that its owner reuses from
/// response to response: a response costs no String per field, and a field goes to the client as
/// one copy of its bytes.
public struct ResponseHead: Sendable, Equatable {
    /// The proxy answers in HTTP/1.1 whatever version the upstream spoke, so only these are kept.
    public var status = 0
    public var reason = ""
    /// The field lines back to back, without line ends.
    public private(set) var bytes: [UInt8] = []
    private var spans: [Span] = []

    /// Where one field line is in `bytes`: the name is `start..<colon`, the value `colon + 2..<end`.
    struct Span: Sendable, Equatable {
        let start: Int
        let colon: Int
        let end: Int
    }

    public init() {}

    public var count: Int { spans.count }

    /// Forgets the fields, keeping the memory for the next response.
    public mutating func removeFields() {
        bytes.removeAll(keepingCapacity: true)
        spans.removeAll(keepingCapacity: true)
    }

    /// Adds one field line (without its line end). Returns false, adding nothing, for a line that is
    /// not `token ":" OWS field-value OWS`: an obs-fold continuation or a control character included
    /// (RFC 9112 §5.2: a proxy must not forward those as they are).
    public mutating func append(fieldLine line: UnsafeRawBufferPointer) -> Bool {
        appendFieldLine(line) != nil
    }

    /// The same, returning where the name ends (the colon) and where the value is in `line`, for a
    /// caller that looks at some fields as it goes (``ResponseParser``).
    mutating func appendFieldLine(_ line: UnsafeRawBufferPointer) -> (colon: Int, value: Range<Int>)? {
        guard let parts = scanFieldLine(line) else { return nil }
        let start = bytes.count
        if parts.value.lowerBound == parts.colon + 2 && parts.value.upperBound == line.count && line[parts.colon + 1] == asciiSP {
            // Already "Name: value" (the usual form): one copy.
            bytes.append(contentsOf: line)
            spans.append(Span(start: start, colon: start + parts.colon, end: bytes.count))
            return parts
        }
        bytes.append(contentsOf: UnsafeRawBufferPointer(rebasing: line[0..<parts.colon]))
        let colon = bytes.count
        bytes.append(asciiColon)
        bytes.append(asciiSP)
        bytes.append(contentsOf: UnsafeRawBufferPointer(rebasing: line[parts.value]))
        spans.append(Span(start: start, colon: colon, end: bytes.count))
        return parts
    }

    /// Adds a field the proxy makes itself (the name must be a token, the value valid).
    public mutating func append(name: String, value: String) {
        let start = bytes.count
        bytes.append(contentsOf: name.utf8)
        let colon = bytes.count
        bytes.append(asciiColon)
        bytes.append(asciiSP)
        bytes.append(contentsOf: value.utf8)
        spans.append(Span(start: start, colon: colon, end: bytes.count))
    }

    /// Adds field `index` of `other` as it is.
    public mutating func append(fieldAt index: Int, of other: ResponseHead) {
        let span = other.spans[index]
        let start = bytes.count
        bytes.append(contentsOf: other.bytes[span.start..<span.end])
        spans.append(Span(start: start, colon: start + span.colon - span.start, end: bytes.count))
    }

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

    /// Whether field `index`'s value is this (ASCII case ignored; `lowercased` is all lower case).
    public func valueEquals(_ index: Int, _ lowercased: StaticString) -> Bool {
        let span = spans[index]
        return lowercased.withUTF8Buffer { asciiEqualsIgnoringCase(bytes, span.colon + 2, span.end, $0) }
    }

    public func name(_ index: Int) -> String {
        let span = spans[index]
        return String(decoding: bytes[span.start..<span.colon], as: UTF8.self)
    }

    public func value(_ index: Int) -> String {
        let span = spans[index]
        return String(decoding: bytes[(span.colon + 2)..<span.end], as: UTF8.self)
    }

    /// The value as a Content-Length (RFC 9110 §8.6: 1*DIGIT), or nil when it is not one.
    public func decimalValue(_ index: Int) -> Int? {
        let span = spans[index]
        let digits = bytes[(span.colon + 2)..<span.end]
        guard !digits.isEmpty, digits.count <= 18 else { return nil }
        var n = 0
        for b in digits {
            guard b >= UInt8(ascii: "0") && b <= UInt8(ascii: "9") else { return nil }
            n = n * 10 + Int(b - UInt8(ascii: "0"))
        }
        return n
    }

    /// Appends field `index` as a field line ("Name: value\r\n").
    public func copyField(_ index: Int, to out: inout [UInt8]) {
        let span = spans[index]
        bytes.withUnsafeBytes { raw in
            out.append(contentsOf: UnsafeRawBufferPointer(rebasing: raw[span.start..<span.end]))
        }
        out.append(asciiCR)
        out.append(asciiLF)
    }

    /// True when field `index` must not be forwarded: the fixed hop-by-hop names (RFC 9110 §7.6.1)
    /// and the names in `connectionOptions` (lowercased, from the response's Connection fields).
    public func isHopByHop(_ index: Int, connectionOptions: [String]) -> Bool {
        let span = spans[index]
        if HopByHop.isFixedHopByHop(length: span.colon - span.start, { nameEquals(index, lowercasedName: $0) }) { return true }
        for option in connectionOptions where nameEquals(index, lowercasedName: option) {
            return true
        }
        return false
    }
}

/// Splits `token ":" OWS field-value OWS` (RFC 9112 §5.1) into the colon's index and the value's
/// range; nil for anything else, obs-fold and control characters included.
func scanFieldLine(_ bytes: UnsafeRawBufferPointer) -> (colon: Int, value: Range<Int>)? {
    guard !bytes.isEmpty, !isOWS(bytes[0]) else { return nil }
    var colon = 0
    while colon < bytes.count && bytes[colon] != asciiColon {
        guard isTokenByte(bytes[colon]) else { return nil }
        colon += 1
    }
    guard colon > 0, colon < bytes.count else { return nil }
    var lower = colon + 1
    var upper = bytes.count
    while lower < upper && isOWS(bytes[lower]) { lower += 1 }
    while upper > lower && isOWS(bytes[upper - 1]) { upper -= 1 }
    guard allFieldValueBytes(bytes, lower..<upper) else { return nil }
    return (colon, lower..<upper)
}

/// Whether every byte in `range` may be in a field value (``isFieldValueByte(_:)``), eight bytes at a
/// time: values are most of a head's bytes.
@inline(__always)
func allFieldValueBytes(_ bytes: UnsafeRawBufferPointer, _ range: Range<Int>) -> Bool {
    var k = range.lowerBound
    let end = range.upperBound
    if let base = bytes.baseAddress {
        let ones: UInt64 = 0x0101_0101_0101_0101
        let highs: UInt64 = 0x8080_8080_8080_8080
        while end - k >= 8 {
            let word = UInt64(littleEndian: base.loadUnaligned(fromByteOffset: k, as: UInt64.self))
            // Nonzero exactly when some byte is below 0x20, or is 0x7F (the classic "has a byte less
            // than n" and "has a zero byte" tests); such a word is checked byte by byte, letting HTAB pass.
            let below20 = (word &- ones &* 0x20) & ~word & highs
            let del = word ^ (ones &* 0x7F)
            let isDel = (del &- ones) & ~del & highs
            if below20 | isDel != 0 {
                for j in k..<(k + 8) where !isFieldValueByte(bytes[j]) {
                    return false
                }
            }
            k += 8
        }
    }
    while k < end {
        guard isFieldValueByte(bytes[k]) else { return false }
        k += 1
    }
    return true
}
