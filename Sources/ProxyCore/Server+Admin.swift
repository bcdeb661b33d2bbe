import Config
import FoundationEssentials
import Logs
import Synchronization

/// What the admin listener asks the server (`AdminService`): readiness, the metrics scrape and
/// forced refreshes. Kept apart from the loops' start and stop in `Server.swift`.
extension Server: AdminService {
    /// Whether the proxy could serve a request now: not draining, and every route (or the route
    /// `name`) holds a usable token. The reason when not.
    func readiness(route name: String?) -> (ready: Bool, why: String) {
        if shared.draining.load(ordering: .relaxed) { return (false, "draining") }
        let states = routeStates
        let chosen = name.map { n in states.filter { $0.name == n } } ?? states
        if let name, chosen.isEmpty { return (false, "no route named \(name)") }
        let now = Date().timeIntervalSince1970
        for state in chosen {
            let view = state.tokens.current()
            if !(view.session == .active && view.usableSnapshot(at: now) != nil) {
                let why = view.failure ?? "no usable token"
                return (false, states.count > 1 ? "route \(state.name): \(why)" : why)
            }
        }
        return (true, "")
    }

    var isReady: Bool { readiness(route: nil).ready }

    /// The /metrics text, built when every loop has handed over a copy of its counts: each loop
    /// copies its own on its own thread (through its task queue), so the request path takes no
    /// lock and no loop writes another's memory. `done` runs on the last loop to answer.
    func collectMetrics(_ done: @escaping @Sendable (String) -> Void) {
        let gathered = Mutex<(left: Int, total: LoopMetrics.Counters)>((perLoop.count, LoopMetrics.Counters()))
        for mine in perLoop {
            mine.ctx.loop.execute { [self] in
                var counts = mine.ctx.metrics.counters
                for route in mine.ctx.routes.withConnections where route.metricsSlot < counts.routes.count {
                    counts.routes[route.metricsSlot].idleConnections += route.upstream.idleCount
                }
                let last = gathered.withLock { g -> LoopMetrics.Counters? in
                    g.total.add(counts)
                    g.left -= 1
                    return g.left == 0 ? g.total : nil
                }
                if let total = last { done(metricsText(total)) }
            }
        }
    }

    private func metricsText(_ total: LoopMetrics.Counters) -> String {
        let (configuration, states) = current.withLock { $0 }
        let (succeeded, failed) = reloads.withLock { $0 }
        var registry = MetricRegistry()
        MetricsRenderer.collect(
            total, routeNames: shared.routeNames, routes: states, openConnections: shared.openConnections.load(ordering: .relaxed),
            ready: isReady, named: configuration.hasRoutes, into: &registry)
        registry.add(MetricCatalog.configReloadsTotal, [MetricLabel("outcome", "success")], succeeded)
        registry.add(MetricCatalog.configReloadsTotal, [MetricLabel("outcome", "failed")], failed)
        registry.add(MetricCatalog.auditLinesLostTotal, [], shared.audit.lost.load(ordering: .relaxed))
        return registry.text
    }

    /// SIGHUP and `POST /refresh[?route=NAME]`: one refresh per route now, each subject to
    /// `RefreshPolicy.admitForced`. nil when no route has that name.
    public func forceRefresh(route name: String? = nil) -> ForcedRefreshResult? {
        let states = routeStates.filter { name == nil || $0.name == name }
        if name != nil, states.isEmpty { return nil }
        var result = ForcedRefreshResult()
        for state in states {
            guard state.tokens.current().session == .active else {
                result.withoutSession.append(state.name)
                continue
            }
            switch state.tokens.forceRefresh() {
            case .started:
                result.started.append(state.name)
            case .deferred(let retryAfter):
                result.deferred.append(state.name)
                result.retryAfter = max(result.retryAfter, retryAfter)
            }
        }
        return result
    }
}
