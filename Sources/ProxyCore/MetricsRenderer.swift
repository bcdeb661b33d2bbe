import Credentials
import FoundationEssentials
import Logs
import Upstream

/// Gathers every series of `LoopMetrics` and the token state into a `MetricRegistry`: each family
/// by its `MetricCatalog` constant, each label a value (docs/OBSERVABILITY.md).
enum MetricsRenderer {
    /// `routeNames[i]` names `c.routes[i]` (`SharedProxyState.routeNames`).
    static func collect(
        _ c: LoopMetrics.Counters, routeNames: [String], routes: [RouteState], openConnections: Int, ready: Bool, named: Bool,
        into registry: inout MetricRegistry
    ) {
        let requests = MetricCatalog.requestsTotal
        registry.declare(requests)
        if named {
            // By route; route="" for requests that matched none (or a route a reload removed).
            var unrouted = c.requestsByCode
            for (name, counts) in zip(routeNames, c.routes) {
                for (code, n) in counts.requestsByCode.enumerated() where n > 0 {
                    registry.add(requests, [MetricLabel("route", name), MetricLabel("code", "\(code)")], n)
                    unrouted[code] -= n
                }
            }
            for (code, n) in unrouted.enumerated() where n > 0 {
                registry.add(requests, [MetricLabel("route", ""), MetricLabel("code", "\(code)")], n)
            }
        } else {
            for (code, n) in c.requestsByCode.enumerated() where n > 0 {
                registry.add(requests, [MetricLabel("code", "\(code)")], n)
            }
        }
        for counter in LoopMetrics.plainCounters {
            registry.add(counter.family, [], c[keyPath: counter.field])
        }
        registry.add(MetricCatalog.openTunnels, [], c.tunnelsOpened - c.tunnelsClosed)
        registry.add(MetricCatalog.upstreamLatencySeconds, [], c.upstreamLatency)
        registry.add(MetricCatalog.openConnections, [], openConnections)
        registry.add(MetricCatalog.ready, [], ready ? 1 : 0)
        // One count for the process (the files are read by whichever route names them).
        for reason in AssertionMetrics.Reason.allCases {
            registry.add(MetricCatalog.assertionsRefusedTotal, [MetricLabel("reason", reason.rawValue)], AssertionMetrics.shared.count(reason))
        }
        routeSeries(c.routes, names: routeNames, into: &registry)
        // With routes:, each route's token series carry its name (CONTRACT "Several APIs"); the
        // registry keeps each family's samples from every route together.
        for state in routes {
            registry.leadingLabels = named ? [MetricLabel("route", state.name)] : []
            tokenSeries(state.tokens, into: &registry)
        }
        registry.leadingLabels = []
    }

    /// The per-route series of issue 22; every sample carries `route`.
    static func routeSeries(_ routes: [RouteCounters], names: [String], into registry: inout MetricRegistry) {
        let all = Array(zip(names, routes))
        func family(_ family: MetricFamily, _ samples: (MetricLabel, RouteCounters) -> Void) {
            registry.declare(family)
            for (name, counters) in all { samples(MetricLabel("route", name), counters) }
        }
        family(MetricCatalog.requestDurationSeconds) { route, c in
            for (i, histogram) in c.requestDuration.enumerated() {
                registry.add(MetricCatalog.requestDurationSeconds, [route, MetricLabel("code_class", "\(i + 1)xx")], histogram)
            }
        }
        family(MetricCatalog.upstreamResponseSeconds) { route, c in registry.add(MetricCatalog.upstreamResponseSeconds, [route], c.upstreamResponse) }
        family(MetricCatalog.upstreamConnectSeconds) { route, c in
            registry.add(MetricCatalog.upstreamConnectSeconds, [route, MetricLabel("tls", "false")], c.upstreamConnect[0])
            registry.add(MetricCatalog.upstreamConnectSeconds, [route, MetricLabel("tls", "true")], c.upstreamConnect[1])
        }
        family(MetricCatalog.tokenWaitSeconds) { route, c in registry.add(MetricCatalog.tokenWaitSeconds, [route], c.tokenWait) }
        family(MetricCatalog.upstream401Total) { route, c in
            for result in Upstream401Result.allCases {
                registry.add(MetricCatalog.upstream401Total, [route, MetricLabel("result", result.label)], c.upstream401[result.rawValue])
            }
        }
        family(MetricCatalog.stormGuardActivationsTotal) { route, c in
            registry.add(MetricCatalog.stormGuardActivationsTotal, [route], c.stormGuardActivations)
        }
        family(MetricCatalog.upstreamConnectionsOpenedTotal) { route, c in
            registry.add(MetricCatalog.upstreamConnectionsOpenedTotal, [route], c.connectionsOpened)
        }
        family(MetricCatalog.upstreamConnectionsReusedTotal) { route, c in
            registry.add(MetricCatalog.upstreamConnectionsReusedTotal, [route], c.connectionsReused)
        }
        family(MetricCatalog.upstreamConnectionsRetiredTotal) { route, c in
            for reason in UpstreamRetirement.allCases {
                registry.add(MetricCatalog.upstreamConnectionsRetiredTotal, [route, MetricLabel("reason", reason.label)], c.retirements[reason.rawValue])
            }
        }
        family(MetricCatalog.upstreamIdleConnections) { route, c in registry.add(MetricCatalog.upstreamIdleConnections, [route], c.idleConnections) }
        family(MetricCatalog.upstreamSentBytesTotal) { route, c in registry.add(MetricCatalog.upstreamSentBytesTotal, [route], c.upstreamSentBytes) }
        family(MetricCatalog.upstreamReceivedBytesTotal) { route, c in
            registry.add(MetricCatalog.upstreamReceivedBytesTotal, [route], c.upstreamReceivedBytes)
        }
    }

