import Logs
import Synchronization

/// What a session store did, for `/metrics` (issue 13 point 6): its operations and their failures,
/// the waits for the refresh lease, and how each refresh race ended. Shared by the store (token
/// thread) and the admin handler, hence the lock.
public final class StoreMetrics: Sendable {
    public enum Operation: String, Sendable, CaseIterable {
        /// Reading the session.
        case load
        /// The fenced write of a new session.
        case save
        /// Deleting the session (`logout`).
        case remove
        /// Writing a session back into a store that lost it (a Redis restarted without persistence).
        case restore
        /// Taking the refresh lease (`SET NX PX`).
        case lease
        /// Giving the lease back.
        case release
        /// Watching for other processes' writes: pub/sub and the slow poll.
        case watch
    }

    /// How one refresh race ended for this process.
    public enum LeaseOutcome: String, Sendable, CaseIterable {
        /// This process held the lease and called the identity provider.
        case won
        /// Another process had refreshed meanwhile: its token was read from the store, no call.
        case lost
        /// The write of a refreshed session was refused because the session had moved on (a newer
        /// generation, or another lease holder): nothing was overwritten.
        case fenced
    }

    public struct Counts: Sendable, Equatable {
        public var succeeded = LabeledCounts<Operation>()
        public var failed = LabeledCounts<Operation>()
        public var leaseWaits: UInt64 = 0
        public var leaseWaitSeconds: Double = 0
        public var races = LabeledCounts<LeaseOutcome>()
        /// Whether the last operation reached the store.
        public var available = true
    }

    /// `file` or `redis`.
    public let backend: String
    private let counts = Mutex(Counts())

    public init(backend: String) { self.backend = backend }

    public var snapshot: Counts { counts.withLock { $0 } }

    func record(_ operation: Operation, ok: Bool) {
        counts.withLock {
            if ok { $0.succeeded.increment(operation) } else { $0.failed.increment(operation) }
            $0.available = ok
        }
    }

    func leaseWaited(seconds: Double) {
        counts.withLock {
            $0.leaseWaits += 1
            $0.leaseWaitSeconds += seconds
        }
    }

    func race(_ outcome: LeaseOutcome) {
        counts.withLock { $0.races.increment(outcome) }
    }

    /// The store's series (issue 13 point 6) for /metrics.
    func collect(into registry: inout MetricRegistry) {
        let counts = snapshot
        let backend = MetricLabel("backend", backend)
        for operation in Operation.allCases {
            let op = MetricLabel("operation", operation.rawValue)
            registry.add(MetricCatalog.storeOperationsTotal, [backend, op, MetricLabel("result", "ok")], counts.succeeded[operation])
            registry.add(MetricCatalog.storeOperationsTotal, [backend, op, MetricLabel("result", "error")], counts.failed[operation])
        }
        registry.add(MetricCatalog.storeAvailable, [backend], counts.available ? 1 : 0)
        registry.add(MetricCatalog.storeLeaseWaitsTotal, [backend], counts.leaseWaits)
        registry.add(MetricCatalog.storeLeaseWaitSecondsTotal, [backend], counts.leaseWaitSeconds)
        counts.races.collect(MetricCatalog.refreshRacesTotal, as: "outcome", labels: [backend], into: &registry)
    }
}
