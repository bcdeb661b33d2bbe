import Basics

/// Where a writer (an event loop) formats its audit lines until it writes them, all with one write(2)
/// (`AuditLog.write(_:)`): bytes copied in place into memory kept from line to line, so a line costs
/// no allocation and no `Array` bookkeeping per member (bench/RESULTS.md, "The audit log's cost"),
/// and the writer's timestamp cache. Used on one thread only.
public final class AuditLineBuffer {
    private var base: UnsafeMutablePointer<UInt8>
    private var capacity: Int
    private var count = 0
    var timestamp = AuditTimestamp()

    /// `capacity`: enough for a usual line; a longer one makes it grow.
    public init(capacity: Int = 1024) {
        self.capacity = capacity
        base = .allocate(capacity: capacity)
    }

    deinit { base.deallocate() }

    /// The lines formatted and not yet written.
    public var bytes: UnsafeRawBufferPointer { UnsafeRawBufferPointer(start: base, count: count) }
    /// How many lines `bytes` holds.
    public internal(set) var lines = 0
    public var isEmpty: Bool { count == 0 }

    func clear() {
        count = 0
        lines = 0
    }

    /// Room for `extra` more bytes.
    @inline(__always)
    func reserve(_ extra: Int) {
        if count + extra > capacity { grow(to: count + extra) }
    }

    private func grow(to needed: Int) {
        let larger = max(needed, 2 * capacity)
        let moved = UnsafeMutablePointer<UInt8>.allocate(capacity: larger)
        moved.update(from: base, count: count)
        base.deallocate()
        base = moved
        capacity = larger
    }

    /// One byte, after `reserve` made room for it.
    @inline(__always)
    func appendReserved(_ byte: UInt8) {
        base[count] = byte
        count += 1
    }

    @inline(__always)
    func append(_ byte: UInt8) {
        reserve(1)
        appendReserved(byte)
    }

    func append(_ bytes: UnsafeBufferPointer<UInt8>) {
        guard let start = bytes.baseAddress else { return }
        reserve(bytes.count)
        (base + count).update(from: start, count: bytes.count)
        count += bytes.count
    }

    @inline(__always)
    func append(_ text: StaticString) {
        append(UnsafeBufferPointer(start: text.utf8Start, count: text.utf8CodeUnitCount))
    }

    /// `text` as a JSON string, in quotes, escaped as `JSONString.appendEscaped` escapes it: copied
    /// eight bytes at a time when nothing in it may need an escape, as in nearly every name, address
    /// and path; else escaped by `JSONString`.
    func appendQuoted(_ text: String) {
        let copied = text.utf8.withContiguousStorageIfAvailable { appendQuotedIfNothingToEscape($0) }
        guard copied != true else { return }
        var escaped: [UInt8] = [UInt8(ascii: "\"")]
        JSONString.appendEscaped(text, to: &escaped)
        escaped.append(UInt8(ascii: "\""))
        escaped.withUnsafeBufferPointer { append($0) }
    }

    /// Appends `bytes` in quotes when none of them may need an escape (`mayNeedEscape`); else
    /// appends nothing and answers false. A word at a time: loaded, tested, stored; the last word
    /// overlaps the one before it, and a text shorter than a word is one word padded with spaces.
    private func appendQuotedIfNothingToEscape(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        let length = bytes.count
        reserve(length + 10)
        let target = UnsafeMutableRawPointer(base + count + 1)
        if length < 8 {
            var word: UInt64 = 0x2020_2020_2020_2020 &<< (8 &* UInt64(length))
            for index in 0..<length { word |= UInt64(bytes[index]) &<< (8 &* UInt64(index)) }
            if AuditLineBuffer.mayNeedEscape(word) { return false }
            // The padding lands past the text's end, in room reserved: overwritten by what follows.
            target.storeBytes(of: word, as: UInt64.self)
        } else {
            let source = UnsafeRawPointer(bytes.baseAddress!)
            var offset = 0
            while true {
                let word = source.loadUnaligned(fromByteOffset: offset, as: UInt64.self)
                if AuditLineBuffer.mayNeedEscape(word) { return false }
                target.storeBytes(of: word, toByteOffset: offset, as: UInt64.self)
                if offset == length - 8 { break }
                offset = min(offset + 8, length - 8)
            }
        }
        base[count] = UInt8(ascii: "\"")
        base[count + 1 + length] = UInt8(ascii: "\"")
        count += length + 2
        return true
    }

    /// Whether one of the eight bytes of `word` may need an escape: a control (below 0x20), `"`,
    /// `\`, or 0x7F and above (DEL, and every byte of a non-ASCII character: those go the slow way,
    /// which escapes only U+2028 and U+2029 among them). The tests for a byte below a bound, above a
    /// bound and equal to a value, done on all eight at once with the carries they need.
    @inline(__always)
    static func mayNeedEscape(_ word: UInt64) -> Bool {
        let ones: UInt64 = 0x0101_0101_0101_0101
        let highBits: UInt64 = 0x8080_8080_8080_8080
        func hasZeroByte(_ value: UInt64) -> UInt64 { (value &- ones) & ~value & highBits }
        let control = (word &- ones &* 0x20) & ~word & highBits
        let quote = hasZeroByte(word ^ (ones &* UInt64(UInt8(ascii: "\""))))
        let backslash = hasZeroByte(word ^ (ones &* UInt64(UInt8(ascii: "\\"))))
        let deleteOrAbove = ((word &+ ones) | word) & highBits
        return control | quote | backslash | deleteOrAbove != 0
    }

    /// The bytes `JSONString.appendEscaped` may change: controls, the quote, the backslash, DEL, and
    /// 0xE2 (the lead byte of U+2028 and U+2029). One bit each in four words: a shift and a test per
    /// byte, not five comparisons.
    @inline(__always)
    static func mayNeedEscape(_ byte: UInt8) -> Bool {
        let word: UInt64
        switch byte >> 6 {
        case 0: word = 0x0000_0004_FFFF_FFFF  // 0x00 to 0x1F, and `"` (0x22)
        case 1: word = 1 << (0x5C - 0x40) | 1 << (0x7F - 0x40)  // the backslash, DEL
        case 2: word = 0
        default: word = 1 << (0xE2 - 0xC0)
        }
        return word >> UInt64(byte & 63) & 1 != 0
    }

    /// `value` in decimal.
    func appendDecimal(_ value: Int) {
        reserve(21)
        if value < 0 { appendReserved(UInt8(ascii: "-")) }
        var magnitude = value.magnitude
        var digits = 1
        var rest = magnitude / 10
        while rest > 0 {
            digits += 1
            rest /= 10
        }
        count += digits
        var at = count - 1
        repeat {
            base[at] = UInt8(ascii: "0") + UInt8(truncatingIfNeeded: magnitude % 10)
            magnitude /= 10
            at -= 1
        } while magnitude > 0
    }
}
