import Config
import Synchronization
import Upstream

/// Every series /metrics exposes, in one place (Envoy's habit). Counters that the request path
/// bumps live per event loop behind an uncontended Mutex; the admin handler sums them.
final class LoopMetrics: Sendable {
    struct Counters {
        /// Requests answered, indexed by status code (100 to 999: an upstream's status passes as it
        /// came): a dictionary cost about 150 instructions a request in hashing.
        var requestsByCode = [Int](repeating: 0, count: 1000)
        var upstream401Retries = 0
        var requestsWaitedForToken = 0
        var bytesFromClients = 0
        var bytesToClients = 0
        var tunnelsOpened = 0
        var tunnelsClosed = 0
        /// Requests sent again on a fresh upstream connection after a reused one failed before answering.
        var retriesOnFreshConnection = 0
        /// Request fields left out because their names hold an underscore.
        var droppedUnderscoreFields = 0
        /// Upstream connections closed, by reason (indexed by `UpstreamRetirement.rawValue`; not in
        /// /metrics yet).
        var upstreamRetirements = [Int](repeating: 0, count: UpstreamRetirement.allCases.count)
        /// Upstream latency (to the response head): the requests in each bucket alone (one increment per
        /// request); `MetricsRenderer` makes them cumulative as Prometheus wants them.
        var latencyBuckets = [Int](repeating: 0, count: LoopMetrics.latencyBounds.count)
        var latencyCount = 0
        var latencySum = 0.0

        /// Adds another loop's counts (the admin handler sums the loops).
        mutating func add(_ other: Counters) {
            for code in requestsByCode.indices { requestsByCode[code] += other.requestsByCode[code] }
            for series in LoopMetrics.plainCounters { self[keyPath: series.field] += other[keyPath: series.field] }
            tunnelsClosed += other.tunnelsClosed  // only for tokenproxy_open_tunnels
            for i in upstreamRetirements.indices { upstreamRetirements[i] += other.upstreamRetirements[i] }
            for i in 0..<latencyBuckets.count { latencyBuckets[i] += other.latencyBuckets[i] }
            latencyCount += other.latencyCount
            latencySum += other.latencySum
        }

        /// The latency buckets as Prometheus counts them: each bound's count includes every lower one.
        var cumulativeLatencyBuckets: [Int] {
            var total = 0
            return latencyBuckets.map { total += $0; return total }
        }

        /// Upstream connections closed for `reason`.
        func upstreamRetirements(_ reason: UpstreamRetirement) -> Int { upstreamRetirements[reason.rawValue] }
    }

    /// One plain counter: its series, the help /metrics prints, and the field that counts it.
    struct CounterSeries {
        let name: String
        let type: String
        let help: String
        let field: WritableKeyPath<Counters, Int>
    }

    /// The loops' plain counters, each declared once here; `Counters.add` sums them and
    /// `MetricsRenderer` prints them in this order. (Labelled series and the histogram are written
    /// out in `MetricsRenderer`.)
    static var plainCounters: [CounterSeries] {
        [
            CounterSeries(
                name: "tokenproxy_upstream_401_retries_total", type: "counter", help: "Requests retried once after an upstream 401.",
                field: \.upstream401Retries),
            CounterSeries(
                name: "tokenproxy_requests_waited_for_token_total", type: "counter", help: "Requests that had to wait for a refresh.",
                field: \.requestsWaitedForToken),
            CounterSeries(
                name: "tokenproxy_client_received_bytes_total", type: "counter", help: "Request body bytes received from clients.",
                field: \.bytesFromClients),
            CounterSeries(
                name: "tokenproxy_client_sent_bytes_total", type: "counter", help: "Response bytes sent to clients.", field: \.bytesToClients),
            CounterSeries(
                name: "tokenproxy_tunnels_total", type: "counter",
                help: "Connections that became a tunnel after 101 Switching Protocols (WebSocket).", field: \.tunnelsOpened),
            CounterSeries(
                name: "tokenproxy_upstream_fresh_connection_retries_total", type: "counter",
                help: "Requests sent again on a fresh upstream connection after a reused one closed before answering.",
                field: \.retriesOnFreshConnection),
            CounterSeries(
                name: "tokenproxy_dropped_header_fields_total", type: "counter",
                help: "Request header fields not forwarded because their names hold an underscore (spoofable through WSGI/CGI).",
                field: \.droppedUnderscoreFields),
        ]
    }

    static let latencyBounds: [Double] = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60]

    let counters = Mutex(Counters())

    func requestFinished(status: Int, bytesIn: Int, bytesOut: Int) {
        counters.withLock {
            $0.requestsByCode[min(max(status, 0), 999)] += 1
            $0.bytesFromClients += bytesIn
            $0.bytesToClients += bytesOut
        }
    }

    func upstreamLatency(_ seconds: Double) {
        counters.withLock {
            if let i = LoopMetrics.latencyBounds.firstIndex(where: { seconds <= $0 }) { $0.latencyBuckets[i] += 1 }
            $0.latencyCount += 1
            $0.latencySum += seconds
        }
    }

    func tunnelOpened() { counters.withLock { $0.tunnelsOpened += 1 } }
    func tunnelClosed() { counters.withLock { $0.tunnelsClosed += 1 } }
    func retriedOnFreshConnection() { counters.withLock { $0.retriesOnFreshConnection += 1 } }
    func upstreamRetired(_ reason: UpstreamRetirement) { counters.withLock { $0.upstreamRetirements[reason.rawValue] += 1 } }
    func retriedAfter401() { counters.withLock { $0.upstream401Retries += 1 } }
    func waitedForToken() { counters.withLock { $0.requestsWaitedForToken += 1 } }
    func droppedUnderscoreFields(_ n: Int) { counters.withLock { $0.droppedUnderscoreFields += n } }
}

/// State shared by all loops: open connections, retry memory, the refresh-storm guard.
final class SharedProxyState: Sendable {
    let openConnections = Atomic<Int>(0)
    let retryMemoryInUse = Atomic<Int>(0)
    let draining = Atomic<Bool>(false)

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
