/// W3C Trace Context (Level 1) `traceparent`: `version-traceid-parentid-flags`, lowercase hex,
/// 2-32-16-2 digits (§3.2). What the proxy continues, and the value it sends upstream.
public struct TraceParent: Sendable, Equatable {
    public var traceID: TraceID
    /// The caller's span (the parent of the proxy's SERVER span).
    public var spanID: UInt64
    public var sampled: Bool

    public init(traceID: TraceID, spanID: UInt64, sampled: Bool) {
        self.traceID = traceID
        self.spanID = spanID
        self.sampled = sampled
    }

    /// The field's value, or nil when it is not a valid traceparent (§3.2.2: an all-zero trace or
    /// parent id, version ff, uppercase hex, or version 00 with more parts is invalid; a later
    /// version may add parts after the flags, §3.2.4).
    public init?(_ value: some StringProtocol) {
        let bytes = Array(value.utf8)
        guard bytes.count >= 55, bytes[2] == 0x2D, bytes[35] == 0x2D, bytes[52] == 0x2D else { return nil }
        guard let version = Self.hex(bytes[0..<2]), version != 0xff else { return nil }
        if version == 0 {
            guard bytes.count == 55 else { return nil }
        } else if bytes.count > 55 {
            guard bytes[55] == 0x2D else { return nil }
        }
        guard let high = Self.hex(bytes[3..<19]), let low = Self.hex(bytes[19..<35]), let span = Self.hex(bytes[36..<52]),
            let flags = Self.hex(bytes[53..<55])
        else { return nil }
        let trace = TraceID(high: high, low: low)
        guard trace.isValid, span != 0 else { return nil }
        self.init(traceID: trace, spanID: span, sampled: flags & 1 == 1)
    }

    /// `00-<trace id>-<span id>-<flags>`: 55 bytes.
    public var value: String {
        String(unsafeUninitializedCapacity: 55) { out in
            write(into: out)
            return 55
        }
    }

    /// The value's 55 bytes, made on the stack (every upstream attempt of a traced request sends
    /// one: no string is made for it).
    public func withValue(_ body: (UnsafeRawBufferPointer) -> Void) {
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 55) { out in
            write(into: out)
            body(UnsafeRawBufferPointer(out))
        }
    }

    private func write(into out: UnsafeMutableBufferPointer<UInt8>) {
        out[0] = 0x30
        out[1] = 0x30
        out[2] = 0x2D
        Self.writeHex(traceID.high, into: out, at: 3)
        Self.writeHex(traceID.low, into: out, at: 19)
        out[35] = 0x2D
        Self.writeHex(spanID, into: out, at: 36)
        out[52] = 0x2D
        out[53] = 0x30
        out[54] = sampled ? 0x31 : 0x30
    }

    /// The trace id as the access log and the spec write it: 32 lowercase hex digits.
    public static func hex(_ id: TraceID) -> String {
        String(unsafeUninitializedCapacity: 32) { out in
            writeHex(id.high, into: out, at: 0)
            writeHex(id.low, into: out, at: 16)
            return 32
        }
    }

    /// `value`'s 16 lowercase hex digits, most significant first, at `out[offset...]`.
    static func writeHex(_ value: UInt64, into out: UnsafeMutableBufferPointer<UInt8>, at offset: Int) {
        precondition(offset >= 0 && offset + 16 <= out.count)
        let at = UnsafeMutableRawPointer(out.baseAddress! + offset)
        at.storeBytes(of: hexDigits(UInt32(truncatingIfNeeded: value >> 32)), as: UInt64.self)
        (at + 8).storeBytes(of: hexDigits(UInt32(truncatingIfNeeded: value)), as: UInt64.self)
    }

    /// The 8 hex digits of `half` as 8 bytes in memory order (most significant digit first),
    /// eight at a time: each nibble spread to a byte of its own, then '0'-'9' or 'a'-'f' by adding
    /// 0x30, and 0x27 more where the nibble is over 9 (nibble + 6 carries into bit 4).
    @inline(__always)
    static func hexDigits(_ half: UInt32) -> UInt64 {
        var x = UInt64(half)
        x = (x | x << 16) & 0x0000_FFFF_0000_FFFF
        x = (x | x << 8) & 0x00FF_00FF_00FF_00FF
        x = (x | x << 4) & 0x0F0F_0F0F_0F0F_0F0F  // byte i: nibble i, least significant first
        let over9 = ((x &+ 0x0606_0606_0606_0606) >> 4) & 0x0101_0101_0101_0101
        let ascii = x &+ 0x3030_3030_3030_3030 &+ over9 &* 0x27
        return ascii.byteSwapped.littleEndian
    }

    /// Lowercase hex only (§3.2.2.1: uppercase is invalid).
    static func hex(_ bytes: ArraySlice<UInt8>) -> UInt64? {
        var value: UInt64 = 0
        for b in bytes {
            let digit: UInt8
            switch b {
            case 0x30...0x39: digit = b - 0x30
            case 0x61...0x66: digit = b - 0x61 + 10
            default: return nil
            }
            value = value << 4 | UInt64(digit)
        }
        return value
    }
}
