import Config
import Credentials
import Logs
import Synchronization
import TLS
import Telemetry
import Upstream

/// The counters of one event loop. Touched only on its loop's thread: the request path bumps plain
/// fields (no lock, no atomic, nothing another core writes), and a scrape reads a copy through the
/// loop's own task queue (`Server.collectMetrics`), then sums the loops. Every series is declared
/// once, in `MetricCatalog`, and rendered through a `MetricRegistry`.
// @unchecked: see above; it crosses threads only as a reference handed to its own loop.
final class LoopMetrics: @unchecked Sendable {
    struct Counters: Sendable {
        /// Requests answered, indexed by status code (100 to 999: an upstream's status passes as it
        /// came): a dictionary cost about 150 instructions a request in hashing.
        var requestsByCode = [Int](repeating: 0, count: 1000)
        var upstream401Retries = 0
        var requestsWaitedForToken = 0
        var bytesFromClients = 0
        var bytesToClients = 0
        var tunnelsOpened = 0
        var tunnelsClosed = 0
        var tlsHandshakeFailures = 0
        /// CONNECTs refused before any route was known, by `ForwardProxyOutcome.rawValue`.
        var unroutedConnects = [Int](repeating: 0, count: ForwardProxyOutcome.allCases.count)
        /// Requests sent again on a fresh upstream connection after a reused one failed before answering.
        var retriesOnFreshConnection = 0
        /// Request fields left out because their names hold an underscore.
        var droppedUnderscoreFields = 0
        /// Upstream latency (to the response head), with the bounds the series had before issue 22.
        var upstreamLatency = Histogram(bounds: LoopMetrics.latencyBounds)
        /// Per route, at the index `SharedProxyState.routeSlot` gave its name.
        var routes: [RouteCounters] = []

        /// Adds another loop's counts (the admin handler sums the loops).
        mutating func add(_ other: Counters) {
            for code in requestsByCode.indices { requestsByCode[code] += other.requestsByCode[code] }
            for series in LoopMetrics.plainCounters { self[keyPath: series.field] += other[keyPath: series.field] }
            tunnelsClosed += other.tunnelsClosed  // only for tokenproxy_open_tunnels
            for i in unroutedConnects.indices { unroutedConnects[i] += other.unroutedConnects[i] }
            upstreamLatency.add(other.upstreamLatency)
            while routes.count < other.routes.count { routes.append(RouteCounters()) }
            for i in other.routes.indices { routes[i].add(other.routes[i]) }
        }

        /// Upstream connections closed for `reason`, over every route.
        func upstreamRetirements(_ reason: UpstreamRetirement) -> Int { routes.reduce(0) { $0 + $1.retirements[reason.rawValue] } }
    }

    /// One plain counter: its family in `MetricCatalog` and the field that counts it.
    struct CounterSeries {
        let family: MetricFamily
        let field: WritableKeyPath<Counters, Int>
    }

    /// The loops' plain counters; `Counters.add` sums them and `MetricsRenderer` gives them to the
    /// registry in this order.
    static var plainCounters: [CounterSeries] {
        [
            CounterSeries(family: MetricCatalog.upstream401RetriesTotal, field: \.upstream401Retries),
            CounterSeries(family: MetricCatalog.requestsWaitedForTokenTotal, field: \.requestsWaitedForToken),
            CounterSeries(family: MetricCatalog.clientReceivedBytesTotal, field: \.bytesFromClients),
            CounterSeries(family: MetricCatalog.clientSentBytesTotal, field: \.bytesToClients),
            CounterSeries(family: MetricCatalog.tunnelsTotal, field: \.tunnelsOpened),
            CounterSeries(family: MetricCatalog.upstreamFreshConnectionRetriesTotal, field: \.retriesOnFreshConnection),
            CounterSeries(family: MetricCatalog.droppedHeaderFieldsTotal, field: \.droppedUnderscoreFields),
            CounterSeries(family: MetricCatalog.tlsHandshakeFailuresTotal, field: \.tlsHandshakeFailures),
        ]
    }

