import Sockets

/// Handshake failures are logged at most once per client address and minute (CONTRACT.md, "HTTPS
/// for clients"), so a scanner or a client without the CA cannot flood the log. Shared by every loop.
// @unchecked: `lastLogged` is touched only with `lock` held.
public final class FailureLogLimit: @unchecked Sendable {
    public let interval: Double
    /// Addresses remembered at most; past it, the entries older than `interval` are dropped, and if
    /// none is, everything (a flood of addresses then logs once more, never grows memory).
    public let capacity: Int
    private let lock = OSCondition()
    private var lastLogged: [String: Double] = [:]

    public init(interval: Double = 60, capacity: Int = 4096) {
        self.interval = interval
        self.capacity = capacity
    }

    /// True when a failure from `address` at `now` (monotonic seconds) should be logged.
    public func shouldLog(address: String, now: Double) -> Bool {
        lock.lock()
        defer { lock.unlock() }
        if let last = lastLogged[address], now - last < interval { return false }
        if lastLogged.count >= capacity {
            lastLogged = lastLogged.filter { now - $0.value < interval }
            if lastLogged.count >= capacity { lastLogged.removeAll(keepingCapacity: true) }
        }
        lastLogged[address] = now
        return true
    }
}
