import FoundationEssentials
import Logs

extension TokenManager {
    /// This manager's series for /metrics (docs/OBSERVABILITY.md), from its counters: the token's
    /// life, the calls to its source by outcome and by failure reason, the backoff, and its store's.
    public func collectMetrics(into registry: inout MetricRegistry, now: Double = Date().timeIntervalSince1970) {
        registry.declare(MetricCatalog.tokenExpirySeconds)
        if let expiresAt = current().snapshot?.expiresAt {
            registry.add(MetricCatalog.tokenExpirySeconds, [], Int((expiresAt - now).rounded(.down)))
        }
        let stats = stats
        registry.declare(MetricCatalog.tokenLastSuccessAgeSeconds)
        if let last = stats.lastSuccessAt {
            registry.add(MetricCatalog.tokenLastSuccessAgeSeconds, [], Int(max(now - last, 0).rounded(.down)))
        }
        stats.failureReasons.collect(MetricCatalog.tokenFetchFailuresTotal, as: "reason", into: &registry)
        registry.add(MetricCatalog.tokenRefreshSeconds, [], stats.refreshDuration)
        stats.outcomes.collect(MetricCatalog.refreshesTotal, as: "outcome", labels: [MetricLabel("source", kind)], into: &registry)
        // Backoff state: how many passing failures in a row, and when the next try (or proactive refresh) is due.
        registry.add(MetricCatalog.refreshConsecutiveFailures, [], stats.consecutiveFailures)
        if let next = stats.nextRefreshAt {
            registry.add(MetricCatalog.nextRefreshTimestampSeconds, [], Int(next))
        }
        storeMetrics?.collect(into: &registry)
        if let last = stats.lastRefreshAt {
            registry.add(MetricCatalog.lastRefreshTimestampSeconds, [], Int(last))
        }
    }
}
