import Config
import Crypto
import FoundationEssentials
import Synchronization

/// One DPoP key and the proofs made with it (RFC 9449 §4.2): a JWT with the header `typ` dpop+jwt,
/// `alg` ES256 and the public `jwk`, and the claims `jti`, `htm`, `htu`, `iat`, and when they apply
/// `ath` (§4.2: base64url of the SHA-256 of the access token) and `nonce` (§8, §9). The header is
/// the same for every proof, so it is encoded once. Shared by the token thread and every loop.
public final class DPoPProver: Sendable, Equatable {
    let key: P256.Signing.PrivateKey
    /// base64url of the constant protected header, and the "." after it.
    private let encodedHeader: [UInt8]
    /// RFC 7638 JWK thumbprint of the public key: the `jkt` an identity provider binds tokens to.
    public let thumbprint: String
    /// The key in PEM, for a key kept in the store; nil when it comes from `dpop.key_file`.
    let storedPEM: String?
    /// The newest `DPoP-Nonce` each upstream origin gave (§9): a nonce belongs to the server that
    /// issued it (§8, §9), so it goes only into proofs for that origin. The token endpoint's is kept
    /// by the token source and never mixed with these. Newest last; a few origins at most.
    private let upstreamNonces = Mutex<[(origin: String, nonce: String)]>([])
    static let maxNonceOrigins = 16

    init(key: P256.Signing.PrivateKey, storedPEM: String?) {
        self.key = key
        self.storedPEM = storedPEM
        let raw = Array(key.publicKey.rawRepresentation)  // x || y, 32 bytes each
        let x = Base64URL.encode(raw[0..<32])
        let y = Base64URL.encode(raw[32..<64])
        // RFC 7638 §3.2: the required members only, in lexicographic order, no white space.
        let canonical = #"{"crv":"P-256","kty":"EC","x":"\#(x)","y":"\#(y)"}"#
        thumbprint = Base64URL.encode(Array(SHA256.hash(data: Array(canonical.utf8))))
        let header = JOSEValue.object([
            ("typ", .string("dpop+jwt")), ("alg", .string("ES256")),
            ("jwk", .object([("kty", .string("EC")), ("crv", .string("P-256")), ("x", .string(x)), ("y", .string(y))])),
        ])
        var encoded: [UInt8] = []
        Base64URL.encode(header.jsonBytes, into: &encoded)
        encoded.append(UInt8(ascii: "."))
        encodedHeader = encoded
    }

    public static func == (a: DPoPProver, b: DPoPProver) -> Bool { a === b }

    /// A new P-256 key, kept in the store.
    public static func generate() -> DPoPProver {
        let key = P256.Signing.PrivateKey()
        return DPoPProver(key: key, storedPEM: key.pemRepresentation)
    }

    /// The claims of one proof; pure (RFC 9449 §4.2).
    static func claims(method: String, url: String, now: Double, jti: String, accessTokenHash: String?, nonce: String?) -> [(String, JOSEValue)] {
        var claims: [(String, JOSEValue)] = [("jti", .string(jti)), ("htm", .string(method)), ("htu", .string(url)), ("iat", .int(Int(now)))]
        if let accessTokenHash { claims.append(("ath", .string(accessTokenHash))) }
        if let nonce { claims.append(("nonce", .string(nonce))) }
        return claims
    }

    /// `htu` (§4.2): the request's URL without query and fragment.
    static func htu(_ url: String) -> String {
        guard let mark = url.utf8.firstIndex(where: { $0 == UInt8(ascii: "?") || $0 == UInt8(ascii: "#") }) else { return url }
        return String(url[..<mark])
    }

    /// A proof for one request, with `nonce` when given (§4.2).
    public func proof(method: String, url: String, accessTokenHash: String?, nonce: String? = nil, now: Double) -> String {
        String(decoding: proofBytes(method: method, url: url, accessTokenHash: accessTokenHash, nonce: nonce, now: now), as: UTF8.self)
    }

    /// The same as bytes, as the request writer takes them.
    public func proofBytes(method: String, url: String, accessTokenHash: String?, nonce: String? = nil, now: Double) -> [UInt8] {
        let claims = Self.claims(method: method, url: Self.htu(url), now: now, jti: JWS.randomID(), accessTokenHash: accessTokenHash, nonce: nonce)
        var out = encodedHeader
        out.reserveCapacity(encodedHeader.count + 400)
        Base64URL.encode(JOSEValue.object(claims).jsonBytes, into: &out)
        // An ECDSA signature over a valid key does not fail; an empty signature would be refused upstream.
        let signature = (try? key.signature(for: out).rawRepresentation).map(Array.init) ?? []
        out.append(UInt8(ascii: "."))
        Base64URL.encode(signature, into: &out)
        return out
    }

