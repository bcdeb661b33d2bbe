/// JSON strings (RFC 8259 §7), escaped one way for everything the proxy writes as JSON: error
/// bodies, admin answers, log records, the JWTs it signs. `"` and `\` are escaped; control
/// characters as `\n`, `\r`, `\t` or `\u00XX`; DEL, U+2028 and U+2029 as `\u` too (they end a line
/// in some readers: terminals, JavaScript before ES2019). All else passes as its UTF-8 (§8.1).
public enum JSONString {
    /// `text` as a JSON string literal, in quotes.
    public static func quoted(_ text: String) -> String {
        var out: [UInt8] = [UInt8(ascii: "\"")]
        out.reserveCapacity(text.utf8.count + 2)
        appendEscaped(text, to: &out)
        out.append(UInt8(ascii: "\""))
        return String(decoding: out, as: UTF8.self)
    }

    /// Appends `text` escaped, without quotes.
    public static func appendEscaped(_ text: String, to out: inout [UInt8]) {
        // Most texts (names, paths, addresses) need no escape: one scan, one copy.
        let copied = text.utf8.withContiguousStorageIfAvailable { bytes -> Bool in
            for byte in bytes where byte < 0x20 || byte == 0x7F || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") || byte == 0xE2 {
                return false
            }
            out.append(contentsOf: bytes)
            return true
        }
        if copied == true { return }
        append(text, to: &out, onlyControlCharacters: false)
    }

    /// `text` with only its control characters and DEL escaped, as above: a text log record kept on
    /// one line, its quotes and backslashes as they are.
    public static func controlCharactersEscaped(_ text: String) -> String {
        guard text.utf8.contains(where: { $0 < 0x20 || $0 == 0x7F }) else { return text }
        var out: [UInt8] = []
        out.reserveCapacity(text.utf8.count + 8)
        append(text, to: &out, onlyControlCharacters: true)
        return String(decoding: out, as: UTF8.self)
    }

    private static func append(_ text: String, to out: inout [UInt8], onlyControlCharacters: Bool) {
        let bytes = text.utf8
        var index = bytes.startIndex
        while index != bytes.endIndex {
            let byte = bytes[index]
            switch byte {
            case UInt8(ascii: "\""), UInt8(ascii: "\\"):
                if !onlyControlCharacters { out.append(UInt8(ascii: "\\")) }
                out.append(byte)
            case UInt8(ascii: "\n"): out.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "n")])
            case UInt8(ascii: "\r"): out.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "r")])
            case UInt8(ascii: "\t"): out.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "t")])
            case 0..<0x20, 0x7F:
                appendUnicodeEscape(UInt16(byte), to: &out)
            case 0xE2 where !onlyControlCharacters:
                // U+2028 and U+2029 are E2 80 A8 and E2 80 A9 in UTF-8.
                let second = bytes.index(after: index)
                let third = second == bytes.endIndex ? second : bytes.index(after: second)
                if third != bytes.endIndex, bytes[second] == 0x80, bytes[third] == 0xA8 || bytes[third] == 0xA9 {
                    appendUnicodeEscape(bytes[third] == 0xA8 ? 0x2028 : 0x2029, to: &out)
                    index = third
                } else {
                    out.append(byte)
                }
            default:
                out.append(byte)
            }
            index = bytes.index(after: index)
        }
    }

    private static let hexDigits: [UInt8] = Array("0123456789abcdef".utf8)

    private static func appendUnicodeEscape(_ value: UInt16, to out: inout [UInt8]) {
        out.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "u")])
        for shift in stride(from: 12, through: 0, by: -4) { out.append(hexDigits[Int((value >> UInt16(shift)) & 0xF)]) }
    }
}
