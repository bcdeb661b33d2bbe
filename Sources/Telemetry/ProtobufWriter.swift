/// The few protobuf encodings the OTLP messages need (protobuf's "Encoding" guide: varints, wire
/// types 0 varint, 1 64-bit, 2 length-delimited, 5 32-bit). Fields are written in field-number
/// order and a field at its default value (0, "", empty) is left out, as proto3 encoders do.
/// A nested message is written into a writer of its own and appended with its length: the
/// exporter's thread does this, never a request.
struct ProtobufWriter {
    private(set) var bytes: [UInt8] = []

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
        for i in 0..<8 { bytes.append(UInt8(truncatingIfNeeded: value >> (8 * UInt64(i)))) }
    }

    mutating func fixed32(_ field: Int, _ value: UInt32) {
        guard value != 0 else { return }
        tag(field, .fixed32)
        for i in 0..<4 { bytes.append(UInt8(truncatingIfNeeded: value >> (8 * UInt32(i)))) }
    }

    mutating func double(_ field: Int, _ value: Double) {
        fixed64(field, value.bitPattern)
    }

    mutating func bytes(_ field: Int, _ value: [UInt8]) {
        guard !value.isEmpty else { return }
        tag(field, .lengthDelimited)
        varint(UInt64(value.count))
        bytes.append(contentsOf: value)
    }

    mutating func string(_ field: Int, _ value: String) {
        guard !value.isEmpty else { return }
        tag(field, .lengthDelimited)
        varint(UInt64(value.utf8.count))
        bytes.append(contentsOf: value.utf8)
    }

    /// Bytes as they are, after a tag and length written by the caller (a oneof member).
    mutating func appendRaw<S: Sequence>(_ raw: S) where S.Element == UInt8 {
        bytes.append(contentsOf: raw)
    }

    /// A sub-message, written whole even when empty (an empty `AnyValue` or `Status` still says
    /// the field is present).
    mutating func message(_ field: Int, _ write: (inout ProtobufWriter) -> Void) {
        var inner = ProtobufWriter()
        write(&inner)
        tag(field, .lengthDelimited)
        varint(UInt64(inner.bytes.count))
        bytes.append(contentsOf: inner.bytes)
    }
}
