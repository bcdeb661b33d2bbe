import Basics

/// Where a writer (an event loop) formats its audit lines, one at a time: bytes copied in place into
/// memory kept from line to line, so a line costs no allocation and no `Array` bookkeeping per
/// member (bench/RESULTS.md, "The audit log's cost"), and the writer's timestamp cache. Used on one
/// thread only.
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

    /// The line formatted so far.
    public var bytes: UnsafeRawBufferPointer { UnsafeRawBufferPointer(start: base, count: count) }

    func clear() { count = 0 }

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

    /// `text` escaped as a JSON string's contents (`JSONString.appendEscaped`): copied as it is when
    /// nothing in it needs an escape, as in nearly every name, address and path.
    func appendEscaped(_ text: String) {
        let copied = text.utf8.withContiguousStorageIfAvailable { bytes -> Bool in
            for byte in bytes where AuditLineBuffer.mayNeedEscape(byte) { return false }
            append(bytes)
            return true
        }
        if copied == true { return }
        var escaped: [UInt8] = []
        JSONString.appendEscaped(text, to: &escaped)
        escaped.withUnsafeBufferPointer { append($0) }
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
