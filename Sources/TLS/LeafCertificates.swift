import Sockets

/// The forward proxy's host certificates, minted on first use and kept in memory until a quarter of
/// their lifetime is left (`LeafValidity`). Shared by every event loop; minting (an EC key and a
/// signature, about a millisecond) happens under the lock, so two loops never mint the same host twice.
// @unchecked: `cached` is touched only with `lock` held.
public final class LeafCertificates: @unchecked Sendable {
    public let authority: CertificateAuthority
    public let lifetime: Double
    /// At most this many hosts are kept (a `*.` route admits any number of names).
    public let capacity: Int
    private let clock: @Sendable () -> Double
    private let lock = OSCondition()
    private var cached: [CertificateName: (pair: CertificatePair, validity: LeafValidity)] = [:]

    public init(authority: CertificateAuthority, lifetime: Double, capacity: Int = 1024, clock: @escaping @Sendable () -> Double = Syscall.wallClock) {
        self.authority = authority
        self.lifetime = lifetime
        self.capacity = capacity
        self.clock = clock
    }

    /// The certificate for `host` (a DNS name or an IP literal), minted when none is cached or the
    /// cached one is past three quarters of its life.
    public func certificate(for host: String) throws(TLSSetupError) -> CertificatePair {
        guard let name = CertificateName(host) else { throw .invalidHostName(host) }
        let now = clock()
        lock.lock()
        defer { lock.unlock() }
        if let entry = cached[name], entry.validity.isReusable(at: now, lifetime: lifetime) { return entry.pair }
        if cached.count >= capacity { evict(at: now) }
        let validity = LeafValidity(madeAt: now, lifetime: lifetime)
        let pair = try authority.issue(for: name, validity: validity)
        cached[name] = (pair, validity)
        return pair
    }

    public var count: Int {
        lock.lock()
        defer { lock.unlock() }
        return cached.count
    }

    /// Drops the certificates due for renewal; when all are fresh, one of them.
    private func evict(at now: Double) {
        cached = cached.filter { $0.value.validity.isReusable(at: now, lifetime: lifetime) }
        if cached.count >= capacity, let any = cached.keys.first { cached[any] = nil }
    }
}
