import Synchronization

/// Forced refreshes (SIGHUP, `POST /refresh`): admitted by `RefreshPolicy.admitForced`, or deferred
/// to one due time that the token thread keeps (`TokenManager+TokenThread.swift`).
extension TokenManager {
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
    func startForcedFetch() {
        control.inFlight = true
        control.queuedReason = .forced
        control.deferredForcedAt = nil
        condition.broadcast()
    }
}
