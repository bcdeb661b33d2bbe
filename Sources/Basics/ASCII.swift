#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// `byte` with an ASCII capital made small; every other byte as it is (UTF-8's bytes of other
/// letters are all above 0x7F). Host names, field names and schemes compare this way (RFC 9110
/// §4.2.3, §5.1).
@inlinable @inline(__always)
public func asciiLower(_ byte: UInt8) -> UInt8 {
    byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z") ? byte | 0x20 : byte
}

/// The same bytes, ASCII case aside: how host names and schemes compare (RFC 9110 §4.2.3).
@inlinable
public func asciiCaseInsensitiveEquals<A: Collection, B: Collection>(_ a: A, _ b: B) -> Bool where A.Element == UInt8, B.Element == UInt8 {
    a.count == b.count && zip(a, b).allSatisfy { asciiLower($0) == asciiLower($1) }
}

/// A host name without the one trailing dot of its fully qualified form (`example.com.`, RFC 1034 §3.1).
@inlinable
public func withoutTrailingDot<C: BidirectionalCollection>(_ name: C) -> C.SubSequence where C.Element == UInt8 {
    name.last == UInt8(ascii: ".") ? name.dropLast() : name[...]
}

/// The same bytes, ASCII case aside, for two strings; never allocates. Field names and tokens
/// compare this way (RFC 9110 §5.1).
public func asciiCaseInsensitiveEquals(_ a: String, _ b: String) -> Bool {
    let a = a.utf8
    let b = b.utf8
    guard a.count == b.count else { return false }
    // Native and small strings expose their bytes directly; compare those in a tight loop.
    let fast = a.withContiguousStorageIfAvailable { pa in
        b.withContiguousStorageIfAvailable { pb in
            for k in 0..<pa.count where asciiLower(pa[k]) != asciiLower(pb[k]) {
                return false
            }
            return true
        }
    }
    if let fast, let result = fast { return result }
    return a.elementsEqual(b) { asciiLower($0) == asciiLower($1) }
}

/// True when `bytes[range]` is `lowercased` ignoring ASCII case: a field name or token read from the
/// wire against a lowercase name.
@inlinable @inline(__always)
public func asciiEqualsIgnoringCase(_ bytes: UnsafeRawBufferPointer, _ range: Range<Int>, _ lowercased: UnsafeBufferPointer<UInt8>) -> Bool {
    guard range.count == lowercased.count else { return false }
    var k = 0
    for index in range {
        if asciiLower(bytes[index]) != lowercased[k] { return false }
        k += 1
    }
    return true
}

/// The same for bytes kept in an array.
@inlinable @inline(__always)
public func asciiEqualsIgnoringCase(_ bytes: [UInt8], _ start: Int, _ end: Int, _ lowercased: UnsafeBufferPointer<UInt8>) -> Bool {
    guard end - start == lowercased.count else { return false }
    return bytes.withUnsafeBytes { asciiEqualsIgnoringCase($0, start..<end, lowercased) }
}

/// The same against a literal, eight bytes at a time (the names the parsers look for are up
/// to 17 bytes long, and most fields that have the right length do match).
@inlinable @inline(__always)
public func asciiEqualsIgnoringCase(_ bytes: UnsafeRawBufferPointer, _ range: Range<Int>, _ lowercased: StaticString) -> Bool {
    let n = lowercased.utf8CodeUnitCount
    guard range.count == n, let base = bytes.baseAddress else { return false }
    let literal = UnsafeRawPointer(lowercased.utf8Start)
    var k = 0
    while n - k >= 8 {
        let word = base.loadUnaligned(fromByteOffset: range.lowerBound + k, as: UInt64.self)
        guard let lowered = asciiLowerWord(word),
            lowered == literal.loadUnaligned(fromByteOffset: k, as: UInt64.self)
        else { return false }
        k += 8
    }
    if k < n && n >= 8 {
        // The last bytes as one word that overlaps bytes already compared.
        let word = base.loadUnaligned(fromByteOffset: range.lowerBound + n - 8, as: UInt64.self)
        guard let lowered = asciiLowerWord(word) else { return false }
        return lowered == literal.loadUnaligned(fromByteOffset: n - 8, as: UInt64.self)
    }
    while k < n {
        if asciiLower(bytes[range.lowerBound + k]) != literal.load(fromByteOffset: k, as: UInt8.self) { return false }
        k += 1
    }
    return true
}

