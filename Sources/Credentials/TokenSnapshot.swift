/// One access token as the request path sees it: immutable, published by the single writer
/// (`TokenManager`) and read with one lock-protected load per request (ARCHITECTURE.md
/// "Tokens off the hot path").
public final class TokenSnapshot: Sendable {
    public let accessToken: String
    /// `Bearer <token>` as bytes, built once so the hot path copies bytes and formats nothing.
    public let authorizationValue: [UInt8]
    /// Seconds since the epoch; nil when the token does not expire (static tokens).
    public let expiresAt: Double?
    public let issuedAt: Double
    /// Grows by one with every new token; a 401 names the generation it was sent with.
    public let generation: UInt64

    public init(accessToken: String, expiresAt: Double?, issuedAt: Double, generation: UInt64) {
        self.accessToken = accessToken
        self.authorizationValue = Array("Bearer \(accessToken)".utf8)
        self.expiresAt = expiresAt
        self.issuedAt = issuedAt
        self.generation = generation
    }

    public func isValid(at now: Double) -> Bool {
        guard let expiresAt else { return true }
        return now < expiresAt
    }
}
