import Basics

/// The field lines of one message head, as bytes: the storage both ``RequestHead`` and
/// ``ResponseHead`` wrap. One buffer holds the fields and, per field, where its name and value are
/// (the value without the whitespace around it, RFC 9112 §5.1). A message costs no String per
/// field; ``name(_:)``, ``value(_:)`` and ``all`` make Strings when asked, and ``copyField(_:to:)``
/// forwards a field byte for byte (obs-text included, RFC 9110 §5.5).
///
/// A request's block points into the head as received (the parser shares its arrays with it); a
/// response's holds each field normalised to `Name: value\r\n`, appended as it arrives (after the
/// bytes of earlier heads' fields, which are never read, ``removeAllBeforeNextHead()``), so that a run
/// of fields forwarded as they are is copied in one piece (``copyFields(_:to:)``).
public struct FieldBlock: Sendable {
    /// Where one field is in `bytes`: the name is `start..<colon`, the value `valueStart..<valueEnd`.
    @usableFromInline
    struct Span: Sendable, Equatable {
        @usableFromInline let start: Int
        @usableFromInline let colon: Int
        let valueStart: Int
        let valueEnd: Int
    }

    private(set) var bytes: [UInt8]
    @usableFromInline private(set) var spans: [Span]
    /// Every field is stored as `Name: value\r\n`, each right after the one before: true for a block
    /// built field by field (a response's), false for one that points into a request head as received.
    public let isNormalized: Bool

    /// No fields.
    public init() {
        bytes = []
        spans = []
        isNormalized = true
    }

    /// Fields that point into `bytes` (a parser's head buffer).
    init(bytes: [UInt8], spans: [Span]) {
        self.bytes = bytes
        self.spans = spans
        isNormalized = false
    }

    /// Fields made from Strings (tests, tools); a field's `rawValue`, when set, is its value's bytes.
    public init(_ fields: [HTTPField]) {
        self.init()
        for field in fields {
            if let raw = field.rawValue { append(name: Array(field.name.utf8), value: raw) } else { append(name: field.name, value: field.value) }
        }
    }

    /// The number of field lines.
    public var count: Int { spans.count }

    // MARK: reading

    /// Field `index`'s name as sent (case kept).
    public func name(_ index: Int) -> String {
        let span = spans[index]
        return String(decoding: bytes[span.start..<span.colon], as: UTF8.self)
    }

    /// Field `index`'s value; bytes that are not UTF-8 (obs-text) become U+FFFD here, and stay as they
    /// are in ``copyField(_:to:)`` and ``field(_:)``'s `rawValue`.
    public func value(_ index: Int) -> String {
        let span = spans[index]
        return String(decoding: bytes[span.valueStart..<span.valueEnd], as: UTF8.self)
    }

