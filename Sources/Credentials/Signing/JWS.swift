import Basics
import Config
import Crypto
import CryptoExtras
import FoundationEssentials

// Everything the proxy signs goes through this file and SigningKey.swift (ARCHITECTURE.md "Routes,
// reload and credential files"): client assertions (RFC 7523 §2.2), jwt-bearer grants (RFC 7523
// §2.1) and DPoP proofs (RFC 9449). The cryptography is swift-crypto's.

/// A JSON value as the proxy writes it into a JOSE header or a claim set, members in order.
enum JOSEValue: Sendable, Equatable {
    case string(String)
    case int(Int)
    case object([(String, JOSEValue)])

    static func == (a: JOSEValue, b: JOSEValue) -> Bool {
        switch (a, b) {
        case (.string(let x), .string(let y)): return x == y
        case (.int(let x), .int(let y)): return x == y
        case (.object(let x), .object(let y)): return x.count == y.count && zip(x, y).allSatisfy { $0.0 == $1.0 && $0.1 == $1.1 }
        default: return false
        }
    }

    /// Compact JSON (RFC 8259) as UTF-8 bytes, strings escaped per §7. Bytes, not String: a DPoP
    /// proof is written for every upstream request.
    func json(into out: inout [UInt8]) {
        switch self {
        case .string(let text):
            out.append(UInt8(ascii: "\""))
            JSONString.appendEscaped(text, to: &out)
            out.append(UInt8(ascii: "\""))
        case .int(let value):
            out.append(contentsOf: String(value).utf8)
        case .object(let members):
            out.append(UInt8(ascii: "{"))
            for (index, member) in members.enumerated() {
                if index > 0 { out.append(UInt8(ascii: ",")) }
                JOSEValue.string(member.0).json(into: &out)
                out.append(UInt8(ascii: ":"))
                member.1.json(into: &out)
            }
            out.append(UInt8(ascii: "}"))
        }
    }

    var jsonBytes: [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(256)
        json(into: &out)
        return out
    }

    var json: String { String(decoding: jsonBytes, as: UTF8.self) }
}

enum Base64URL {
    private static let alphabet: [UInt8] = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)

    /// RFC 4648 §5 without padding (RFC 7515 §2), appended to `out`.
    static func encode<Bytes: Collection>(_ bytes: Bytes, into out: inout [UInt8]) where Bytes.Element == UInt8 {
        out.reserveCapacity(out.count + (bytes.count * 4 + 2) / 3)
        var index = bytes.startIndex
        while index != bytes.endIndex {
            let b0 = bytes[index]
            index = bytes.index(after: index)
            let b1: UInt8? = index != bytes.endIndex ? bytes[index] : nil
            if b1 != nil { index = bytes.index(after: index) }
            let b2: UInt8? = b1 != nil && index != bytes.endIndex ? bytes[index] : nil
            if b2 != nil { index = bytes.index(after: index) }
            out.append(alphabet[Int(b0 >> 2)])
            out.append(alphabet[Int((b0 & 0x03) << 4 | (b1 ?? 0) >> 4)])
            if let b1 { out.append(alphabet[Int((b1 & 0x0F) << 2 | (b2 ?? 0) >> 6)]) }
            if let b2 { out.append(alphabet[Int(b2 & 0x3F)]) }
        }
    }

    static func encode<Bytes: Collection>(_ bytes: Bytes) -> String where Bytes.Element == UInt8 {
        var out: [UInt8] = []
        encode(bytes, into: &out)
        return String(decoding: out, as: UTF8.self)
    }
}

/// JWS compact serialization (RFC 7515 §7.1): base64url(header) "." base64url(claims) "." base64url(signature).
enum JWS {
    static func sign(header: [(String, JOSEValue)], claims: [(String, JOSEValue)], key: SigningKey) throws -> String {
        let input = Base64URL.encode(JOSEValue.object(header).jsonBytes) + "." + Base64URL.encode(JOSEValue.object(claims).jsonBytes)
        let signature = try key.sign(Array(input.utf8))
        return input + "." + Base64URL.encode(signature)
    }

    /// A random `jti` (RFC 7519 §4.1.7): 128 bits, never reused.
    static func randomID() -> String {
        var generator = SystemRandomNumberGenerator()
        let (high, low) = (generator.next(), generator.next())
        return Base64URL.encode((0..<16).map { UInt8(truncatingIfNeeded: ($0 < 8 ? high : low) >> (8 * UInt64($0 % 8))) })
    }
}

/// The JWT that authenticates the client at the token endpoint (RFC 7523 §3, OpenID Connect Core
/// §9): `iss` = `sub` = client_id, `aud`, `iat`, `exp` 60 s later, a fresh random `jti`.
struct ClientAssertionClaims {
    static let lifetime = 60

    static func make(clientID: String, audience: String, now: Double, jti: String) -> [(String, JOSEValue)] {
        let iat = Int(now)
        return [
            ("iss", .string(clientID)), ("sub", .string(clientID)), ("aud", .string(audience)), ("iat", .int(iat)),
            ("exp", .int(iat + lifetime)), ("jti", .string(jti)),
        ]
    }

    /// The protected header: `alg`, `typ` JWT, `kid` when configured.
    static func header(_ key: SigningKey) -> [(String, JOSEValue)] {
        var header: [(String, JOSEValue)] = [("alg", .string(key.algorithm)), ("typ", .string("JWT"))]
        if let kid = key.keyID { header.append(("kid", .string(kid))) }
        return header
    }

    static func sign(clientID: String, audience: String, key: SigningKey, now: Double) throws -> String {
        try JWS.sign(header: header(key), claims: make(clientID: clientID, audience: audience, now: now, jti: JWS.randomID()), key: key)
    }
}

/// The assertion of the jwt-bearer grant when the proxy signs it (RFC 7523 §3: iss, sub, aud, exp, iat, jti).
struct GrantAssertionClaims {
    static func make(issuer: String, subject: String, audience: String, lifetime: Double, now: Double, jti: String) -> [(String, JOSEValue)] {
        let iat = Int(now)
        return [
            ("iss", .string(issuer)), ("sub", .string(subject)), ("aud", .string(audience)), ("iat", .int(iat)),
            ("exp", .int(iat + max(1, Int(lifetime)))), ("jti", .string(jti)),
        ]
    }
}
