import Config
import FoundationEssentials
import Logging
import Sockets
import Synchronization

/// The single writer of the current token (ARCHITECTURE.md "Tokens off the hot path").
///
/// Every call into the token source (reading a file, running a command, calling an identity
/// provider) happens on one dedicated thread that this manager owns; the request path only reads the
/// published `TokenView` through `current()`. The thread sleeps until the next refresh is due (as the
/// `RefreshPolicy` decides), until a caller asks for a refresh, or until it is time to look at the
/// source's input again, and refreshes in the background without traffic.
// @unchecked: `control` and `tokenThread` are read and written only with `condition` held; every
// other stored property is immutable or a Mutex.
public final class TokenManager: @unchecked Sendable {
    /// The configured credential type ("static", "file", "exec", …).
    public let kind: String

    private let source: any TokenSource
    private let logger: Logger
    private let policy: RefreshPolicy
    private let clock: @Sendable () -> Double
    private let sink: SinkWriter?
    /// `type: aws` (and cognito with an identity pool): each token is AWS credentials, carried by the snapshot for signing.
    private let signsAWS: Bool

    private let published: Mutex<TokenView>
    private let statistics = Mutex(TokenStats())
    private let changeHandler = Mutex<(@Sendable (TokenView) -> Void)?>(nil)

    /// Guards `control` and wakes the token thread.
    private let condition = OSCondition()
    private var control = Control()
    /// Guarded by `condition`; set by the token thread when it starts.
    private var tokenThread: UInt?

    private struct Control {
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
    private var generation: UInt64 = 0
    private var consecutiveFailures = 0
    private var nextPollAt: Double?
    private var lastLoggedFailure: String?

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

    /// The session store's counters (operations, lease waits, refresh races), for `/metrics`; nil
    /// for the sources without a store.
    public let storeMetrics: StoreMetrics?

    /// Counters of calls to the source by outcome, and the last one.
    public var stats: TokenStats { statistics.withLock { $0 } }

