import FoundationEssentials

/// Reads the claims of a JSON Web Token without checking its signature (RFC 7519): the proxy only
/// needs to know when the token expires, and the upstream checks the signature.
public enum JWT {
    /// The claims the proxy uses.
    public struct Claims: Sendable, Equatable {
        /// `exp`, seconds since the epoch (RFC 7519 §4.1.4; a NumericDate may have a fraction).
        public var expiresAt: Double?
        /// `iat`.
        public var issuedAt: Double?
        /// `sub`.
        public var subject: String?
        /// `username` (Cognito access tokens: the pool's own user name, used for SECRET_HASH).
        public var username: String?
    }

    /// The claims of a JWS in compact form (`header.payload.signature`, RFC 7515 §7.1), or nil when
    /// `token` is not one (an opaque token, a JWE, bad base64url, a payload that is no JSON object).
    public static func claims(of token: String) -> Claims? {
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, !parts[0].isEmpty, !parts[1].isEmpty else { return nil }
        guard let header = base64URLDecode(parts[0]),
            (try? JSONDecoder().decode(JSONObjectCheck.self, from: header)) != nil
        else { return nil }
        guard let payload = base64URLDecode(parts[1]),
            let decoded = try? JSONDecoder().decode(DecodedClaims.self, from: payload)
        else { return nil }
        return Claims(expiresAt: decoded.exp, issuedAt: decoded.iat, subject: decoded.sub, username: decoded.username)
    }

    /// The `exp` claim, or nil when `token` is no JWT or has no numeric `exp`.
    public static func expiry(of token: String) -> Double? {
        claims(of: token)?.expiresAt
    }

    /// Base64url (RFC 4648 §5), with or without `=` padding.
    static func base64URLDecode(_ text: Substring) -> Data? {
        var base64 = String(text)
        while base64.hasSuffix("=") { base64.removeLast() }
        guard !base64.isEmpty else { return nil }
        var bytes = Array(base64.utf8)
        for index in bytes.indices {
            switch bytes[index] {
            case UInt8(ascii: "-"): bytes[index] = UInt8(ascii: "+")
            case UInt8(ascii: "_"): bytes[index] = UInt8(ascii: "/")
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"):
                break
            default:
                return nil  // includes "+" and "/": standard base64 is not base64url
            }
        }
        switch bytes.count % 4 {
        case 0: break
        case 1: return nil  // no encoder produces this length
        case 2: bytes.append(contentsOf: [UInt8(ascii: "="), UInt8(ascii: "=")])
        case 3: bytes.append(UInt8(ascii: "="))
        default: return nil
        }
        return Data(base64Encoded: Data(bytes))
    }

    /// Decodes when the text is a JSON object, whatever its members (with JSONDecoder rather than
    /// JSONSerialization, which would page in the rest of Foundation for this one check).
    private struct JSONObjectCheck: Decodable {
        struct AnyKey: CodingKey {
            var stringValue: String
            var intValue: Int? { nil }
            init(stringValue: String) { self.stringValue = stringValue }
            init?(intValue: Int) { nil }
        }
        init(from decoder: Decoder) throws { _ = try decoder.container(keyedBy: AnyKey.self) }
    }

    /// Lenient: a claim of the wrong type counts as absent.
    private struct DecodedClaims: Decodable {
        var exp: Double?
        var iat: Double?
        var sub: String?
        var username: String?

        enum CodingKeys: String, CodingKey { case exp, iat, sub, username }

        init(from decoder: Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            exp = (try? container.decodeIfPresent(Double.self, forKey: .exp)).flatMap { $0 }
            iat = (try? container.decodeIfPresent(Double.self, forKey: .iat)).flatMap { $0 }
            sub = (try? container.decodeIfPresent(String.self, forKey: .sub)).flatMap { $0 }
            username = (try? container.decodeIfPresent(String.self, forKey: .username)).flatMap { $0 }
            if let exp, !exp.isFinite { self.exp = nil }
        }
    }
}
