import Config

/// A token bucket (CONTRACT.md "Budgets": `rate` and `burst`), pure: time is passed in (monotonic
/// seconds), so it is tested without a clock. It starts full; each request takes one token; tokens
/// come back at `rate` per second up to `capacity`.
struct TokenBucket: Equatable, Sendable {
    /// Tokens per second.
    let rate: Double
    let capacity: Double
    private(set) var tokens: Double
    private(set) var updatedAt: Double

    init(rate: Double, capacity: Int, now: Double) {
        self.rate = rate
        self.capacity = Double(capacity)
        tokens = Double(capacity)
        updatedAt = now
    }

    /// Takes one token at `now`: nil when there was one, else the whole seconds until one is free
    /// (at least 1, the `Retry-After` of the refusal). A `now` earlier than the last one (two
    /// loops' clocks read a moment apart) adds nothing.
    mutating func take(now: Double) -> Int? {
        if now > updatedAt {
            tokens = min(capacity, tokens + (now - updatedAt) * rate)
            updatedAt = now
        }
        if tokens >= 1 {
            tokens -= 1
            return nil
        }
        let seconds = ((1 - tokens) / rate).rounded(.up)
        return seconds >= Double(Int.max) ? Int.max : max(1, Int(seconds))
    }
}

/// Why a budget refused a request: the `reason` label of `tokenproxy_budget_refusals_total`.
public enum BudgetRefusal: String, CaseIterable, Equatable, Sendable {
    /// `max_concurrent` requests of the caller were in flight.
    case concurrency
    /// The caller's bucket (`rate`, `burst`) was empty.
    case rate
}

/// One caller's budget on one route, pure: its requests in flight and its bucket. The shared,
/// locked map of callers is `RouteBudget`.
struct CallerBudget: Equatable, Sendable {
    let maxConcurrent: Int?
    private(set) var inFlight = 0
    private(set) var bucket: TokenBucket?

    enum Decision: Equatable, Sendable {
        case admitted
        /// 429 `rate_limited` with this `Retry-After`.
        case refused(BudgetRefusal, retryAfter: Int)
    }

    init(_ configuration: BudgetConfiguration, now: Double) {
        maxConcurrent = configuration.maxConcurrent
        bucket = configuration.ratePerSecond.map { TokenBucket(rate: $0, capacity: configuration.burst, now: now) }
    }

    /// One more request: over `maxConcurrent` it is refused at once (`Retry-After: 1`, CONTRACT) and
    /// takes no token; with a token it is in flight until `release`.
    mutating func admit(now: Double) -> Decision {
        if let maxConcurrent, inFlight >= maxConcurrent { return .refused(.concurrency, retryAfter: 1) }
        if bucket != nil, let wait = bucket!.take(now: now) { return .refused(.rate, retryAfter: wait) }
        inFlight += 1
        return .admitted
    }

    /// A request admitted earlier ended (once per admitted request: `RouteBudget.Hold`).
    mutating func release() {
        inFlight = max(0, inFlight - 1)
    }
}
