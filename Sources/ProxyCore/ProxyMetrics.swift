import Synchronization

/// Every series /metrics exposes, in one place (Envoy's habit). Counters that the request path
/// bumps live per event loop behind an uncontended Mutex; the admin handler sums them.
final class LoopMetrics: Sendable {
    struct Counters {
        var requestsByCode: [Int: Int] = [:]
        var upstream401Retries = 0
        var requestsWaitedForToken = 0
        var bytesFromClients = 0
        var bytesToClients = 0
        var tunnelsOpened = 0
        var tunnelsClosed = 0
        /// Requests sent again on a fresh upstream connection after a reused one failed before answering.
        var retriesOnFreshConnection = 0
        /// Upstream latency (to the response head), cumulative buckets as Prometheus wants them.
        var latencyBuckets = [Int](repeating: 0, count: LoopMetrics.latencyBounds.count)
        var latencyCount = 0
        var latencySum = 0.0
    }

    static let latencyBounds: [Double] = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60]

    let counters = Mutex(Counters())

    func requestFinished(status: Int, bytesIn: Int, bytesOut: Int) {
        counters.withLock {
            $0.requestsByCode[status, default: 0] += 1
            $0.bytesFromClients += bytesIn
            $0.bytesToClients += bytesOut
        }
    }

    func upstreamLatency(_ seconds: Double) {
        counters.withLock {
            for (i, bound) in LoopMetrics.latencyBounds.enumerated() where seconds <= bound { $0.latencyBuckets[i] += 1 }
            $0.latencyCount += 1
            $0.latencySum += seconds
        }
    }

    func tunnelOpened() { counters.withLock { $0.tunnelsOpened += 1 } }
    func tunnelClosed() { counters.withLock { $0.tunnelsClosed += 1 } }
    func retriedOnFreshConnection() { counters.withLock { $0.retriesOnFreshConnection += 1 } }
    func retriedAfter401() { counters.withLock { $0.upstream401Retries += 1 } }
    func waitedForToken() { counters.withLock { $0.requestsWaitedForToken += 1 } }
}

/// State shared by all loops: open connections, retry memory, the refresh-storm guard.
final class SharedProxyState: Sendable {
    let openConnections = Atomic<Int>(0)
    let retryMemoryInUse = Atomic<Int>(0)
    /// Monotonic time until which upstream 401s are passed through without a refresh (CONTRACT point 3).
    private let stormGuardUntil = Mutex<Double>(0)
    let draining = Atomic<Bool>(false)

    func refusingGoodTokens(now: Double) -> Bool { stormGuardUntil.withLock { now < $0 } }
    func upstreamRefusedFreshToken(now: Double) { stormGuardUntil.withLock { $0 = now + 30 } }

    /// Reserves `bytes` of the shared retry budget; false when it would exceed `limit`.
    func reserveRetryMemory(_ bytes: Int, limit: Int) -> Bool {
        while true {
            let current = retryMemoryInUse.load(ordering: .relaxed)
            if current + bytes > limit { return false }
            if retryMemoryInUse.compareExchange(expected: current, desired: current + bytes, ordering: .relaxed).exchanged { return true }
        }
    }

    func releaseRetryMemory(_ bytes: Int) {
        retryMemoryInUse.subtract(bytes, ordering: .relaxed)
    }
}