    static let latencyBounds: [Double] = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60]

    var counters = Counters()
    private let shared: SharedProxyState

    init(shared: SharedProxyState) { self.shared = shared }

    /// The metrics slot of route `name` on this loop (called on the loop's thread, when a route is built).
    func slot(for name: String) -> Int {
        let slot = shared.routeSlot(name)
        while counters.routes.count <= slot { counters.routes.append(RouteCounters()) }
        return slot
    }

    func requestFinished(status: Int, bytesIn: Int, bytesOut: Int) {
        counters.requestsByCode[min(max(status, 0), 999)] += 1
        counters.bytesFromClients += bytesIn
        counters.bytesToClients += bytesOut
    }

    /// A routed request's end: the loop's counts and its route's (`slot`), in one call, as each
    /// call through the loop context's `metrics` retains and releases it (docs/ENGINE.md).
    @inline(__always)
    func requestFinished(status: Int, bytesIn: Int, bytesOut: Int, slot: Int, seconds: Double) {
        requestFinished(status: status, bytesIn: bytesIn, bytesOut: bytesOut)
        counters.routes[slot].requestFinished(status: status, seconds: seconds)
    }

    func upstreamLatency(_ seconds: Double) {
        counters.upstreamLatency.observe(seconds)
    }

    /// An answer's head came: the loop's latency since the try started (`latency`) and the route's
    /// since the request's last byte went up (`seconds`), in one call (see `requestFinished`).
    @inline(__always)
    func upstreamAnswered(latency: Double, slot: Int, seconds: Double) {
        upstreamLatency(latency)
        counters.routes[slot].upstreamResponse.observe(seconds)
    }

    func tunnelOpened() { counters.tunnelsOpened += 1 }
    func tunnelClosed() { counters.tunnelsClosed += 1 }
    func retriedOnFreshConnection() { counters.retriesOnFreshConnection += 1 }
    func retriedAfter401() { counters.upstream401Retries += 1 }
    func waitedForToken() { counters.requestsWaitedForToken += 1 }
    func droppedUnderscoreFields(_ n: Int) { counters.droppedUnderscoreFields += n }
    func tlsHandshakeFailed() { counters.tlsHandshakeFailures += 1 }

    func forwardProxyConnect(route: LoopRoute?, outcome: ForwardProxyOutcome) {
        if let route {
            counters.routes[route.metricsSlot].connects[outcome.rawValue] += 1
        } else {
            counters.unroutedConnects[outcome.rawValue] += 1
        }
    }
}

/// What the forward proxy made of a CONNECT, for `tokenproxy_forward_proxy_connects_total{outcome}`.
enum ForwardProxyOutcome: Int, CaseIterable, Sendable {
    /// Answered 200; the proxy ends TLS for a route's host.
    case intercepted
    /// `other_hosts: tunnel`: answered 200 and carried byte for byte.
    case tunnelled
    /// Answered 403, or 502 when no certificate could be made or the host could not be reached.
    case refused

    var label: String {
        switch self {
        case .intercepted: "intercepted"
        case .tunnelled: "tunnelled"
        case .refused: "refused"
        }
    }
}

/// What happened to a request whose upstream answered 401 (CONTRACT point 3), for
/// `tokenproxy_upstream_401_total{result}`.
enum Upstream401Result: Int, CaseIterable, Sendable {
    /// Sent again with another token.
    case retried
    /// The upstream's 401 went to the client: no other token came, or the storm guard was on.
    case passedThrough
    /// The refresh said the session is over: 401 login_required.
    case loginRequired
    /// No token within `refresh_wait`: 503 token_unavailable.
    case unavailable

    var label: String {
        switch self {
        case .retried: return "retried"
        case .passedThrough: return "passed_through"
        case .loginRequired: return RefreshOutcome.loginRequiredCode
        case .unavailable: return RefreshOutcome.tokenUnavailableCode
        }
    }
}