    /// Hot path: one lock-protected load, no allocation, no await.
    public func current() -> TokenView {
        published.withLock { $0 }
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

    /// What a forced refresh (SIGHUP, `POST /refresh`) did.
    public enum ForcedRefresh: Sendable, Equatable {
        /// A fetch started, or the one in flight will serve.
        case started
        /// Forced refreshes back off like failed ones (`RefreshPolicy.admitForced`): this one runs
        /// when the back-off allows, in `retryAfter` seconds, together with every other one deferred
        /// meanwhile.
        case deferred(retryAfter: Int)
    }

    /// Starts one refresh now unless forced refreshes came too often, else defers it until they may
    /// start again; a fetch already in flight serves it. A failure backoff does not hold it back (an
    /// operator forcing a refresh has usually fixed what failed).
    public func forceRefresh() -> ForcedRefresh {
        condition.lock()
        defer { condition.unlock() }
        if control.inFlight || control.stopping { return .started }
        let now = clock()
        if let wait = policy.admitForced(&control.forced, now: now) {
            // Every deferred ask joins the one already waiting: one refresh for all of them.
            if control.deferredForcedAt == nil {
                control.deferredForcedAt = now + wait
                condition.broadcast()
            }
            return .deferred(retryAfter: Self.seconds(wait))
        }
        startForcedFetch()
        return .started
    }

    /// With `condition` held: a forced fetch goes to the token thread; it also serves a deferred one.
    private func startForcedFetch() {
        control.inFlight = true
        control.queuedReason = .forced
        control.deferredForcedAt = nil
        condition.broadcast()
    }

    // MARK: - The token thread

    private enum Job {
        case fetch(RefreshReason)
        case poll
    }

    private func run() {
        while let job = nextJob() {
            switch job {
            case .fetch(let reason):
                performFetch(reason: reason)
            case .poll:
                performPoll()
            }
        }
    }

    /// Sleeps until there is something to do; nil when stopping.
    private func nextJob() -> Job? {
        condition.lock()
        defer { condition.unlock() }
        while true {
            if control.stopping {
                control.exited = true
                condition.broadcast()
                return nil
            }
            if let reason = control.queuedReason {
                control.queuedReason = nil
                return .fetch(reason)
            }
            let now = clock()
            if !control.inFlight, let due = control.deferredForcedAt, now >= due {
                // Admitted now unless a clock step moved the back-off: then it waits again.
                if let wait = policy.admitForced(&control.forced, now: now) {
                    control.deferredForcedAt = now + wait
                } else {
                    startForcedFetch()
                    continue
                }
            }
            if !control.inFlight, let due = control.nextRefreshAt, now >= due {
                control.inFlight = true
                control.nextRefreshAt = nil
                return .fetch(.expiry)
            }
            if let poll = nextPollAt, now >= poll {
                return .poll
            }
            var deadline = now + 30  // also bounds the damage of a wall-clock jump
            if !control.inFlight, let due = control.nextRefreshAt { deadline = min(deadline, due) }
            if !control.inFlight, let due = control.deferredForcedAt { deadline = min(deadline, due) }
            if let poll = nextPollAt { deadline = min(deadline, poll) }
            condition.wait(seconds: max(0.001, deadline - now))
        }
    }

    private func performPoll() {
        let changed = source.inputChanged()
        if let interval = source.pollInterval { nextPollAt = clock() + interval } else { nextPollAt = nil }
        guard changed else { return }
        logger.debug("\(kind): input changed, fetching the token again")
        condition.lock()
        if !control.inFlight {
            control.inFlight = true
            control.queuedReason = .forced
        }
        condition.unlock()
    }

    private func performFetch(reason: RefreshReason) {
        logger.debug("\(kind): fetching a token (\(reason.rawValue))")
        let before = published.withLock { $0 }
        let current = before.snapshot
        let view: TokenView
        let outcome: RefreshOutcome
        let result: RefreshResult
        let decision: RefreshPolicy.Decision
        var sessionEnded: String? = nil
        var failure: String? = nil
        var failureReason: FetchFailureReason? = nil
        let fetchStarted = Date()
        /// For the one log line per refresh: how long the source took.
        func took() -> String { "\(Int((Date().timeIntervalSince(fetchStarted) * 1000).rounded())) ms" }
        do {
            let issued = try source.fetch(current: current)
            guard BearerToken.isUsable(issued.accessToken) else {
                throw TokenSourceError.passing("\(kind): the answer holds no usable token (empty, or spaces or control characters)")
            }
            registerSecret(issued.accessToken)
            if let refreshToken = issued.refreshToken { registerSecret(refreshToken) }
            // `type: aws`: the token is the credentials' JSON, read back here also when it came from the store.
            var awsCredentials: AWSCredentials? = nil
            if signsAWS {
                guard let credentials = AWSCredentials(containerEndpointJSON: issued.accessToken) else {
                    throw TokenSourceError.passing("\(kind): the answer holds no usable AWS credentials")
                }
                awsCredentials = credentials
            }
            let sameCredential = current.map { Self.isSameCredential(held: $0, issued: issued.accessToken, aws: awsCredentials) } ?? false
            let aws = awsCredentials.map { (sameCredential ? current?.aws : nil) ?? AWSSigningCredentials($0) }
            let now = clock()
            let expiresAt = TokenExpiry.resolve(issued, now: now, defaultLifetime: source.defaultLifetime)
            let snapshot: TokenSnapshot
            if let current, sameCredential {
                // The same credential: same generation, so a 401 it got is not retried with it
                // (CONTRACT point 3), and the lifetime counts from when it was first seen
                // (otherwise each look at an unchanged token would move its refresh time).
                snapshot =
                    current.accessToken == issued.accessToken && current.expiresAt == expiresAt
                    ? current
                    : TokenSnapshot(
                        accessToken: issued.accessToken, expiresAt: expiresAt, issuedAt: current.issuedAt, generation: current.generation,
                        dpop: current.dpop?.prover, aws: aws)
            } else {
                generation = max(generation, current?.generation ?? 0) + 1
                let issuedAt = min(issued.issuedAt ?? now, now)
                snapshot = TokenSnapshot(
                    accessToken: issued.accessToken, expiresAt: expiresAt, issuedAt: issuedAt, generation: generation, dpop: issued.dpop,
                    aws: aws)
                let what = issued.fromStore ? "picked up the stored token" : "refresh (\(reason.rawValue)) succeeded"
                logger.info("\(kind): \(what) in \(took()): new token (generation \(snapshot.generation), \(Self.describeExpiry(expiresAt, now: now)))")
            }
            decision = policy.next(
                after: .issued(issuedAt: snapshot.issuedAt, expiresAt: snapshot.expiresAt, failuresSoFar: consecutiveFailures),
                now: now
            )
            if snapshot.isValid(at: now) {
                view = TokenView(snapshot: snapshot, session: .active, failure: nil, retryAfter: 1)
                outcome = .token(snapshot)
                result = issued.fromStore ? .reused : .success
                if lastLoggedFailure != nil { logger.info("\(kind): token source recovered") }
                lastLoggedFailure = nil
            } else {
                let message = "\(kind): the token source handed over a token that has already expired"
                let retryAfter = Self.retryAfter(decision, now: now)
                view = TokenView(snapshot: snapshot, session: .active, failure: message, retryAfter: retryAfter)
                outcome = .unavailable(message, retryAfter: retryAfter)
                result = .failure
                failureReason = .badAnswer
                failure = message
                logFailure(message, level: .warning, reason: .badAnswer)
            }
        } catch {
            let now = clock()
            // Another error type could carry an answer's text: only its type is told.
            let sourceError = error as? TokenSourceError ?? .passing("\(kind): unexpected \(type(of: error))")
            let counted = FetchFailureReason.of(sourceError)
            failureReason = counted
            // A refusal ends the session (a login is needed again); loginRequired: there was none.
            let ending: (message: String, session: SessionState, level: Logger.Level)?
            switch sourceError {
            case .refused(let reason): ending = ("the identity provider refused the refresh: \(reason); log in again", .ended, .error)
            case .loginRequired(let reason): ending = (reason, .none, .warning)
            case .passing, .configuration: ending = nil
            }
            if case (let message, let session, let level)? = ending {
                decision = policy.next(after: .refused, now: now)
                view = TokenView(snapshot: nil, session: session, failure: message, retryAfter: 1)
                outcome = .loginRequired(message)
                result = .refused
                sessionEnded = message
                failure = message
                logFailure(message, level: level, reason: counted)
            } else {
                let reason = sourceError.reason
                let isConfiguration: Bool
                switch sourceError {
                case .configuration: isConfiguration = true
                case .passing, .refused, .loginRequired: isConfiguration = false
                }
                decision = policy.next(after: .passingFailure(failuresSoFar: consecutiveFailures), now: now)
                let retryAfter = Self.retryAfter(decision, now: now)
                // No token yet but nothing says a login is needed: requests wait for a refresh and
                // get 503 token_unavailable (`.none` is only for "log in first").
                let session: SessionState = current == nil && before.session == .ended ? .ended : .active
                view = TokenView(snapshot: current, session: session, failure: reason, retryAfter: retryAfter)
                // After a refusal, a failed look at the changed input leaves the session ended.
                let endedBefore = current == nil && before.session == .ended
                outcome = endedBefore ? .loginRequired(before.failure ?? reason) : .unavailable(reason, retryAfter: retryAfter)
                result = .failure
                failure = reason
                if endedBefore { sessionEnded = before.failure ?? reason }
                logFailure(
                    isConfiguration ? "configuration error: \(reason)" : reason,
                    detail: " (after \(took()); next try in \(retryAfter) s)",
                    level: isConfiguration ? .error : .warning,
                    reason: counted
                )
            }
        }

        let now = clock()
        published.withLock { $0 = view }

        var nextRefreshAt: Double? = nil
        var backoffUntil: Double? = nil
        switch decision {
        case .refreshAt(let time):
            consecutiveFailures = 0
            nextRefreshAt = time
        case .retryAt(let time, let attempt):
            consecutiveFailures = attempt
            nextRefreshAt = time
            backoffUntil = time
        case .waitForTrigger:
            // A token that does not expire, or a refusal: a request, a forced refresh or a changed
            // input moves things on. A passing failure always comes with a retry time instead.
            consecutiveFailures = 0
        }
        statistics.withLock { stats in
            stats.record(result, reason: failureReason, seconds: Date().timeIntervalSince(fetchStarted), at: now)
            stats.nextRefreshAt = nextRefreshAt
            stats.consecutiveFailures = consecutiveFailures
        }

        condition.lock()
        control.inFlight = false
        control.nextRefreshAt = nextRefreshAt
        control.backoffUntil = backoffUntil
        control.sessionEnded = sessionEnded
        control.lastFailure = failure
        let waiters = control.waiters
        control.waiters = []
        condition.unlock()

        for waiter in waiters { waiter(outcome) }

        if view.snapshot !== before.snapshot || view.session != before.session {
            sink?.update(token: view.snapshot?.accessToken)
        }
        if view.snapshot !== before.snapshot || view.session != before.session || view.failure != before.failure
            || view.retryAfter != before.retryAfter
        {
            changeHandler.withLock { $0 }?(view)
        }
    }

    /// Whether a fetched token is the credential already held: the same token or, for `type: aws`,
    /// the same keys (the JSON also carries `Expiration`, which an endpoint may move while it hands
    /// out the same keys, as ECS, EKS and IMDS do).
    static func isSameCredential(held: TokenSnapshot, issued token: String, aws: AWSCredentials?) -> Bool {
        if let aws, let heldKeys = held.aws?.credentials {
            return heldKeys.accessKeyID == aws.accessKeyID && heldKeys.secretAccessKey == aws.secretAccessKey
                && heldKeys.sessionToken == aws.sessionToken
        }
        return held.accessToken == token
    }

    /// Logs at `level` once per distinct reason; repeats of the same reason go to debug. Sources
    /// name themselves in their messages ("exec: …", "credentials file …").
    /// One log line per failure, with the `reason` it is counted under in
    /// `tokenproxy_token_fetch_failures_total` (the same value, not read back from the text).
    private func logFailure(_ message: String, detail: String = "", level: Logger.Level, reason: FetchFailureReason) {
        let metadata: Logger.Metadata = ["reason": "\(reason.rawValue)"]
        if message == lastLoggedFailure {
            logger.debug("\(message)\(detail)", metadata: metadata)
        } else {
            logger.log(level: level, "\(message)\(detail)", metadata: metadata)
            lastLoggedFailure = message
        }
    }

    private static func retryAfter(_ decision: RefreshPolicy.Decision, now: Double) -> Int {
        switch decision {
        case .retryAt(let time, _): return seconds(time - now)
        case .refreshAt, .waitForTrigger: return 1
        }
    }

    static func seconds(_ interval: Double) -> Int {
        guard interval.isFinite, interval > 1 else { return 1 }
        return Int(min(interval.rounded(.up), 86_400))
    }

    private static func describeExpiry(_ expiresAt: Double?, now: Double) -> String {
        guard let expiresAt else { return "does not expire" }
        return "expires in \(Int((expiresAt - now).rounded())) s"
    }
}
