/// One access token as the request path sees it: immutable, published by the single writer
/// (`TokenManager`) and read with one lock-protected load per request (ARCHITECTURE.md
/// "Tokens off the hot path").
public final class TokenSnapshot: Sendable {
    public let accessToken: String
    /// `Authorization: Bearer <token>\r\n` as bytes, built once so the hot path copies one line and
    /// formats nothing.
    public let authorizationField: [UInt8]
    /// Seconds since the epoch; nil when the token does not expire (static tokens).
    public let expiresAt: Double?
    public let issuedAt: Double
    /// Grows by one with every new token; a 401 names the generation it was sent with.
    public let generation: UInt64
    /// Set for a DPoP-bound token (RFC 9449 §7.1): `authorizationField` says `DPoP <token>` and every
    /// request carries a fresh proof. nil for a Bearer token: the request path tests only this.
    public let dpop: DPoPBinding?
    /// Set for `type: aws`: the credentials that sign each request (SigV4) instead of a token in a
    /// field; `accessToken` is then their container-endpoint JSON (what `tokenproxy token` prints).
    public let aws: AWSSigningCredentials?

    public init(
        accessToken: String, expiresAt: Double?, issuedAt: Double, generation: UInt64, dpop: DPoPProver? = nil,
        aws: AWSSigningCredentials? = nil
    ) {
        self.accessToken = accessToken
        self.aws = aws
        self.dpop = dpop.map { DPoPBinding(prover: $0, accessToken: accessToken) }
        self.authorizationField = Array("Authorization: \(dpop == nil ? "Bearer" : "DPoP") \(accessToken)\r\n".utf8)
        self.expiresAt = expiresAt
        self.issuedAt = issuedAt
        self.generation = generation
    }

    public func isValid(at now: Double) -> Bool {
        guard let expiresAt else { return true }
        return now < expiresAt
    }
}
