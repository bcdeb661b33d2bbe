import FoundationEssentials
import Logging
import Synchronization

/// One call to the token source on the token thread, and what it publishes: the new view, the
/// waiters' outcome, the next refresh or back-off time, the statistics, the sink file.
extension TokenManager {
    func performFetch(reason: RefreshReason) {
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
        let refreshSpan = refreshTracing.begin()
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
        refreshTracing.end(refreshSpan, credential: kind, result: result, reason: reason, outcome: outcome)

        condition.lock()
        control.inFlight = false
        control.nextRefreshAt = nextRefreshAt
        control.backoffUntil = backoffUntil
        control.sessionEnded = sessionEnded
        control.lastFailure = failure
        let waiters = control.waiters
        control.waiters = []
        condition.unlock()

        if result != .reused, let observer = fetchObserver.withLock({ $0 }) {
            observer(
                FetchReport(
                    succeeded: result == .success, failureReason: result == .success ? nil : failureReason?.rawValue ?? "failure",
                    refresh: refreshSpan?.link))
        }
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

    private static func describeExpiry(_ expiresAt: Double?, now: Double) -> String {
        guard let expiresAt else { return "does not expire" }
        return "expires in \(Int((expiresAt - now).rounded())) s"
    }
}
