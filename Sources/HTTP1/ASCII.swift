// Byte classes shared by the parser, the serializer and the header rules (the tchar check and the
// ASCII case folding are in Basics/ASCII.swift, shared with Config and ProxyCore).
// Nothing here allocates.

import Basics

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// The index of the first LF in `range` of `buffer`, found with libc's vectorised `memchr`.
@inline(__always)
func indexOfLF(_ buffer: UnsafeRawBufferPointer, _ range: Range<Int>) -> Int? {
    guard let base = buffer.baseAddress, !range.isEmpty,
        let hit = memchr(base + range.lowerBound, Int32(asciiLF), range.count)
    else { return nil }
    return base.distance(to: UnsafeRawPointer(hit))
}

/// Whether the `count` bytes at `a` and at `b` are equal, compared by libc's `memcmp` (a word at a time).
@inline(__always)
public func memoryEqual(_ a: UnsafeRawPointer, _ b: UnsafeRawPointer, count: Int) -> Bool {
    memcmp(a, b, count) == 0
}

// Computed rather than stored: a global `let` costs a lazy-initialisation check on every use.
@inlinable var asciiCR: UInt8 { 0x0D }
@inlinable var asciiLF: UInt8 { 0x0A }
@inlinable var asciiSP: UInt8 { 0x20 }
@inlinable var asciiHTAB: UInt8 { 0x09 }
@inlinable var asciiColon: UInt8 { 0x3A }
@inlinable var asciiUnderscore: UInt8 { 0x5F }

/// A byte allowed inside a field value: field-vchar, obs-text, SP or HTAB (RFC 9110 §5.5).
/// Every CTL except HTAB, and DEL, is refused.
@inlinable
func isFieldValueByte(_ b: UInt8) -> Bool {
    b == asciiHTAB || (b >= 0x20 && b != 0x7F)
}

@inlinable
func isOWS(_ b: UInt8) -> Bool {
    b == asciiSP || b == asciiHTAB
}

@inlinable
func hexValue(_ b: UInt8) -> Int? {
    switch b {
    case UInt8(ascii: "0")...UInt8(ascii: "9"): return Int(b &- UInt8(ascii: "0"))
    case UInt8(ascii: "a")...UInt8(ascii: "f"): return Int(b &- UInt8(ascii: "a") &+ 10)
    case UInt8(ascii: "A")...UInt8(ascii: "F"): return Int(b &- UInt8(ascii: "A") &+ 10)
    default: return nil
    }
}

/// A field value holds no CTL except HTAB, and no DEL (RFC 9110 §5.5). Leading and trailing
/// whitespace is not checked: the parser has already removed it from values it produced.
public func isValidFieldValue(_ s: String) -> Bool {
    for b in s.utf8 where !isFieldValueByte(b) {
        return false
    }
    return true
}