    static func tokenSeries(_ tokens: TokenManager, into registry: inout MetricRegistry) {
        let now = Date().timeIntervalSince1970
        registry.declare(MetricCatalog.tokenExpirySeconds)
        if let expiresAt = tokens.current().snapshot?.expiresAt {
            registry.add(MetricCatalog.tokenExpirySeconds, [], Int((expiresAt - now).rounded(.down)))
        }
        let stats = tokens.stats
        registry.declare(MetricCatalog.tokenLastSuccessAgeSeconds)
        if let last = stats.lastSuccessAt {
            registry.add(MetricCatalog.tokenLastSuccessAgeSeconds, [], Int(max(now - last, 0).rounded(.down)))
        }
        for reason in FetchFailureReason.allCases {
            registry.add(MetricCatalog.tokenFetchFailuresTotal, [MetricLabel("reason", reason.rawValue)], stats.failures(reason))
        }
        registry.add(MetricCatalog.tokenRefreshSeconds, [], stats.refreshDuration)
        TokenMetrics.collect(tokens, into: &registry)
    }
}

/// Series about the token's life cycle, from the manager's counters.
enum TokenMetrics {
    static func collect(_ tokens: TokenManager, into registry: inout MetricRegistry) {
        let stats = tokens.stats
        for result in RefreshResult.allCases {
            registry.add(
                MetricCatalog.refreshesTotal, [MetricLabel("source", tokens.kind), MetricLabel("outcome", result.rawValue)], stats.count(of: result))
        }
        // Backoff state: how many passing failures in a row, and when the next try (or proactive refresh) is due.
        registry.add(MetricCatalog.refreshConsecutiveFailures, [], stats.consecutiveFailures)
        if let next = stats.nextRefreshAt {
            registry.add(MetricCatalog.nextRefreshTimestampSeconds, [], Int(next))
        }
        if let store = tokens.storeMetrics { storeSeries(store, into: &registry) }
        if let last = stats.lastRefreshAt {
            registry.add(MetricCatalog.lastRefreshTimestampSeconds, [], Int(last))
        }
    }
}

extension TokenMetrics {
    /// The session store's series (issue 13 point 6), from `StoreMetrics`.
    static func storeSeries(_ store: StoreMetrics, into registry: inout MetricRegistry) {
        let counts = store.snapshot
        let backend = MetricLabel("backend", store.backend)
        for operation in StoreMetrics.Operation.allCases {
            let op = MetricLabel("operation", operation.rawValue)
            registry.add(MetricCatalog.storeOperationsTotal, [backend, op, MetricLabel("result", "ok")], counts.succeeded[operation] ?? 0)
            registry.add(MetricCatalog.storeOperationsTotal, [backend, op, MetricLabel("result", "error")], counts.failed[operation] ?? 0)
        }
        registry.add(MetricCatalog.storeAvailable, [backend], counts.available ? 1 : 0)
        registry.add(MetricCatalog.storeLeaseWaitsTotal, [backend], counts.leaseWaits)
        registry.add(MetricCatalog.storeLeaseWaitSecondsTotal, [backend], counts.leaseWaitSeconds)
        for outcome in StoreMetrics.LeaseOutcome.allCases {
            registry.add(MetricCatalog.refreshRacesTotal, [backend, MetricLabel("outcome", outcome.rawValue)], counts.races[outcome] ?? 0)
        }
    }
}
