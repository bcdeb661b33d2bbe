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
