/// `byte` with an ASCII capital made small; every other byte as it is (UTF-8's bytes of other
/// letters are all above 0x7F). Host names, field names and schemes compare this way (RFC 9110
/// §4.2.3, §5.1).
@inlinable @inline(__always)
public func asciiLower(_ byte: UInt8) -> UInt8 {
    byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z") ? byte | 0x20 : byte
}
