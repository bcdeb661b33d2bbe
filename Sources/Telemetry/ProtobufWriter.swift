/// The few protobuf encodings the OTLP messages need (protobuf's "Encoding" guide: varints, wire
/// types 0 varint, 1 64-bit, 2 length-delimited, 5 32-bit). Fields are written in field-number
/// order and a field at its default value (0, "", empty) is left out, as proto3 encoders do.
/// A nested message is written in place after a one-byte length, which is widened once its size is
/// known (most are under 128 bytes), so a batch is one growing buffer: the exporter's thread does
/// this, never a request.
///
/// The bytes are in a buffer the writer owns, written through a pointer after one capacity test:
/// a batch is tens of thousands of small fields, and an array's append pays a uniqueness and a
/// capacity check for each (bench/RESULTS.md "Telemetry's cost, December 2026").
struct ProtobufWriter: ~Copyable {
    private var base: UnsafeMutablePointer<UInt8>
    private var capacity: Int
    private(set) var count = 0

    init(reservingCapacity capacity: Int = 256) {
        self.capacity = max(capacity, 64)
        base = .allocate(capacity: self.capacity)
    }

    deinit { base.deallocate() }

    enum WireType: UInt8 {
        case varint = 0
        case fixed64 = 1
        case lengthDelimited = 2
        case fixed32 = 5
    }

    /// A copy of what was written.
    var bytes: [UInt8] { Array(UnsafeBufferPointer(start: base, count: count)) }

    /// Room for `n` more bytes.
    @inline(__always)
    mutating func reserve(_ n: Int) {
        if capacity - count < n { grow(toHold: n) }
    }

    @inline(never)
    private mutating func grow(toHold n: Int) {
        let larger = max(capacity * 2, count + n)
        let moved = UnsafeMutablePointer<UInt8>.allocate(capacity: larger)
        moved.initialize(from: base, count: count)
        base.deallocate()
        base = moved
        capacity = larger
    }

    /// Room for `n` bytes, written by `body` from the given address, which answers how many it
    /// wrote (at most `n`): one capacity test for a run of small fields.
    @inline(__always)
    mutating func writeReserved(_ n: Int, _ body: (UnsafeMutablePointer<UInt8>) -> Int) {
        reserve(n)
        count += body(base + count)
    }

    /// `value`'s varint at `at`; answers its size.
    @inline(__always)
    static func putVarint(_ value: UInt64, at: UnsafeMutablePointer<UInt8>) -> Int {
        var v = value
        var i = 0
        while v >= 0x80 {
            at[i] = UInt8(truncatingIfNeeded: v) | 0x80
            v >>= 7
            i += 1
        }
        at[i] = UInt8(v)
        return i + 1
    }

    @inline(__always)
    mutating func byte(_ value: UInt8) {
        reserve(1)
        base[count] = value
        count += 1
    }

    /// Bytes as they are (an encoded message made once, a string's UTF-8).
    mutating func raw(_ bytes: UnsafeRawBufferPointer) {
        guard let from = bytes.baseAddress, !bytes.isEmpty else { return }
        reserve(bytes.count)
        UnsafeMutableRawPointer(base + count).copyMemory(from: from, byteCount: bytes.count)
        count += bytes.count
    }

    @inline(__always)
    mutating func varint(_ value: UInt64) {
        if value < 0x80 { byte(UInt8(value)) } else { multiByteVarint(value) }
    }

    @inline(never)
    private mutating func multiByteVarint(_ value: UInt64) {
        reserve(10)
        var v = value
        while v >= 0x80 {
            base[count] = UInt8(truncatingIfNeeded: v) | 0x80
            count += 1
            v >>= 7
        }
        base[count] = UInt8(v)
        count += 1
    }

    /// How many bytes `value`'s varint takes.
    @inline(__always)
    static func varintSize(_ value: UInt64) -> Int {
        // 7 bits a byte: 1 + (significant bits - 1) / 7, and 1 for zero.
        1 + (63 - (value | 1).leadingZeroBitCount) / 7
    }

    @inline(__always)
    mutating func tag(_ field: Int, _ type: WireType) {
        varint(UInt64(field) << 3 | UInt64(type.rawValue))
    }

    /// An unsigned or enum field (an int64 is its two's complement as a UInt64).
    mutating func uint(_ field: Int, _ value: UInt64) {
        guard value != 0 else { return }
        tag(field, .varint)
        varint(value)
    }

    mutating func fixed64(_ field: Int, _ value: UInt64) {
        guard value != 0 else { return }
        tag(field, .fixed64)
        appendLittleEndian(value)
    }

    /// 8 bytes, least significant first (a fixed64 or double's payload).
    @inline(__always)
    mutating func appendLittleEndian(_ value: UInt64) {
        reserve(8)
        UnsafeMutableRawPointer(base + count).storeBytes(of: value.littleEndian, as: UInt64.self)
        count += 8
    }

    /// 8 bytes, most significant first (a trace or span id, as W3C Trace Context writes it in hex).
    @inline(__always)
    mutating func appendBigEndian(_ value: UInt64) {
        reserve(8)
        UnsafeMutableRawPointer(base + count).storeBytes(of: value.bigEndian, as: UInt64.self)
        count += 8
    }

    mutating func fixed32(_ field: Int, _ value: UInt32) {
        guard value != 0 else { return }
        tag(field, .fixed32)
        reserve(4)
        UnsafeMutableRawPointer(base + count).storeBytes(of: value.littleEndian, as: UInt32.self)
        count += 4
    }

    mutating func string(_ field: Int, _ value: String) {
        guard !value.isEmpty else { return }
        tag(field, .lengthDelimited)
        appendLengthAndUTF8(value)
    }

    /// A string's length and its UTF-8 bytes, copied in one go (a native string's bytes are
    /// contiguous already), after a tag written by the caller.
    mutating func appendLengthAndUTF8(_ value: String) {
        var value = value
        value.withUTF8 { utf8 in
            varint(UInt64(utf8.count))
            raw(UnsafeRawBufferPointer(utf8))
        }
    }

    /// A sub-message, written whole even when empty (an empty `AnyValue` or `Status` still says
    /// the field is present).
    mutating func message(_ field: Int, _ write: (inout ProtobufWriter) -> Void) {
        let lengthAt = beginMessage(field)
        write(&self)
        endMessage(lengthAt)
    }

    /// A sub-message's tag and the byte kept for its length; answers where that byte is, for
    /// `endMessage` once the contents are written.
    mutating func beginMessage(_ field: Int) -> Int {
        tag(field, .lengthDelimited)
        byte(0)
        return count - 1
    }

    /// The message begun at `lengthAt` is complete: its length goes in the byte kept for it.
    mutating func endMessage(_ lengthAt: Int) {
        let length = count - lengthAt - 1
        guard length >= 0x80 else {
            base[lengthAt] = UInt8(length)
            return
        }
        // The length's varint takes more than the byte kept for it: the contents move right.
        let extra = Self.varintSize(UInt64(length)) - 1
        reserve(extra)
        UnsafeMutableRawPointer(base + lengthAt + 1 + extra).copyMemory(from: base + lengthAt + 1, byteCount: length)  // memmove
        var rest = length
        for i in 0..<extra {
            base[lengthAt + i] = UInt8(truncatingIfNeeded: rest) | 0x80
            rest >>= 7
        }
        base[lengthAt + extra] = UInt8(rest)
        count += extra
    }
}