/// One route's counters on one loop (issue 22): latency histograms, the upstream pool, 401s.
struct RouteCounters: Sendable {
    /// `tokenproxy_request_duration_seconds`, by the status's class (index 0: 1xx … 4: 5xx).
    var requestDuration = [Histogram](repeating: Histogram(), count: 5)
    var upstreamResponse = Histogram()
    /// `tokenproxy_upstream_connect_seconds`: index 0 plain TCP, 1 TLS.
    var upstreamConnect = [Histogram](repeating: Histogram(), count: 2)
    var tokenWait = Histogram()
    var connectionsOpened = 0
    var connectionsReused = 0
    /// Upstream connections closed, indexed by `UpstreamRetirement.rawValue`.
    var retirements = [Int](repeating: 0, count: UpstreamRetirement.allCases.count)
    /// Idle upstream connections: filled in when the loop is asked for its counts, not counted.
    var idleConnections = 0
    var upstreamSentBytes = 0
    var upstreamReceivedBytes = 0
    /// `tokenproxy_scrubbed_total`: credential values replaced in answers.
    var scrubbed = 0
    /// Indexed by `Upstream401Result.rawValue`.
    var upstream401 = [Int](repeating: 0, count: Upstream401Result.allCases.count)
    var stormGuardActivations = 0
    /// CONNECTs to this route's host, by `ForwardProxyOutcome.rawValue`.
    var connects = [Int](repeating: 0, count: ForwardProxyOutcome.allCases.count)
    /// Requests answered, by status (`tokenproxy_requests_total{route,code}` with `routes:`): per
    /// loop like every other count, no lock shared between loops.
    var requestsByCode = [Int](repeating: 0, count: 1000)

    mutating func requestFinished(status: Int, seconds: Double) {
        requestDuration[RouteCounters.codeClass(status)].observe(seconds)
        requestsByCode[min(max(status, 0), 999)] += 1
    }

    /// The index of a status's class in `requestDuration` (a status outside 100…599 counts as 5xx).
    static func codeClass(_ status: Int) -> Int { (100..<600).contains(status) ? status / 100 - 1 : 4 }

    mutating func add(_ other: RouteCounters) {
        for i in requestDuration.indices { requestDuration[i].add(other.requestDuration[i]) }
        upstreamResponse.add(other.upstreamResponse)
        for i in upstreamConnect.indices { upstreamConnect[i].add(other.upstreamConnect[i]) }
        tokenWait.add(other.tokenWait)
        connectionsOpened += other.connectionsOpened
        connectionsReused += other.connectionsReused
        for i in retirements.indices { retirements[i] += other.retirements[i] }
        idleConnections += other.idleConnections
        upstreamSentBytes += other.upstreamSentBytes
        upstreamReceivedBytes += other.upstreamReceivedBytes
        scrubbed += other.scrubbed
        for i in upstream401.indices { upstream401[i] += other.upstream401[i] }
        stormGuardActivations += other.stormGuardActivations
        for i in connects.indices { connects[i] += other.connects[i] }
        for code in requestsByCode.indices { requestsByCode[code] += other.requestsByCode[code] }
    }
}

/// State shared by all loops: open connections, retry memory, spooled bodies, the refresh-storm guard.
final class SharedProxyState: Sendable {
    let openConnections = Atomic<Int>(0)
    let retryMemoryInUse = Atomic<Int>(0)
    /// Bytes of request bodies in spool files, all routes together.
    let spoolBytesInUse = Atomic<Int>(0)
    let draining = Atomic<Bool>(false)
    /// `audit:`'s file (AuditLines.swift); written only while the loops' `auditing` is set.
    let audit = AuditLog()
    /// Failed client handshakes are logged once a minute per client address (CONTRACT "HTTPS for clients").
    let handshakeFailureLog = FailureLogLimit()
    /// Route names in the order their metrics slots were given (slots outlive reloads, so a route
    /// kept by a reload keeps its counters; a removed route's last counts stay in /metrics).
    private let routeSlots = Mutex<[String]>([])

    /// The metrics slot of route `name`, given on first use.
    func routeSlot(_ name: String) -> Int {
        routeSlots.withLock { names in
            if let i = names.firstIndex(of: name) { return i }
            names.append(name)
            return names.count - 1
        }
    }

    var routeNames: [String] { routeSlots.withLock { $0 } }

    /// Reserves `bytes` of the shared retry budget; false when it would exceed `limit`.
    func reserveRetryMemory(_ bytes: Int, limit: Int) -> Bool {
        Self.reserve(bytes, of: retryMemoryInUse, limit: limit)
    }

    func releaseRetryMemory(_ bytes: Int) {
        retryMemoryInUse.subtract(bytes, ordering: .relaxed)
    }

    /// Reserves `bytes` of the spool folder's budget (`forward.request_buffering_disk_total`); false
    /// when it would exceed `limit`.
    func reserveSpool(_ bytes: Int, limit: Int) -> Bool {
        Self.reserve(bytes, of: spoolBytesInUse, limit: limit)
    }

