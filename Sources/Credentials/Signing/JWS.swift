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

    /// Compact JSON (RFC 8259), strings escaped per §7.
    func json(into out: inout String) {
        switch self {
        case .string(let text):
            out.append("\"")
            for scalar in text.unicodeScalars {
                switch scalar {
                case "\"": out.append("\\\"")
                case "\\": out.append("\\\\")
                case "\n": out.append("\\n")
                case "\r": out.append("\\r")
                case "\t": out.append("\\t")
                default:
                    if scalar.value < 0x20 {
                        let hex = String(scalar.value, radix: 16)
                        out.append("\\u" + String(repeating: "0", count: 4 - hex.count) + hex)
                    } else {
                        out.unicodeScalars.append(scalar)
                    }
                }
            }
            out.append("\"")
        case .int(let value):
            out.append(String(value))
        case .object(let members):
            out.append("{")
            for (index, member) in members.enumerated() {
                if index > 0 { out.append(",") }
                JOSEValue.string(member.0).json(into: &out)
                out.append(":")
                member.1.json(into: &out)
            }
            out.append("}")
        }
    }

    var json: String {
        var out = ""
        json(into: &out)
        return out
    }
}

enum Base64URL {
    /// RFC 4648 §5 without padding (RFC 7515 §2).
    static func encode<Bytes: Sequence>(_ bytes: Bytes) -> String where Bytes.Element == UInt8 {
        var text = Data(bytes).base64EncodedString()
        while text.last == "=" { text.removeLast() }
        return String(
            text.map { character -> Character in
                switch character {
                case "+": return "-"
                case "/": return "_"
                default: return character
                }
            })
    }
}

/// JWS compact serialization (RFC 7515 §7.1): base64url(header) "." base64url(claims) "." base64url(signature).
enum JWS {
    static func sign(header: [(String, JOSEValue)], claims: [(String, JOSEValue)], key: SigningKey) throws -> String {
        let input = Base64URL.encode(Array(JOSEValue.object(header).json.utf8)) + "." + Base64URL.encode(Array(JOSEValue.object(claims).json.utf8))
        let signature = try key.sign(Array(input.utf8))
        return input + "." + Base64URL.encode(signature)
    }

    /// A random `jti` (RFC 7519 §4.1.7): 128 bits, never reused.
    static func randomID() -> String {
        var generator = SystemRandomNumberGenerator()
        return Base64URL.encode((0..<16).map { _ in UInt8.random(in: .min ... .max, using: &generator) })
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
