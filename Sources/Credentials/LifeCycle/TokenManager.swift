import Config
import FoundationEssentials
import Logging
import Sockets
import Synchronization
import Telemetry

/// The single writer of the current token (ARCHITECTURE.md "Tokens off the hot path").
///
/// Every call into the token source (reading a file, running a command, calling an identity
/// provider) happens on one dedicated thread that this manager owns; the request path only reads the
/// published `TokenView` through `current()`. The thread sleeps until the next refresh is due (as the
/// `RefreshPolicy` decides), until a caller asks for a refresh, or until it is time to look at the
/// source's input again, and refreshes in the background without traffic. This file holds its state
/// and what callers call; `+ForcedRefresh` the forced refreshes, `+TokenThread` the thread's
/// schedule, `+Fetch` one call to the source and what it publishes.
// @unchecked: `control` and `tokenThread` are read and written only with `condition` held; every
// other stored property is immutable or a Mutex.
public final class TokenManager: @unchecked Sendable {
    /// The configured credential type ("static", "file", "exec", …).
    public let kind: String

    let source: any TokenSource
    let logger: Logger
    let policy: RefreshPolicy
    let clock: @Sendable () -> Double
    let sink: SinkWriter?
    /// `type: aws` (and cognito with an identity pool): each token is AWS credentials, carried by the snapshot for signing.
    let signsAWS: Bool

    let published: Mutex<TokenView>
    let statistics = Mutex(TokenStats())
    let changeHandler = Mutex<(@Sendable (TokenView) -> Void)?>(nil)
    let fetchObserver = Mutex<(@Sendable (FetchReport) -> Void)?>(nil)
    /// `credential.refresh` spans, once the server attaches an exporter (RefreshTracing.swift).
    public let refreshTracing = RefreshTracing()

    /// Guards `control` and wakes the token thread.
    let condition = OSCondition()
    var control = Control()
    /// Guarded by `condition`; set by the token thread when it starts.
    var tokenThread: UInt?

    struct Control {
        var started = false
        var stopping = false
        var exited = false
        /// A fetch is queued or running; callers join `waiters` instead of starting another.
        var inFlight = false
        /// A fetch asked for and not yet taken by the token thread.
        var queuedReason: RefreshReason?
        var waiters: [@Sendable (RefreshOutcome) -> Void] = []
        /// Set when the source refused: the message for `login_required`.
        var sessionEnded: String?
        /// Until then, requests get 503 at once instead of another call (passing failures).
        var backoffUntil: Double?
        var lastFailure: String?
        /// The background timer: a proactive refresh or a backoff retry.
        var nextRefreshAt: Double?
        var forced = RefreshPolicy.ForcedRefreshes()
        /// A forced refresh that was deferred (`ForcedRefresh.deferred`) runs at this time, once
        /// however many were deferred (CONTRACT "Signals, admin, logs": an accepted 202 is never dropped).
        var deferredForcedAt: Double?
    }

    // Token thread only.
    var generation: UInt64 = 0
    var consecutiveFailures = 0
    var nextPollAt: Double?
    var lastLoggedFailure: String?

    /// Builds the source that `configuration.credentials.type` names.
    public convenience init(configuration: Configuration, logger: Logger) throws {
        try self.init(configuration: configuration, logger: logger, source: makeTokenSource(configuration, logger: logger))
    }

    /// With a source of the caller's choice and, for tests, another clock (epoch seconds) and random
    /// source (0..<1) for the policy's jitter.
    public init(
        configuration: Configuration,
        logger: Logger,
        source: any TokenSource,
        now: @escaping @Sendable () -> Double = { Date().timeIntervalSince1970 },
        random: @escaping @Sendable () -> Double = { Double.random(in: 0..<1) }
    ) {
        self.kind = source.kind
        self.source = source
        self.logger = logger
        self.clock = now
        self.policy = RefreshPolicy(refreshMargin: configuration.credentials.refreshMargin, random: random)
        self.sink = configuration.sink.map { SinkWriter($0, logger: logger) }
        self.signsAWS = configuration.credentials.source.awsSigning != nil
        self.storeMetrics = (source as? SessionTokenSource)?.storeMetrics
        // `.active` without a token: requests wait for the first acquisition (a session-based source
        // that finds no session publishes `.none` when it says so).
        self.published = Mutex(TokenView(snapshot: nil, session: .active, failure: "no token yet", retryAfter: 1))
    }

    /// Called on the token thread after every change of the published view (sink file, metrics).
    /// Set it before `start()`.
    public var onChange: (@Sendable (TokenView) -> Void)? {
        get { changeHandler.withLock { $0 } }
        set { changeHandler.withLock { $0 = newValue } }
    }

    /// Called on the token thread after every call to the source that was made (not a token picked
    /// up from the store): the audit log's credential events.
    public var onFetched: (@Sendable (FetchReport) -> Void)? {
        get { fetchObserver.withLock { $0 } }
        set { fetchObserver.withLock { $0 = newValue } }
    }

    /// One call to the token source, as the audit log tells it: no token, no answer's text.
    public struct FetchReport: Sendable {
        public var succeeded: Bool
        /// `tokenproxy_token_fetch_failures_total`'s reason (`network`, `refused` …) of a failure.
        public var failureReason: String?
        /// The call's `credential.refresh` span, when it was traced: the trace of its audit event's
        /// log record (CONTRACT.md "Telemetry").
        public var refresh: SpanLink?
    }

    /// The session store's counters (operations, lease waits, refresh races), for `/metrics`; nil
    /// for the sources without a store.
    public let storeMetrics: StoreMetrics?

    /// Counters of calls to the source by outcome, and the last one.
    public var stats: TokenStats { statistics.withLock { $0 } }

