/// The form encoding every request the proxy builds for an identity provider or a metadata server
/// uses: token requests, authorization URLs, query strings, Basic client credentials (RFC 6749 §2.3.1),
/// and the token `inject.query` puts in a request's query (RFC 3986 §2.3: unreserved bytes kept).
public enum FormEncoding {
    /// `application/x-www-form-urlencoded` (unreserved characters kept, space as %20).
    public static func encode(_ text: String) -> String {
        var out = ""
        out.reserveCapacity(text.utf8.count)
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"):
                out.unicodeScalars.append(Unicode.Scalar(byte))
            default:
                out += "%" + String(byte >> 4, radix: 16, uppercase: true) + String(byte & 0xF, radix: 16, uppercase: true)
            }
        }
        return out
    }
}
