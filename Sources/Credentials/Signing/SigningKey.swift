import Config
import Crypto
import CryptoExtras
import FoundationEssentials
import Sockets

/// Why a key file cannot sign; the text never holds key material.
struct KeyProblem: Error, Sendable, CustomStringConvertible {
    let description: String
}

/// A key the proxy signs JWTs with, and its JWS `alg` (RFC 7518 §3.1).
struct SigningKey: Sendable {
    enum Material: Sendable {
        case rsa(_RSA.Signing.PrivateKey, pss: Bool)
        case ec(P256.Signing.PrivateKey)
        case hmac(SymmetricKey)
    }

    let material: Material
    let keyID: String?

    /// "RS256", "PS256", "ES256" or "HS256".
    var algorithm: String {
        switch material {
        case .rsa(_, let pss): return pss ? "PS256" : "RS256"
        case .ec: return "ES256"
        case .hmac: return "HS256"
        }
    }

    /// HS256 with the client secret (client_secret_jwt, RFC 7518 §3.2).
    static func hmac(secret: String) -> SigningKey {
        SigningKey(material: .hmac(SymmetricKey(data: Array(secret.utf8))), keyID: nil)
    }

    /// An RSA (2048 bits or more) or EC P-256 private key in PEM (PKCS #8, PKCS #1 or SEC 1).
    /// `algorithm` must suit the key; nil takes RS256 for RSA and ES256 for EC.
    static func pem(_ text: String, algorithm: SigningAlgorithm?, keyID: String?) throws(KeyProblem) -> SigningKey {
        guard text.contains("-----BEGIN") else { throw KeyProblem(description: "holds no PEM block (-----BEGIN ...)") }
        if text.contains("ENCRYPTED") { throw KeyProblem(description: "is an encrypted PEM key; give the key unencrypted (a file only the proxy can read)") }
        if text.contains("BEGIN CERTIFICATE"), !text.contains("PRIVATE KEY") {
            throw KeyProblem(description: "holds a certificate, not a private key")
        }
        if let ec = try? P256.Signing.PrivateKey(pemRepresentation: text) {
            switch algorithm {
            case nil, .es256?: return SigningKey(material: .ec(ec), keyID: keyID)
            case .rs256?, .ps256?: throw KeyProblem(description: "is an EC P-256 key, which cannot sign \(algorithm!.rawValue) (use ES256)")
            }
        }
        do {
            let rsa = try _RSA.Signing.PrivateKey(pemRepresentation: text)
            switch algorithm {
            case nil, .rs256?: return SigningKey(material: .rsa(rsa, pss: false), keyID: keyID)
            case .ps256?: return SigningKey(material: .rsa(rsa, pss: true), keyID: keyID)
            case .es256?: throw KeyProblem(description: "is an RSA key, which cannot sign ES256 (use RS256 or PS256)")
            }
        } catch let problem as KeyProblem {
            throw problem
        } catch {
            if let short = try? _RSA.Signing.PrivateKey(unsafePEMRepresentation: text) {
                throw KeyProblem(description: "is a \(short.keySizeInBits)-bit RSA key; 2048 bits or more are needed")
            }
        }
        if text.contains("EC PRIVATE KEY") || text.contains("PRIVATE KEY") {
            throw KeyProblem(description: "is not a usable RSA or EC P-256 private key (another curve or key type, or a damaged PEM)")
        }
        throw KeyProblem(description: "holds no private key (-----BEGIN PRIVATE KEY-----, RSA PRIVATE KEY or EC PRIVATE KEY)")
    }

    /// Reads and parses a key file; `keyPath` names the key in the error. A file that appears or
    /// changes after start meets the same mode rule as at start (`KeyFilePermissions`).
    static func file(_ path: String, algorithm: SigningAlgorithm?, keyID: String?, keyPath: String) throws -> SigningKey {
        if let problem = KeyFilePermissions.problem(path) { throw ConfigurationError(keyPath: keyPath, reason: problem) }
        let text: String
        switch SmallFile.read(path, limit: 1 << 20) {
        case .success(let bytes):
            text = String(decoding: bytes, as: UTF8.self)
        case .failure(let failure):
            throw ConfigurationError(keyPath: keyPath, reason: "cannot read \(path): \(failure.description)")
        }
        do {
            return try pem(text, algorithm: algorithm, keyID: keyID)
        } catch {
            throw ConfigurationError(keyPath: keyPath, reason: "\(path) \(error.description)")
        }
    }

    /// Whether the file at `path` holds an RSA private key of any size: for an error that must name
    /// the key's type when another type is needed (DPoP).
    static func fileHoldsRSAKey(_ path: String) -> Bool {
        guard case .success(let bytes) = SmallFile.read(path, limit: 1 << 20) else { return false }
        return (try? _RSA.Signing.PrivateKey(unsafePEMRepresentation: String(decoding: bytes, as: UTF8.self))) != nil
    }

    func sign(_ input: [UInt8]) throws -> [UInt8] {
        switch material {
        case .rsa(let key, let pss):
            // RFC 7518 §3.3 (RSASSA-PKCS1-v1_5) and §3.5 (RSASSA-PSS, MGF1 with SHA-256, salt of 32 bytes).
            let signature = try key.signature(for: SHA256.hash(data: input), padding: pss ? .PSS : .insecurePKCS1v1_5)
            return Array(signature.rawRepresentation)
        case .ec(let key):
            // RFC 7518 §3.4: R and S, 32 bytes each, not DER.
            return Array(try key.signature(for: input).rawRepresentation)
        case .hmac(let key):
            return Array(HMAC<SHA256>.authenticationCode(for: input, using: key))
        }
    }
}