    /// Hot path: one lock-protected load, no allocation, no await.
    public func current() -> TokenView {
        published.withLock { $0 }
    }

    /// The newest token alone, for a request that needs nothing else while it is valid: the whole
    /// view's copy (its failure text) costs about 100 instructions a request more.
    public func currentSnapshot() -> TokenSnapshot? {
        published.withLock { $0.snapshot }
    }

    /// Starts the token thread; its first job is the first acquisition. Calling it twice does nothing.
    public func start() {
        condition.lock()
        guard !control.started else {
            condition.unlock()
            return
        }
        control.started = true
        control.inFlight = true
        control.queuedReason = .startup
        condition.unlock()
        if let interval = source.pollInterval { nextPollAt = clock() + interval }
        do {
            try OSThread.start(name: "tp-token") { [self] in
                condition.lock()
                tokenThread = OSThread.currentID
                condition.unlock()
                self.run()
            }
        } catch {
            // Without its thread the manager never gets a token; requests get 503 and stop() returns.
            logger.error("\(kind): cannot start the token thread: \(error)")
            condition.lock()
            control.exited = true
            condition.unlock()
        }
    }

    /// Stops the token thread after the call it is in (an exec run ends within its timeout) and
    /// answers callers still waiting with `.unavailable`. Returns when the thread has ended.
    /// Called on the token thread itself (from a completion or `onChange`), it only asks the thread
    /// to end, and returns at once.
    public func stop() {
        condition.lock()
        control.stopping = true
        condition.broadcast()
        if control.started && tokenThread != OSThread.currentID {
            while !control.exited { condition.wait() }
        }
        let waiters = control.waiters
        control.waiters = []
        condition.unlock()
        for waiter in waiters { waiter(.unavailable("the proxy is shutting down", retryAfter: 1)) }
    }

    /// Coalesced refresh.
    ///
    /// - `staleGeneration`: the generation a request was sent with when it got a 401; nil for a forced
    ///   refresh (SIGHUP, admin) or "no valid token, need one".
    /// - When a valid token newer than `staleGeneration` exists (or, with nil and a reason other than
    ///   `.forced`, any valid token), `completion` is called at once, **on the calling thread, before
    ///   this method returns**. So are the answers that need no call to the source: a session that
    ///   ended (`.loginRequired`), a backoff in progress (`.unavailable` with the time left; a forced
    ///   refresh skips the backoff), shutdown.
    /// - Otherwise exactly one fetch is in flight however many callers ask, and all of them get its
    ///   outcome, on the token thread. Callers hop to their own loop.
    public func refresh(staleGeneration: UInt64?, reason: RefreshReason, completion: @escaping @Sendable (RefreshOutcome) -> Void) {
        let answer: RefreshOutcome? = {
            condition.lock()
            defer { condition.unlock() }
            let now = clock()
            let view = published.withLock { $0 }
            if let snapshot = view.snapshot, snapshot.isValid(at: now) {
                if let staleGeneration, snapshot.generation > staleGeneration { return .token(snapshot) }
                if staleGeneration == nil && reason != .forced { return .token(snapshot) }
            }
            if control.stopping { return .unavailable("the proxy is shutting down", retryAfter: 1) }
            if !control.inFlight {
                if let ended = control.sessionEnded { return .loginRequired(ended) }
                if reason != .forced, let until = control.backoffUntil, until > now {
                    let message = control.lastFailure ?? "the token source is failing"
                    return .unavailable(message, retryAfter: Self.seconds(until - now))
                }
            }
            control.waiters.append(completion)
            if !control.inFlight {
                control.inFlight = true
                control.queuedReason = reason
                condition.broadcast()
            }
            return nil
        }()
        if let answer { completion(answer) }
    }

    static func seconds(_ interval: Double) -> Int {
        guard interval.isFinite, interval > 1 else { return 1 }
        return Int(min(interval.rounded(.up), 86_400))
    }
}

/// One access token as the request path sees it: immutable, published by the single writer
/// (`TokenManager`) and read with one lock-protected load per request (ARCHITECTURE.md
/// "Tokens off the hot path").
public final class TokenSnapshot: Sendable {
    public let accessToken: String
    /// `Authorization: Bearer <token>\r\n` as bytes, built once so the hot path copies one line and
    /// formats nothing.
    public let authorizationField: [UInt8]
    /// Seconds since the epoch; nil when the token does not expire (static tokens).
    public let expiresAt: Double?
    public let issuedAt: Double
    /// Grows by one with every new token; a 401 names the generation it was sent with.
    public let generation: UInt64
    /// Set for a DPoP-bound token (RFC 9449 §7.1): `authorizationField` says `DPoP <token>` and every
    /// request carries a fresh proof. nil for a Bearer token: the request path tests only this.
    public let dpop: DPoPBinding?
    /// Set for `type: aws`: the credentials that sign each request (SigV4) instead of a token in a
    /// field; `accessToken` is then their container-endpoint JSON (what `tokenproxy token` prints).
    public let aws: AWSSigningCredentials?

    public init(
        accessToken: String, expiresAt: Double?, issuedAt: Double, generation: UInt64, dpop: DPoPProver? = nil,
        aws: AWSSigningCredentials? = nil
    ) {
        self.accessToken = accessToken
        self.aws = aws
        self.dpop = dpop.map { DPoPBinding(prover: $0, accessToken: accessToken) }
        self.authorizationField = Array("Authorization: \(dpop == nil ? "Bearer" : "DPoP") \(accessToken)\r\n".utf8)
        self.expiresAt = expiresAt
        self.issuedAt = issuedAt
        self.generation = generation
    }

    public func isValid(at now: Double) -> Bool {
        guard let expiresAt else { return true }
        return now < expiresAt
    }
}