    func releaseSpool(_ bytes: Int) {
        spoolBytesInUse.subtract(bytes, ordering: .relaxed)
    }

    private static func reserve(_ bytes: Int, of inUse: borrowing Atomic<Int>, limit: Int) -> Bool {
        while true {
            let current = inUse.load(ordering: .relaxed)
            if current + bytes > limit { return false }
            if inUse.compareExchange(expected: current, desired: current + bytes, ordering: .relaxed).exchanged { return true }
        }
    }
}

// MARK: one exchange's record

/// What the metrics and the access log report of one exchange (docs/OBSERVABILITY.md): set only
/// through its methods, as the exchange goes.
struct ExchangeRecord {
    /// The status the client got (0: none yet).
    private(set) var status = 0
    private(set) var bytesOut = 0
    /// The contract's error code when the proxy answered itself.
    private(set) var refusal: String?
    /// The status the upstream answered (0: none), before any retry's.
    private(set) var upstreamStatus = 0
    /// Seconds from the last request written to the response head (nil: no head came).
    private(set) var upstreamSeconds: Double?
    /// A retry went up after a 401 (the access log's `retried_401`; the machine's
    /// `retryAfter401Used` is the decision that the one retry was taken).
    private(set) var retriedAfter401 = false
    /// Seconds spent waiting for a token, over every wait.
    private(set) var tokenWaitSeconds = 0.0
    /// When the current wait for a token started (0: not waiting).
    private var tokenWaitStartedAt = 0.0
    /// The caller whose placeholder the request carried (CONTRACT.md "Programs in a sandbox": a
    /// `callers_file` name, or `default`); nil on a route without `placeholder`.
    private(set) var caller: String?
    /// The request was counted and logged (`Connection.recordFinished`).
    private(set) var recorded = false
    /// Its trace (nil: telemetry is off; RequestTrace.swift).
    var trace: RequestTrace?
    /// Its audit line was written (`Connection.audit`).
    private(set) var audited = false
    /// Credential values replaced in the answer (`scrub`; the audit line's `scrubbed`).
    private(set) var scrubbed = 0

    /// The client gets this status (a head written, or one of the proxy's own answers).
    mutating func answered(status: Int, refusal: String? = nil) {
        self.status = status
        if let refusal { self.refusal = refusal }
    }

    /// An answer that will not be complete: `status` when none was given yet (502 for an upstream
    /// failure, 499 for a client gone).
    mutating func endedShort(status: Int) {
        if self.status == 0 { self.status = status }
    }

    mutating func wroteOut(_ n: Int) {
        bytesOut += n
    }

    /// The upstream's final head arrived after `seconds`; the first status is the one logged.
    mutating func upstreamAnswered(status: Int, seconds: Double) {
        upstreamSeconds = seconds
        if upstreamStatus == 0 { upstreamStatus = status }
        trace?.attemptAnswered(status: status)
    }

    mutating func identified(caller: String?) {
        self.caller = caller
    }

    mutating func scrubbed(_ n: Int) {
        scrubbed += n
    }

    mutating func retriedAfter401Sent() {
        retriedAfter401 = true
    }

    mutating func tokenWaitStarted(now: Double) {
        tokenWaitStartedAt = now
        trace?.waitStarted()
    }

    /// An upstream attempt starts: the `traceparent` it carries (nil: telemetry is off).
    mutating func attemptStarted() -> TraceParent? {
        trace?.attemptStarted()
    }

    /// Counts the wait that just ended; answers its seconds (nil: this was no wait).
    mutating func tokenWaitEnded(now: Double) -> Double? {
        guard tokenWaitStartedAt > 0 else { return nil }
        let waited = now - tokenWaitStartedAt
        tokenWaitStartedAt = 0
        tokenWaitSeconds += waited
        trace?.waitEnded()
        return waited
    }

    /// True the first time: the request has one audit line.
    mutating func markAudited() -> Bool {
        guard !audited else { return false }
        audited = true
        return true
    }

    /// True the first time: the request is counted and logged once.
    mutating func markRecorded() -> Bool {
        guard !recorded else { return false }
        recorded = true
        return true
    }
}
