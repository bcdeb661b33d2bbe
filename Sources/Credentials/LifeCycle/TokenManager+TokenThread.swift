import Synchronization

/// The token thread: it sleeps until a fetch is asked for, a refresh or a deferred forced refresh is
/// due, or the source's input is to be looked at again; each fetch is `performFetch`.
extension TokenManager {
    private enum Job {
        case fetch(RefreshReason)
        case poll
    }

    func run() {
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
}
