import Basics

/// The `error` auth-param of a `WWW-Authenticate` challenge (RFC 9110 §11.6.1, RFC 6750 §3), read
/// as a parameter: a 401 asks for a DPoP nonce only when `error` is `use_dpop_nonce` (RFC 9449 §9),
/// not when those words stand in `error_description`.
public enum DPoPChallenge {
    public static func asksForNonce(_ fieldValue: String) -> Bool {
        errorCodes(fieldValue).contains("use_dpop_nonce")
    }

    /// Every `error` parameter's value in the field (one per challenge), unquoted.
    static func errorCodes(_ fieldValue: String) -> [String] {
        var codes: [String] = []
        let bytes = Array(fieldValue.utf8)
        var i = 0
        while i < bytes.count {
            // A name: the run of token characters before `=` (a scheme or token68 has no `=` after it
            // that a parameter would, and is skipped as a word).
            let start = i
            while i < bytes.count, isTokenByte(bytes[i]) { i += 1 }
            let name = bytes[start..<i]
            var j = i
            while j < bytes.count, bytes[j] == 0x20 || bytes[j] == 0x09 { j += 1 }
            guard !name.isEmpty, j < bytes.count, bytes[j] == UInt8(ascii: "=") else {
                i = max(j, start + 1)
                continue
            }
            j += 1
            while j < bytes.count, bytes[j] == 0x20 || bytes[j] == 0x09 { j += 1 }
            var value: [UInt8] = []
            if j < bytes.count, bytes[j] == UInt8(ascii: "\"") {
                // quoted-string with quoted-pairs (RFC 9110 §5.6.4)
                j += 1
                while j < bytes.count, bytes[j] != UInt8(ascii: "\"") {
                    if bytes[j] == UInt8(ascii: "\\"), j + 1 < bytes.count { j += 1 }
                    value.append(bytes[j])
                    j += 1
                }
                j += 1
            } else {
                while j < bytes.count, isTokenByte(bytes[j]) || bytes[j] == UInt8(ascii: "=") {
                    value.append(bytes[j])
                    j += 1
                }
            }
            if asciiCaseInsensitiveEquals(name, "error".utf8) {
                codes.append(String(decoding: value, as: UTF8.self))
            }
            i = j
        }
        return codes
    }
}
