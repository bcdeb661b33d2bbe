import Foundation

/// Turns what a source handed over into an expiry (CONTRACT.md point 2): the JWT `exp` claim wins,
/// then the answer's `expires_at`, then its `expires_in`, then the source's default lifetime.
enum TokenExpiry {
    static func resolve(_ issued: IssuedToken, now: Double, defaultLifetime: Double?) -> Double? {
        let skew = clockSkew(issued, now: now) ?? 0
        if let exp = JWT.expiry(of: issued.accessToken) { return exp - skew }
        if let expiresAt = issued.expiresAt, expiresAt.isFinite { return expiresAt - skew }
        if let expiresIn = issued.expiresIn, expiresIn.isFinite { return now + expiresIn }
        if let defaultLifetime { return now + defaultLifetime }
        return nil
    }

    /// Beyond this many seconds between the identity provider's `Date` and our clock, absolute expiry
    /// times (a JWT's `exp`, an answer's `expires_at`) are moved by the difference.
    static let skewTolerance: Double = 5

    /// The identity provider's clock minus ours, when it is off by more than the tolerance.
    static func clockSkew(_ issued: IssuedToken, now: Double) -> Double? {
        guard let serverDate = issued.serverDate, serverDate.isFinite else { return nil }
        let skew = serverDate - now
        return abs(skew) > skewTolerance ? skew : nil
    }
}

/// What may go into `Authorization: Bearer <token>`.
enum BearerToken {
    /// Visible ASCII only: an empty token, a space, CR, LF, another control character or a non-ASCII
    /// byte would break or smuggle the header (RFC 9110 §5.5; RFC 6750 §2.1 allows far less).
    static func isUsable(_ token: String) -> Bool {
        var count = 0
        for byte in token.utf8 {
            guard byte >= 0x21 && byte <= 0x7E else { return false }
            count += 1
        }
        return count > 0
    }
}

/// RFC 3339 timestamps (`2026-11-22T03:00:00Z`, with or without a fraction, any offset).
enum RFC3339 {
    static func parse(_ text: String) -> Double? {
        // RFC 3339 §5.6 is ASCII; other text never reaches Foundation's date parsers, which are not
        // safe on every non-ASCII input (docs/RELIABILITY.md, fuzzing findings).
        guard text.utf8.count <= 64, text.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else { return nil }
        let plain = ISO8601DateFormatter()
        plain.formatOptions = [.withInternetDateTime]
        if let date = plain.date(from: text) { return date.timeIntervalSince1970 }
        let fractional = ISO8601DateFormatter()
        fractional.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        if let date = fractional.date(from: text) { return date.timeIntervalSince1970 }
        return nil
    }
}
