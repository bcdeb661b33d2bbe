/// Percent-decoding (RFC 3986 §2.1), for a redis:// URL's user name and for the query of a loopback
/// login's redirect, which is application/x-www-form-urlencoded (`+` stands for a space there).
/// nil for a bad escape, or for bytes that are not UTF-8.
public func percentDecoded(_ text: Substring, plusIsSpace: Bool = false) -> String? {
    var bytes: [UInt8] = []
    var iterator = Array(text.utf8).makeIterator()
    while let byte = iterator.next() {
        switch byte {
        case UInt8(ascii: "%"):
            guard let high = iterator.next().flatMap(hexDigitValue), let low = iterator.next().flatMap(hexDigitValue) else { return nil }
            bytes.append(high << 4 | low)
        case UInt8(ascii: "+") where plusIsSpace:
            bytes.append(UInt8(ascii: " "))
        default:
            bytes.append(byte)
        }
    }
    return String(validating: bytes, as: UTF8.self)
}

private func hexDigitValue(_ byte: UInt8) -> UInt8? {
    switch byte {
    case UInt8(ascii: "0")...UInt8(ascii: "9"): return byte - UInt8(ascii: "0")
    case UInt8(ascii: "a")...UInt8(ascii: "f"): return byte - UInt8(ascii: "a") + 10
    case UInt8(ascii: "A")...UInt8(ascii: "F"): return byte - UInt8(ascii: "A") + 10
    default: return nil
    }
}
