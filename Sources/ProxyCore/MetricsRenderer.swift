import Credentials
import FoundationEssentials
import Logs
import Telemetry
import Upstream

/// Gathers the loops' summed counts into a `MetricRegistry` (each family by its `MetricCatalog`
/// constant, each label a value, docs/OBSERVABILITY.md), and has the token managers and the
/// assertion files add their own series.
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
        AssertionMetrics.shared.collect(into: &registry)
        TelemetryMetrics.shared.collect(into: &registry)
        routeSeries(c.routes, names: routeNames, into: &registry)
        for outcome in ForwardProxyOutcome.allCases where c.unroutedConnects[outcome.rawValue] > 0 {
            registry.add(
                MetricCatalog.forwardProxyConnectsTotal, [MetricLabel("route", ""), MetricLabel("outcome", outcome.label)],
                c.unroutedConnects[outcome.rawValue])
        }
        // With routes:, each route's token series carry its name (CONTRACT "Several APIs"); the
        // registry keeps each family's samples from every route together.
        let now = Date().timeIntervalSince1970
        for state in routes {
            registry.leadingLabels = named ? [MetricLabel("route", state.name)] : []
            state.tokens.collectMetrics(into: &registry, now: now)
        }
        registry.leadingLabels = []
        registry.declare(MetricCatalog.budgetRefusalsTotal)
        for state in routes { state.budget?.collect(route: state.name, into: &registry) }
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
        family(MetricCatalog.forwardProxyConnectsTotal) { route, c in
            for outcome in ForwardProxyOutcome.allCases {
                registry.add(MetricCatalog.forwardProxyConnectsTotal, [route, MetricLabel("outcome", outcome.label)], c.connects[outcome.rawValue])
            }
        }
        family(MetricCatalog.upstreamIdleConnections) { route, c in registry.add(MetricCatalog.upstreamIdleConnections, [route], c.idleConnections) }
        family(MetricCatalog.upstreamSentBytesTotal) { route, c in registry.add(MetricCatalog.upstreamSentBytesTotal, [route], c.upstreamSentBytes) }
        family(MetricCatalog.upstreamReceivedBytesTotal) { route, c in
            registry.add(MetricCatalog.upstreamReceivedBytesTotal, [route], c.upstreamReceivedBytes)
        }
        family(MetricCatalog.scrubbedTotal) { route, c in registry.add(MetricCatalog.scrubbedTotal, [route], c.scrubbed) }
    }
}
