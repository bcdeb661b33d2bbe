/// When a minted host certificate is valid and when the cache makes a new one (CONTRACT.md,
/// `forward_proxy.leaf_lifetime`): valid from up to an hour back (clients with a clock behind ours)
/// for `lifetime` from now, and reused until a quarter of the lifetime is left.
public struct LeafValidity: Equatable, Sendable {
    public static let backdating: Double = 3600
    public var notBefore: Double
    public var notAfter: Double

    /// The window of a certificate made at `now` (seconds since the epoch).
    public init(madeAt now: Double, lifetime: Double) {
        notBefore = now - min(Self.backdating, lifetime / 4)
        notAfter = now + lifetime
    }

    /// True while the certificate still has more than a quarter of `lifetime` left at `now`.
    public func isReusable(at now: Double, lifetime: Double) -> Bool {
        notAfter - now > lifetime / 4 && now >= notBefore
    }
}
