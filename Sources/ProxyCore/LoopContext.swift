import Config
import Credentials
import Logging
import Logs
import Sockets
import Upstream

/// What every connection of one event loop shares: built once per loop, touched only on its thread
/// (apart from the Sendable parts: tokens, metrics, shared state).
final class LoopContext {
    let loop: EventLoop
    /// The global settings (limits, log); a reload replaces it with `routes`.
    var configuration: Configuration
    /// The routes requests are matched to; an exchange keeps the route it started with.
    var routes: LoopRoutes
    /// `forward_proxy`'s CA and tunnel context (nil: CONNECT is 405); a reload replaces it.
    var forwardProxy: ForwardProxyTLS? { didSet { servesConnect = forwardProxy != nil } }
    /// `forwardProxy != nil`, for the per-request test (no retain and release).
    private(set) var servesConnect = false
    let metrics: LoopMetrics
    /// Traces and the audit records' trace ids (nil: no telemetry; RequestTracer.swift).
    var tracer: RequestTracer?
    let shared: SharedProxyState
    let logger: Logger
    /// `limits:` an exchange is bounded by, as `ExchangeMachine.onTick` takes them.
    var timeouts: ExchangeMachine.Timeouts
    var connections: [Int32: Connection] = [:]
    /// `audit:` is set (`AuditLines.swift`), and the loop's lines of a turn, written at its end.
    private(set) var auditing: Bool
    let auditBatch: AuditBatch
    /// One read buffer for every client connection of the loop: reads land here, then the parser sees them.
    let readBuffer = UnsafeMutableRawBufferPointer.allocate(byteCount: FixedLimits.clientReadBytes, alignment: 16)
    /// One read buffer for every upstream connection of the loop; large, so that a big download
    /// costs few reads (the answer is parsed and passed on from here).
    let upstreamBuffer = UnsafeMutableRawBufferPointer.allocate(byteCount: FixedLimits.upstreamReadBytes, alignment: 16)

    init(
        loop: EventLoop, configuration: Configuration, states: [RouteState], forwardProxy: ForwardProxyTLS?, metrics: LoopMetrics,
        shared: SharedProxyState, logger: Logger
    ) {
        self.loop = loop
        self.configuration = configuration
        self.forwardProxy = forwardProxy
        servesConnect = forwardProxy != nil
        self.metrics = metrics
        self.shared = shared
        self.logger = logger
        auditBatch = AuditBatch(log: shared.audit)
        routes = LoopRoutes(configuration: configuration, states: states, loop: loop, metrics: metrics)
        timeouts = LoopContext.timeouts(configuration)
        auditing = configuration.audit != nil
    }

    static func timeouts(_ configuration: Configuration) -> ExchangeMachine.Timeouts {
        ExchangeMachine.Timeouts(
            upstreamTimeout: configuration.limits.upstreamTimeout, upstreamIdleTimeout: configuration.limits.upstreamIdleTimeout,
            clientIdleTimeout: configuration.limits.clientIdleTimeout)
    }

    /// A reload: requests that start from now on use `configuration`'s routes. The old routes' idle
    /// upstream connections are closed; their exchanges in flight finish with them.
    func replace(configuration: Configuration, states: [RouteState], forwardProxy: ForwardProxyTLS?) {
        let old = routes
        self.configuration = configuration
        self.forwardProxy = forwardProxy
        routes = LoopRoutes(configuration: configuration, states: states, loop: loop, metrics: metrics)
        timeouts = LoopContext.timeouts(configuration)
        auditing = configuration.audit != nil
        for route in old.withConnections { route.upstream.closeIdle() }
    }

    deinit {
        readBuffer.deallocate()
        upstreamBuffer.deallocate()
    }

    /// Upstream failures (unreachable, timed out) are logged at most once every 10 s per loop, with
    /// the count of those not logged since: a dead upstream must show in the log, not flood it.
    private var lastUpstreamFailureLog = -Double.infinity
    private var unloggedUpstreamFailures = 0

    func noteUpstreamFailure(_ why: String) {
        let now = loop.now
        guard now - lastUpstreamFailureLog >= 10 else {
            unloggedUpstreamFailures += 1
            return
        }
        let more = unloggedUpstreamFailures > 0 ? " (and \(unloggedUpstreamFailures) more since the last report)" : ""
        logger.warning("upstream request failed: \(why)\(more)")
        lastUpstreamFailureLog = now
        unloggedUpstreamFailures = 0
    }

    /// Checks every connection's deadlines; runs a few times a second.
    func sweepTimeouts() {
        let now = loop.now
        for connection in Array(connections.values) { connection.checkTimeouts(now: now) }
        for route in routes.withConnections { route.upstream.sweepIdle() }
        // A request host's route shares its template's gate: the routes themselves are enough.
        for route in routes.routes {
            if let news = route.policy.placeholders?.refresh(now: now) {
                logger.log(level: news.failed ? .error : .info, "route \(route.state.name): \(news.line)")
            }
        }
    }
}

/// A loop-owned object carried through a closure that another thread hands back to its loop
/// (`EventLoop.execute`, from the token thread). @unchecked Sendable is safe: the reference is
/// weak, and it is read only inside that closure, on the owning loop's thread, where the object lives.
struct LoopBound<Object: AnyObject>: @unchecked Sendable {
    weak var object: Object?
    init(_ object: Object) { self.object = object }
}
