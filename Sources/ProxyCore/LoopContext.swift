import Config
import Credentials
import Logging
import Sockets
import Upstream

/// What every connection of one event loop shares: built once per loop, touched only on its thread
/// (apart from the Sendable parts: tokens, metrics, shared state).
final class LoopContext {
    let loop: EventLoop
    let configuration: Configuration
    let upstream: UpstreamConnector
    let tokens: TokenManager
    let policy: AccessPolicy
    let forwarder: Forwarder
    let metrics: LoopMetrics
    let shared: SharedProxyState
    let logger: Logger
    /// Sources that can produce a different token on demand; a static token cannot.
    let tokenCanChange: Bool
    /// `limits:` an exchange is bounded by, as `ExchangeMachine.onTick` takes them.
    let timeouts: ExchangeMachine.Timeouts
    /// Sources whose sessions begin with `tokenproxy login`: without one, requests get 401 login_required.
    let sessionNeedsLogin: Bool
    /// `credentials.dpop` is set: only then can a token carry a DPoP binding (RFC 9449).
    let dpopEnabled: Bool
    var connections: [Int32: Connection] = [:]
    /// One read buffer for every client connection of the loop: reads land here, then the parser sees them.
    let readBuffer = UnsafeMutableRawBufferPointer.allocate(byteCount: FixedLimits.clientReadBytes, alignment: 16)
    /// One read buffer for every upstream connection of the loop; large, so that a big download
    /// costs few reads (the answer is parsed and passed on from here).
    let upstreamBuffer = UnsafeMutableRawBufferPointer.allocate(byteCount: FixedLimits.upstreamReadBytes, alignment: 16)

    init(loop: EventLoop, configuration: Configuration, tokens: TokenManager, metrics: LoopMetrics, shared: SharedProxyState, logger: Logger) {
        self.loop = loop
        self.configuration = configuration
        self.tokens = tokens
        self.metrics = metrics
        self.shared = shared
        self.logger = logger
        let tls = configuration.upstreamTLS
        upstream = UpstreamConnector(
            loop: loop,
            settings: UpstreamSettings(
                caFile: tls.caFile, clientCertFile: tls.clientCertFile, clientKeyFile: tls.clientKeyFile,
                insecureSkipVerify: tls.insecureSkipVerify, headTimeout: configuration.limits.upstreamTimeout,
                proxy: ProxyEnvironment(scheme: configuration.upstream.scheme)),
            origin: configuration.upstream.origin, maxIdle: configuration.limits.upstreamKeepalive,
            idleTimeout: configuration.limits.upstreamKeepaliveTimeout)
        upstream.retirementObserver = { [metrics] reason in metrics.upstreamRetired(reason) }
        policy = AccessPolicy(configuration: configuration)
        forwarder = Forwarder(configuration: configuration)
        tokenCanChange = configuration.credentials.type != .static
        dpopEnabled = configuration.credentials.secretless.dpop != nil
        timeouts = ExchangeMachine.Timeouts(
            upstreamTimeout: configuration.limits.upstreamTimeout, upstreamIdleTimeout: configuration.limits.upstreamIdleTimeout,
            clientIdleTimeout: configuration.limits.clientIdleTimeout)
        switch configuration.credentials.type {
        case .oauth2Refresh, .cognito, .jsonRefresh: sessionNeedsLogin = true
        case .oauth2ClientCredentials, .static, .file, .exec, .oauth2JWTBearer, .oauth2TokenExchange, .gceMetadata, .azureManagedIdentity:
            sessionNeedsLogin = false
        }
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
        upstream.sweepIdle()
    }
}