/// Eight ASCII bytes with "A" to "Z" lowered; nil when a byte is not ASCII (never equal to a
/// lowercase ASCII literal). No carry crosses a byte: every byte is below 0x80 when the sums are made.
@inlinable @inline(__always)
public func asciiLowerWord(_ word: UInt64) -> UInt64? {
    let ones: UInt64 = 0x0101_0101_0101_0101
    let highs: UInt64 = 0x8080_8080_8080_8080
    guard word & highs == 0 else { return nil }
    // A byte's top bit is set by the first sum when it is at least "A", by the second when above "Z".
    let capitals = (word &+ ones &* (0x80 - 0x41)) & ~(word &+ ones &* (0x80 - 0x5B)) & highs
    return word | (capitals >> 2)
}

/// tchar (RFC 9110 §5.6.2): "!" / "#" / "$" / "%" / "&" / "'" / "*" / "+" / "-" / "." / "^" / "_" / "`" / "|" / "~"
/// / DIGIT / ALPHA: the bytes of a field name, a method, a token. One bit per ASCII byte in two words
/// (a switch over the ranges was too large to be inlined, and called once per byte of every field name).
@inlinable
public func isTokenByte(_ b: UInt8) -> Bool {
    // Bits 0-63: "!#$%&'*+-." and DIGIT; bits 64-127: ALPHA and "^_`|~".
    let low: UInt64 = 0x03FF_6CFA_0000_0000
    let high: UInt64 = 0x57FF_FFFF_C7FF_FFFE
    if b < 64 { return (low >> UInt64(b)) & 1 != 0 }
    if b < 128 { return (high >> UInt64(b &- 64)) & 1 != 0 }
    return false
}

/// A field name is a non-empty token (RFC 9110 §5.1).
public func isValidFieldName(_ s: String) -> Bool {
    var count = 0
    for b in s.utf8 {
        guard isTokenByte(b) else { return false }
        count += 1
    }
    return count > 0
}

// MARK: HTTP's byte classes

// Shared by HTTP1's parsers, serializers and field rules. Nothing here allocates; libc's `memchr`
// and `memcmp` are its only C (no system call).

/// The index of the first LF in `range` of `buffer`, found with libc's vectorised `memchr`.
@inlinable @inline(__always)
public func indexOfLF(_ buffer: UnsafeRawBufferPointer, _ range: Range<Int>) -> Int? {
    guard let base = buffer.baseAddress, !range.isEmpty,
        let hit = memchr(base + range.lowerBound, Int32(asciiLF), range.count)
    else { return nil }
    return base.distance(to: UnsafeRawPointer(hit))
}

/// Whether the `count` bytes at `a` and at `b` are equal, compared by libc's `memcmp` (a word at a time).
@inlinable @inline(__always)
public func memoryEqual(_ a: UnsafeRawPointer, _ b: UnsafeRawPointer, count: Int) -> Bool {
    memcmp(a, b, count) == 0
}

// Computed rather than stored: a global `let` costs a lazy-initialisation check on every use.
@inlinable public var asciiCR: UInt8 { 0x0D }
@inlinable public var asciiLF: UInt8 { 0x0A }
@inlinable public var asciiSP: UInt8 { 0x20 }
@inlinable public var asciiHTAB: UInt8 { 0x09 }
@inlinable public var asciiColon: UInt8 { 0x3A }
@inlinable public var asciiUnderscore: UInt8 { 0x5F }

/// A byte allowed inside a field value: field-vchar, obs-text, SP or HTAB (RFC 9110 §5.5).
/// Every CTL except HTAB, and DEL, is refused.
@inlinable
public func isFieldValueByte(_ b: UInt8) -> Bool {
    b == asciiHTAB || (b >= 0x20 && b != 0x7F)
}

@inlinable
public func isOWS(_ b: UInt8) -> Bool {
    b == asciiSP || b == asciiHTAB
}

@inlinable
public func hexValue(_ b: UInt8) -> Int? {
    switch b {
    case UInt8(ascii: "0")...UInt8(ascii: "9"): return Int(b &- UInt8(ascii: "0"))
    case UInt8(ascii: "a")...UInt8(ascii: "f"): return Int(b &- UInt8(ascii: "a") &+ 10)
    case UInt8(ascii: "A")...UInt8(ascii: "F"): return Int(b &- UInt8(ascii: "A") &+ 10)
    default: return nil
    }
}