    /// Remembers the `DPoP-Nonce` (§9) that the upstream at `origin` (`scheme://host[:port]`) gave,
    /// for later proofs to that origin.
    public func upstreamGave(nonce: String, origin: String) {
        guard !nonce.isEmpty, nonce.utf8.count <= 512, nonce.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F && $0 != 0x22 && $0 != 0x5C }) else { return }
        upstreamNonces.withLock { nonces in
            nonces.removeAll { $0.origin == origin }
            if nonces.count >= Self.maxNonceOrigins { nonces.removeFirst() }
            nonces.append((origin, nonce))
        }
    }

    /// The newest nonce the upstream at `origin` gave, if any.
    public func upstreamNonce(for origin: String) -> String? {
        upstreamNonces.withLock { nonces in nonces.last { $0.origin == origin }?.nonce }
    }

    /// `ath` of an access token (§4.2).
    public static func accessTokenHash(_ token: String) -> String {
        Base64URL.encode(Array(SHA256.hash(data: Array(token.utf8))))
    }
}

/// A token issued with `token_type: DPoP` and the key it is bound to: what a request needs to send
/// `Authorization: DPoP <token>` and a proof. Built once per token, off the request path.
public final class DPoPBinding: Sendable {
    public let prover: DPoPProver
    /// `ath` of the token.
    public let accessTokenHash: String

    public init(prover: DPoPProver, accessToken: String) {
        self.prover = prover
        accessTokenHash = DPoPProver.accessTokenHash(accessToken)
    }

    /// The `DPoP` field's value for one request to the upstream at `origin` (`url` starts with it),
    /// with that origin's newest nonce.
    public func proof(method: String, url: String, origin: String, now: Double = Date().timeIntervalSince1970) -> [UInt8] {
        prover.proofBytes(method: method, url: url, accessTokenHash: accessTokenHash, nonce: prover.upstreamNonce(for: origin), now: now)
    }
}

/// Where the DPoP key of the oauth2_* types comes from (`credentials.dpop`): the key file, or a key
/// made at the first token request and kept in the store, so that a restart and every proxy of a
/// fleet prove possession of the same key.
final class DPoPKeySource {
    private let file: KeyFile?
    private var prover: DPoPProver?
    private var proverPEM: String?

    init(_ configuration: DPoPConfiguration) throws {
        if let path = configuration.keyFile {
            do {
                file = try KeyFile(path, algorithm: .es256, keyID: nil, keyPath: "credentials.dpop.key_file")
            } catch var error as ConfigurationError {
                // RFC 9449 proofs are ES256 here: an RSA key is no choice. Told by the key itself
                // (read once more, of any size), not by the words of the error.
                if SigningKey.fileHoldsRSAKey(path) {
                    error.reason = "\(path) is an RSA key; DPoP needs an EC P-256 key (ES256)"
                }
                throw error
            }
        } else {
            file = nil
        }
    }

    /// The prover for the key of `session` (a stored key), of the key file, or a new key.
    func prover(for session: StoredSession?) throws -> DPoPProver {
        if let file {
            let key = try file.current()
            guard case .ec(let ec) = key.material else {
                throw TokenSourceError.configuration("credentials.dpop.key_file: not an EC P-256 key")
            }
            if let prover, prover.key.rawRepresentation == ec.rawRepresentation { return prover }
            let made = DPoPProver(key: ec, storedPEM: nil)
            prover = made
            return made
        }
        if let pem = session?.dpopKey {
            if let prover, proverPEM == pem { return prover }
            if let key = try? P256.Signing.PrivateKey(pemRepresentation: pem) {
                registerSecret(pem)
                let made = DPoPProver(key: key, storedPEM: pem)
                prover = made
                proverPEM = pem
                return made
            }
        }
        if let prover, prover.storedPEM != nil { return prover }
        let made = DPoPProver.generate()
        registerSecret(made.storedPEM!)
        prover = made
        proverPEM = made.storedPEM
        return made
    }
}
