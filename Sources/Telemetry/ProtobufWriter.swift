/// The few protobuf encodings the OTLP messages need (protobuf's "Encoding" guide: varints, wire
/// types 0 varint, 1 64-bit, 2 length-delimited, 5 32-bit). Fields are written in field-number
/// order and a field at its default value (0, "", empty) is left out, as proto3 encoders do.
/// A nested message is written in place after a one-byte length, which is widened once its size is
/// known (most are under 128 bytes), so a batch is one growing array: the exporter's thread does
/// this, never a request.
struct ProtobufWriter {
    private(set) var bytes: [UInt8] = []

    init(reservingCapacity capacity: Int = 0) {
        bytes.reserveCapacity(capacity)
    }

    enum WireType: UInt8 {
        case varint = 0
        case fixed64 = 1
        case lengthDelimited = 2
        case fixed32 = 5
    }

    mutating func varint(_ value: UInt64) {
        var v = value
        while v >= 0x80 {
            bytes.append(UInt8(truncatingIfNeeded: v) | 0x80)
            v >>= 7
        }
        bytes.append(UInt8(v))
    }

    mutating func tag(_ field: Int, _ type: WireType) {
        varint(UInt64(field) << 3 | UInt64(type.rawValue))
    }

    /// An unsigned or enum field (an int64 is its two's complement as a UInt64).
    mutating func uint(_ field: Int, _ value: UInt64) {
        guard value != 0 else { return }
        tag(field, .varint)
        varint(value)
    }

    mutating func bool(_ field: Int, _ value: Bool) {
        uint(field, value ? 1 : 0)
    }

    mutating func fixed64(_ field: Int, _ value: UInt64) {
        guard value != 0 else { return }
        tag(field, .fixed64)
        appendLittleEndian(value)
    }

    /// 8 bytes, least significant first (a fixed64 or double's payload).
    mutating func appendLittleEndian(_ value: UInt64) {
        for i in 0..<8 { bytes.append(UInt8(truncatingIfNeeded: value >> (8 * UInt64(i)))) }
    }

    /// 8 bytes, most significant first (a trace or span id, as W3C Trace Context writes it in hex).
    mutating func appendBigEndian(_ value: UInt64) {
        for i in 0..<8 { bytes.append(UInt8(truncatingIfNeeded: value >> (56 - 8 * UInt64(i)))) }
    }

    mutating func fixed32(_ field: Int, _ value: UInt32) {
        guard value != 0 else { return }
        tag(field, .fixed32)
        for i in 0..<4 { bytes.append(UInt8(truncatingIfNeeded: value >> (8 * UInt32(i)))) }
    }

    mutating func double(_ field: Int, _ value: Double) {
        fixed64(field, value.bitPattern)
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
            bytes.append(contentsOf: utf8)
        }
    }

    /// A sub-message, written whole even when empty (an empty `AnyValue` or `Status` still says
    /// the field is present).
    mutating func message(_ field: Int, _ write: (inout ProtobufWriter) -> Void) {
        tag(field, .lengthDelimited)
        let lengthAt = bytes.count
        bytes.append(0)
        write(&self)
        var length = bytes.count - lengthAt - 1
        if length >= 0x80 {
            // The length's varint takes more than the byte kept for it: the contents move right.
            var extra = 0
            var rest = length >> 7
            while rest > 0 {
                extra += 1
                rest >>= 7
            }
            bytes.insert(contentsOf: repeatElement(0, count: extra), at: lengthAt + 1)
            for i in 0..<extra {
                bytes[lengthAt + i] = UInt8(truncatingIfNeeded: length) | 0x80
                length >>= 7
            }
            bytes[lengthAt + extra] = UInt8(length)
        } else {
            bytes[lengthAt] = UInt8(length)
        }
    }
}
