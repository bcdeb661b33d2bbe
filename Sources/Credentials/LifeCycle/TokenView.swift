import Logs

/// Whether the proxy holds a session it can refresh. To choose between 401 `login_required` and
/// 503 `token_unavailable` when no valid token is held, ask `TokenManager.refresh`: its outcome
/// says which.
public enum SessionState: String, Sendable {
    /// A token is held (it may have expired; a refresh is possible), or none yet and nothing says a
    /// login is needed (before the first fetch, or while the source fails for a passing reason):
    /// requests wait for a refresh, then get 503 `token_unavailable`.
    case active
    /// A login is needed: a session-based source found no stored session (never logged in, logged
    /// out, or a session that ended before this process started).
    case none
    /// The identity provider refused the refresh: a login is needed (CONTRACT.md point 5).
    case ended
}

/// What the request path reads, with one lock-protected load per request.
public struct TokenView: Sendable {
    /// The newest token; it may be expired (check `snapshot.isValid(at:)`).
    public var snapshot: TokenSnapshot?
    public var session: SessionState
    /// Why there is no usable token, or why the last refresh failed. Never contains a secret.
    public var failure: String?
    /// Seconds for a 503's `Retry-After`; at least 1.
    public var retryAfter: Int

    public init(snapshot: TokenSnapshot?, session: SessionState, failure: String?, retryAfter: Int) {
        self.snapshot = snapshot
        self.session = session
        self.failure = failure
        self.retryAfter = max(1, retryAfter)
    }

    /// The snapshot when it is still valid at `now`.
    public func usableSnapshot(at now: Double) -> TokenSnapshot? {
        guard let snapshot, snapshot.isValid(at: now) else { return nil }
        return snapshot
    }
}

/// The answer to `TokenManager.refresh`.
public enum RefreshOutcome: Sendable {
    /// The token to use. Its generation equals the caller's stale generation when the source handed
    /// back the very same token (a static token, an unchanged file): retrying with it is pointless.
    case token(TokenSnapshot)
    /// The session ended (refresh refused) or never began: 401 `login_required`.
    case loginRequired(String)
    /// A passing failure (or a backoff in progress): 503 `token_unavailable` with `Retry-After`.
    case unavailable(String, retryAfter: Int)

    /// The contract's error codes of the two refusals (CONTRACT.md "Errors"): the client's answer,
    /// the 401 counters and the `token.wait` and `credential.refresh` spans name them.
    public static let loginRequiredCode = "login_required"
    public static let tokenUnavailableCode = "token_unavailable"
}

/// Why a refresh was asked for (logs and the source's bookkeeping).
public enum RefreshReason: String, Sendable {
    /// The background timer, or a request that found no valid token.
    case expiry
    /// The upstream answered 401.
    case unauthorized
    /// SIGHUP, the admin `POST /refresh`, or a changed input (file, store).
    case forced
    /// The first acquisition after `start()`.
    case startup
}

/// How one call to the token source ended, for `tokenproxy_refreshes_total{outcome}`.
public enum RefreshResult: String, Sendable, CaseIterable {
    /// The identity provider (or the source) handed over a token.
    case success
    case refused
    case failure
    /// The store already held a newer valid token (another process refreshed it, or this is the
    /// first look): no call to the identity provider.
    case reused
}

/// Why a call to the token source failed (`tokenproxy_token_fetch_failures_total{reason}`, issue 22).
public enum FetchFailureReason: String, Sendable, CaseIterable {
    /// The identity provider could not be reached (DNS, TCP, TLS).
    case network
    case timeout
    case http5xx = "http_5xx"
    case http429 = "http_429"
    /// The provider refused the refresh: the session ends (CONTRACT point 5).
    case refused
    /// An answer that holds no usable token, or one already expired, or that cannot be read.
    case badAnswer = "bad_answer"
    /// The provider blames the client's configuration (invalid_client, invalid_scope, …).
    case clientMisconfigured = "client_misconfigured"

    /// The reason of a failure, from its case and cause (never from its message).
    public static func of(_ error: TokenSourceError) -> FetchFailureReason {
        switch error {
        case .refused, .loginRequired: return .refused
        case .configuration: return .clientMisconfigured
        case .passing(_, let cause):
            switch cause {
            case .unreachable: return .network
            case .timedOut: return .timeout
            case .unavailable: return .http5xx
            case .rateLimited: return .http429
            case .badAnswer: return .badAnswer
            }
        }
    }
}

/// Counters for metrics and `status`.
public struct TokenStats: Sendable, Equatable {
    /// Failed calls by reason.
    public var failureReasons = LabeledCounts<FetchFailureReason>()
    /// Calls by how they ended.
    public var outcomes = LabeledCounts<RefreshResult>()
    /// How long each call to the source took, successful or not.
    public var refreshDuration = Histogram()
    /// Seconds since the epoch of the last call that handed over a usable token.
    public var lastSuccessAt: Double? = nil

    public var successes: UInt64 { outcomes[.success] }
    public var refusals: UInt64 { outcomes[.refused] }
    public var failures: UInt64 { outcomes[.failure] }
    public var reuses: UInt64 { outcomes[.reused] }
    /// Seconds since the epoch of the last call to the source that ended.
    public var lastRefreshAt: Double? = nil
    public var lastRefreshOutcome: RefreshResult? = nil
    /// When the token thread will next call the source by itself (a proactive refresh or a backoff
    /// retry); nil: only when asked or when the input changes.
    public var nextRefreshAt: Double? = nil
    /// Passing failures in a row (the backoff attempt).
    public var consecutiveFailures: Int = 0

    public init() {}

    public func count(of result: RefreshResult) -> UInt64 { outcomes[result] }

    public func failures(_ reason: FetchFailureReason) -> UInt64 { failureReasons[reason] }

    mutating func record(_ result: RefreshResult, reason: FetchFailureReason?, seconds: Double, at time: Double) {
        if let reason { failureReasons.increment(reason) }
        refreshDuration.observe(seconds)
        if result == .success || result == .reused { lastSuccessAt = time }
        record(result, at: time)
    }

    mutating func record(_ result: RefreshResult, at time: Double) {
        outcomes.increment(result)
        lastRefreshAt = time
        lastRefreshOutcome = result
    }
}