    /// Field `index`'s value as its bytes, in place (a slice of the block's array: no copy).
    public func valueBytes(_ index: Int) -> ArraySlice<UInt8> {
        let span = spans[index]
        return bytes[span.valueStart..<span.valueEnd]
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
    public var all: [HTTPField] { (0..<count).map(field) }

    /// Whether field `index` has this name, compared ignoring ASCII case; `lowercased` is all lower case.
    /// Inlinable: the length test, which most names fail, costs no call (docs/ENGINE.md).
    @inlinable
    public func nameEquals(_ index: Int, _ lowercased: StaticString) -> Bool {
        let span = spans[index]
        // Most names asked about have another length: told apart before any comparison.
        guard span.colon - span.start == lowercased.utf8CodeUnitCount else { return false }
        return nameBytesEqual(span, lowercased)
    }

    /// The comparison behind ``nameEquals(_:_:)``, eight bytes at a time; out of line, so that a
    /// length that differs costs no more than its test.
    @usableFromInline @inline(never)
    func nameBytesEqual(_ span: Span, _ lowercased: StaticString) -> Bool {
        bytes.withUnsafeBytes { asciiEqualsIgnoringCase($0, span.start..<span.colon, lowercased) }
    }

    /// The same for a name known only at run time (all lower case).
    public func nameEquals(_ index: Int, lowercasedName lowercased: String) -> Bool {
        let span = spans[index]
        guard span.colon - span.start == lowercased.utf8.count else { return false }
        var lowercased = lowercased
        return lowercased.withUTF8 { asciiEqualsIgnoringCase(bytes, span.start, span.colon, $0) }
    }

    /// Whether field `index`'s value is this (ASCII case ignored; `lowercased` is all lower case).
    public func valueEquals(_ index: Int, _ lowercased: StaticString) -> Bool {
        let span = spans[index]
        return bytes.withUnsafeBytes { asciiEqualsIgnoringCase($0, span.valueStart..<span.valueEnd, lowercased) }
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
        // Not `.map(value)`: a partial application would copy `self`, retaining both arrays.
        guard let index = firstIndex(lowercasedName) else { return nil }
        return value(index)
    }

    /// The value as a Content-Length (RFC 9110 §8.6: 1*DIGIT), or nil when it is not one.
    public func decimalValue(_ index: Int) -> Int? {
        let span = spans[index]
        let digits = bytes[span.valueStart..<span.valueEnd]
        guard !digits.isEmpty, digits.count <= 18 else { return nil }
        var n = 0
        for b in digits {
            guard b >= UInt8(ascii: "0") && b <= UInt8(ascii: "9") else { return nil }
            n = n * 10 + Int(b - UInt8(ascii: "0"))
        }
        return n
    }

    /// Appends fields `range` as field lines (`Name: value\r\n`), names and values byte for byte; a
    /// normalised block's run goes in one copy.
    public func copyFields(_ range: Range<Int>, to out: ByteBuffer) {
        guard !range.isEmpty else { return }
        guard isNormalized else {
            for index in range { copyField(index, to: out) }
            return
        }
        let start = spans[range.lowerBound].start
        let end = spans[range.upperBound - 1].valueEnd + 2
        bytes.withUnsafeBytes { out.append(UnsafeRawBufferPointer(rebasing: $0[start..<end])) }
    }

    /// Appends field `index` as a field line (`Name: value\r\n`), its name and value byte for byte.
    public func copyField(_ index: Int, to out: ByteBuffer) {
        if isNormalized {
            copyFields(index..<(index + 1), to: out)
            return
        }
        let span = spans[index]
        bytes.withUnsafeBytes { raw in
            if span.valueStart == span.colon + 2 && raw[span.colon + 1] == asciiSP {
                // Already "Name: value" (the usual form): one copy.
                out.append(UnsafeRawBufferPointer(rebasing: raw[span.start..<span.valueEnd]))
            } else {
                out.append(UnsafeRawBufferPointer(rebasing: raw[span.start..<span.colon]))
                out.append(": ")
                out.append(UnsafeRawBufferPointer(rebasing: raw[span.valueStart..<span.valueEnd]))
            }
        }
        out.appendCRLF()
    }

    /// True when field `index` must not be forwarded: the fixed hop-by-hop names (RFC 9110 §7.6.1)
    /// and the names in `connectionOptions` (lowercased, usually the message's own).
    @inlinable
    public func isHopByHop(_ index: Int, connectionOptions: [String]) -> Bool {
        let span = spans[index]
        let length = span.colon - span.start
        // Most fields: a length no fixed name has, and no Connection options.
        if connectionOptions.isEmpty && !HopByHop.mayBeFixedHopByHop(length: length) { return false }
        return isHopByHopByName(index, length, connectionOptions)
    }

    /// ``isHopByHop(_:connectionOptions:)`` past its quick test: kept out of line, so that the test
    /// costs no more than itself.
    @usableFromInline @inline(never)
    func isHopByHopByName(_ index: Int, _ length: Int, _ connectionOptions: [String]) -> Bool {
        if HopByHop.isFixedHopByHop(length: length, { nameEquals(index, $0) }) { return true }
        for option in connectionOptions where nameEquals(index, lowercasedName: option) {
            return true
        }
        return false
    }

    // MARK: building

    /// Forgets the fields, keeping the memory for the next message.
    public mutating func removeAll() {
        bytes.removeAll(keepingCapacity: true)
        spans.removeAll(keepingCapacity: true)
    }

    /// Forgets the fields before a parser builds the next head in this block. The old fields' bytes
    /// stay until they reach ``staleBytesLimit``: nothing reads them (every read goes through a field's
    /// span), and emptying the buffer for every head costs more than the memory they hold.
    mutating func removeAllBeforeNextHead() {
        if bytes.count >= FieldBlock.staleBytesLimit { bytes.removeAll(keepingCapacity: true) }
        spans.removeAll(keepingCapacity: true)
    }

    /// The bytes of old fields a block keeps (``removeAllBeforeNextHead()``): a few dozen usual heads.
    static var staleBytesLimit: Int { 4096 }

    /// Adds one field line (without its line end), stored as `Name: value\r\n`. Returns false, adding
    /// nothing, for a line that is not
    /// `token ":" OWS field-value OWS`: an obs-fold continuation or a control character included
    /// (RFC 9112 §5.2: a proxy must not forward those as they are).
    @discardableResult
    public mutating func append(fieldLine line: UnsafeRawBufferPointer) -> Bool {
        guard case .success(let parts) = scanFieldLine(line) else { return false }
        append(fieldLine: line, parts)
        return true
    }

    /// The same for a line already scanned.
    mutating func append(fieldLine line: UnsafeRawBufferPointer, _ parts: FieldLineParts) {
        precondition(isNormalized, "fields are appended only to a block built field by field")
        let start = bytes.count
        if FieldBlock.isStoredForm(line, parts) {
            // Already "Name: value" (the usual form): one copy.
            bytes.append(contentsOf: line)
            spans.append(Span(start: start, colon: start + parts.colon, valueStart: start + parts.colon + 2, valueEnd: bytes.count))
        } else {
            bytes.append(contentsOf: UnsafeRawBufferPointer(rebasing: line[0..<parts.colon]))
            let colon = bytes.count
            bytes.append(asciiColon)
            bytes.append(asciiSP)
            bytes.append(contentsOf: UnsafeRawBufferPointer(rebasing: line[parts.value]))
            spans.append(Span(start: start, colon: colon, valueStart: colon + 2, valueEnd: bytes.count))
        }
        bytes.append(asciiCR)
        bytes.append(asciiLF)
    }

    /// Whether a scanned field line (without its line end) is already in the stored form, `Name: value`:
    /// then the line and its CRLF can be stored as they came.
    static func isStoredForm(_ line: UnsafeRawBufferPointer, _ parts: FieldLineParts) -> Bool {
        parts.value.lowerBound == parts.colon + 2 && parts.value.upperBound == line.count && line[parts.colon + 1] == asciiSP
    }

    /// Notes a field line in the stored form (``isStoredForm(_:_:)``) whose bytes, `Name: value\r\n`,
    /// will be `pending` bytes past the end of `bytes`: the parser adds the spans of a run of such lines
    /// as it scans them, then the run's bytes in one copy (``append(storedLines:)``), before anything
    /// else reads or changes the block.
    mutating func appendStoredSpan(pending: Int, _ parts: FieldLineParts) {
        // No overflow: every offset is within the head's bytes.
        let start = bytes.count &+ pending
        let colon = start &+ parts.colon
        spans.append(Span(start: start, colon: colon, valueStart: colon &+ 2, valueEnd: start &+ parts.value.upperBound))
    }

    /// The bytes of the lines whose spans ``appendStoredSpan(pending:_:)`` added, line ends included.
    mutating func append(storedLines: UnsafeRawBufferPointer) {
        bytes.append(contentsOf: storedLines)
    }

    /// Adds a field the proxy makes itself (the name must be a token, the value valid).
    public mutating func append(name: String, value: String) {
        append(name: Array(name.utf8), value: Array(value.utf8))
    }

    private mutating func append(name: [UInt8], value: [UInt8]) {
        precondition(isNormalized, "fields are appended only to a block built field by field")
        let start = bytes.count
        bytes.append(contentsOf: name)
        let colon = bytes.count
        bytes.append(asciiColon)
        bytes.append(asciiSP)
        bytes.append(contentsOf: value)
        spans.append(Span(start: start, colon: colon, valueStart: colon + 2, valueEnd: bytes.count))
        bytes.append(asciiCR)
        bytes.append(asciiLF)
    }

    /// Adds field `index` of `other` as it is.
    public mutating func append(fieldAt index: Int, of other: FieldBlock) {
        precondition(isNormalized, "fields are appended only to a block built field by field")
        let span = other.spans[index]
        let start = bytes.count
        bytes.append(contentsOf: other.bytes[span.start..<span.colon])
        let colon = bytes.count
        bytes.append(asciiColon)
        bytes.append(asciiSP)
        bytes.append(contentsOf: other.bytes[span.valueStart..<span.valueEnd])
        spans.append(Span(start: start, colon: colon, valueStart: colon + 2, valueEnd: bytes.count))
        bytes.append(asciiCR)
        bytes.append(asciiLF)
    }
}

extension FieldBlock: Equatable {
    /// Equal when the fields are, by their names and values, not by the bytes around them.
    public static func == (a: FieldBlock, b: FieldBlock) -> Bool {
        guard a.count == b.count else { return false }
        for index in 0..<a.count {
            let x = a.spans[index]
            let y = b.spans[index]
            guard a.bytes[x.start..<x.colon].elementsEqual(b.bytes[y.start..<y.colon]),
                a.bytes[x.valueStart..<x.valueEnd].elementsEqual(b.bytes[y.valueStart..<y.valueEnd])
            else { return false }
        }
        return true
    }
}

/// Why a line is not a field line.
enum FieldLineProblem: Error {
    /// It starts with whitespace: an obs-fold continuation (RFC 9112 §5.2), or whitespace before the
    /// first field (RFC 9112 §2.2).
    case obsoleteFolding
    /// A byte that is not a token's before the colon (RFC 9112 §5.1: no whitespace before the colon either).
    case invalidName
    case noColon
    case emptyName
    /// A control character in the value (RFC 9110 §5.5).
    case invalidValue
}

/// Where the parts of a field line are.
struct FieldLineParts {
    var colon: Int
    var value: Range<Int>
    /// The name holds an underscore (requests drop such fields, `parseRequestHead`).
    var nameHasUnderscore: Bool
}

/// Splits `token ":" OWS field-value OWS` (RFC 9112 §5.1) into the colon's index and the value's
/// range (without the whitespace around it); the one field-line check for requests and responses.
func scanFieldLine(_ bytes: UnsafeRawBufferPointer) -> Result<FieldLineParts, FieldLineProblem> {
    guard !bytes.isEmpty, !isOWS(bytes[0]) else { return .failure(.obsoleteFolding) }
    var colon = 0
    var underscore = false
    // Eight name bytes at a time up to the first byte that is not a letter or "-" (in nearly every
    // field name, the colon); from there byte by byte below.
    if let base = bytes.baseAddress {
        while bytes.count - colon >= 8 {
            let good = lettersAndHyphens(UInt64(littleEndian: base.loadUnaligned(fromByteOffset: colon, as: UInt64.self)))
            if good == 0x8080_8080_8080_8080 {
                colon += 8
                continue
            }
            colon += (~good & 0x8080_8080_8080_8080).trailingZeroBitCount / 8
            break
        }
    }
    while colon < bytes.count && bytes[colon] != asciiColon {
        let b = bytes[colon]
        guard isTokenByte(b) else { return .failure(.invalidName) }
        if b == asciiUnderscore { underscore = true }
        colon += 1
    }
    guard colon < bytes.count else { return .failure(.noColon) }
    guard colon > 0 else { return .failure(.emptyName) }
    var lower = colon + 1
    var upper = bytes.count
    while lower < upper && isOWS(bytes[lower]) { lower += 1 }
    while upper > lower && isOWS(bytes[upper - 1]) { upper -= 1 }
    guard allFieldValueBytes(bytes, lower..<upper) else { return .failure(.invalidValue) }
    return .success(FieldLineParts(colon: colon, value: lower..<upper, nameHasUnderscore: underscore))
}

/// The bytes of `word` (little-endian) that are ASCII letters or "-" (all tchar, RFC 9110 §5.6.2):
/// 0x80 in each such byte, 0 in every other. No carry crosses a byte: the sums are made on the low
/// seven bits of each byte, and a byte with its top bit set is dropped at the end.
@inline(__always)
func lettersAndHyphens(_ word: UInt64) -> UInt64 {
    let ones: UInt64 = 0x0101_0101_0101_0101
    let highs: UInt64 = 0x8080_8080_8080_8080
    let low = word & ~highs
    let folded = low | (ones &* 0x20)
    // A byte's top bit is set by the first sum when it is at least "a", by the second when above "z".
    let letters = (folded &+ ones &* (0x80 - 0x61)) & ~(folded &+ ones &* (0x80 - 0x7B)) & highs
    // A byte equal to "-" is zero after the XOR, and only a zero byte keeps its top bit clear when 0x7F is added.
    let hyphens = ~((low ^ (ones &* 0x2D)) &+ ones &* 0x7F) & highs
    return (letters | hyphens) & ~word
}

/// Whether every byte in `range` may be in a field value (``isFieldValueByte(_:)``), eight bytes at a
/// time: values are most of a head's bytes.
@inline(__always)
func allFieldValueBytes(_ bytes: UnsafeRawBufferPointer, _ range: Range<Int>) -> Bool {
    var k = range.lowerBound
    let end = range.upperBound
    if let base = bytes.baseAddress {
        while end - k >= 8 {
            if mayHoldControlByte(UInt64(littleEndian: base.loadUnaligned(fromByteOffset: k, as: UInt64.self))) {
                for j in k..<(k + 8) where !isFieldValueByte(bytes[j]) {
                    return false
                }
            }
            k += 8
        }
        // The last few bytes as one word that overlaps bytes already checked.
        if k < end && end - range.lowerBound >= 8
            && !mayHoldControlByte(UInt64(littleEndian: base.loadUnaligned(fromByteOffset: end - 8, as: UInt64.self)))
        {
            return true
        }
    }
    while k < end {
        guard isFieldValueByte(bytes[k]) else { return false }
        k += 1
    }
    return true
}

/// False only when no byte of `word` is below 0x20 or is 0x7F (the classic "has a byte less than n"
/// and "has a zero byte" tests, exact about whether there is one); a word that may hold one is
/// checked byte by byte, which lets HTAB pass.
@inline(__always)
func mayHoldControlByte(_ word: UInt64) -> Bool {
    let ones: UInt64 = 0x0101_0101_0101_0101
    let highs: UInt64 = 0x8080_8080_8080_8080
    let below20 = (word &- ones &* 0x20) & ~word & highs
    let del = word ^ (ones &* 0x7F)
    let isDel = (del &- ones) & ~del & highs
    return below20 | isDel != 0
}

/// A field value holds no CTL except HTAB, and no DEL (RFC 9110 §5.5). Leading and trailing
/// whitespace is not checked: the parser has already removed it from values it produced.
public func isValidFieldValue(_ s: String) -> Bool {
    for b in s.utf8 where !isFieldValueByte(b) {
        return false
    }
    return true
}
