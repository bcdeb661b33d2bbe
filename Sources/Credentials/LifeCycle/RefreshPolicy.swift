/// When to call the token source next. Pure: the clock and the random source are injected, and the
/// decisions come back as values (ARCHITECTURE.md "Tokens off the hot path").
///
/// - A token that expires is refreshed when less than `min(refresh_margin, lifetime / 2)` remains,
///   moved earlier by up to `refreshJitter` of that lead so that many proxies do not refresh at once.
/// - A passing failure is retried after 1, 2, 4, … seconds, capped at 60, each shortened by up to
///   `backoffJitter` of itself.
/// - A refusal is never retried: only a request that finds the input changed (a new login) or a
///   forced refresh moves things on.
/// - Forced refreshes (SIGHUP, the admin listener's `POST /refresh`) back off the same way: the
///   n-th in a row starts no sooner than `nominalBackoff(n)` (1, 2, 4, … 60 s) after the one before;
///   after a quiet `backoffCap`, the count starts again (docs/OBSERVABILITY.md, "Admin listener").
public struct RefreshPolicy: Sendable {
    /// The forced refreshes started lately (`admitForced`).
    public struct ForcedRefreshes: Sendable, Equatable {
        public var lastStartedAt: Double?
        public var inARow = 0
        public init() {}
    }

    public enum Event: Sendable, Equatable {
        /// The source handed over a token. `failuresSoFar`: passing failures (or early tokens) since
        /// the last token that came with time to spare.
        case issued(issuedAt: Double, expiresAt: Double?, failuresSoFar: Int)
        /// A passing (or configuration) failure; `failuresSoFar` does not count this one.
        case passingFailure(failuresSoFar: Int)
        /// The identity provider refused: the session ended.
        case refused
    }

    public enum Decision: Sendable, Equatable {
        /// Refresh in the background at this time (epoch seconds).
        case refreshAt(Double)
        /// Retry at this time after `attempt` consecutive failures (a backoff: requests that need a
        /// token meanwhile get 503 at once instead of another call).
        case retryAt(Double, attempt: Int)
        /// Nothing to do until a request, a forced refresh or a changed input asks.
        case waitForTrigger
    }

    public var refreshMargin: Double
    /// Fraction of the lead time by which a refresh may come earlier (0.1: up to 10 %).
    public var refreshJitter: Double
    public var backoffBase: Double
    public var backoffCap: Double
    /// Fraction by which a backoff delay may be shortened (0.2: 80–100 % of the nominal delay).
    public var backoffJitter: Double
    /// Returns a number in 0..<1.
    public var random: @Sendable () -> Double

    public init(
        refreshMargin: Double,
        refreshJitter: Double = 0.1,
        backoffBase: Double = 1,
        backoffCap: Double = 60,
        backoffJitter: Double = 0.2,
        random: @escaping @Sendable () -> Double = { Double.random(in: 0..<1) }
    ) {
        self.refreshMargin = refreshMargin
        self.refreshJitter = refreshJitter
        self.backoffBase = backoffBase
        self.backoffCap = backoffCap
        self.backoffJitter = backoffJitter
        self.random = random
    }

    public func next(after event: Event, now: Double) -> Decision {
        switch event {
        case .issued(let issuedAt, let expiresAt, let failuresSoFar):
            guard let expiresAt else { return .waitForTrigger }
            let due = refreshTime(issuedAt: issuedAt, expiresAt: expiresAt)
            if due > now { return .refreshAt(due) }
            // The token came already inside its refresh window: asking again at once would spin.
            let attempt = failuresSoFar + 1
            return .retryAt(now + backoffDelay(attempt: attempt), attempt: attempt)
        case .passingFailure(let failuresSoFar):
            let attempt = failuresSoFar + 1
            return .retryAt(now + backoffDelay(attempt: attempt), attempt: attempt)
        case .refused:
            return .waitForTrigger
        }
    }

    /// Whether a forced refresh may start now: nil when it may (and `forced` records it), else the
    /// seconds until it may.
    public func admitForced(_ forced: inout ForcedRefreshes, now: Double) -> Double? {
        if let last = forced.lastStartedAt, now - last < backoffCap {
            let wait = nominalBackoff(attempt: forced.inARow) - (now - last)
            if wait > 0 { return wait }
            forced.inARow += 1
        } else {
            forced.inARow = 1
        }
        forced.lastStartedAt = now
        return nil
    }

    /// The lead before expiry at which a token of this lifetime is refreshed, without jitter.
    public func lead(lifetime: Double) -> Double {
        max(0, min(refreshMargin, max(0, lifetime) / 2))
    }

    /// `expiresAt - lead`, moved earlier by the jitter.
    public func refreshTime(issuedAt: Double, expiresAt: Double) -> Double {
        let lead = lead(lifetime: expiresAt - issuedAt)
        return expiresAt - lead - lead * refreshJitter * clampedRandom()
    }

    /// The nominal delay `base · 2^(attempt-1)`, capped, shortened by the jitter. `attempt` ≥ 1.
    public func backoffDelay(attempt: Int) -> Double {
        let nominal = nominalBackoff(attempt: attempt)
        return nominal * (1 - backoffJitter * clampedRandom())
    }

    public func nominalBackoff(attempt: Int) -> Double {
        let exponent = min(max(attempt, 1) - 1, 62)
        var delay = backoffBase
        for _ in 0..<exponent {
            delay *= 2
            if delay >= backoffCap { return backoffCap }
        }
        return min(delay, backoffCap)
    }

    private func clampedRandom() -> Double {
        let value = random()
        guard value.isFinite else { return 0 }
        return min(max(value, 0), 1)
    }
}
