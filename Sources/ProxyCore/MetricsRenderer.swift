import Credentials
import FoundationEssentials
import Logs
import Upstream

/// The Prometheus text format (version 0.0.4) for every series in `LoopMetrics` and the token
/// state. Each family's `# HELP` and `# TYPE` lines come from `MetricCatalog`.
enum MetricsRenderer {
    /// `routeNames[i]` names `c.routes[i]` (`SharedProxyState.routeNames`).
    static func render(
        _ c: LoopMetrics.Counters, routeNames: [String], routes: [RouteState], openConnections: Int, ready: Bool, named: Bool
    ) -> String {
        var out = ""
        out += MetricCatalog.header("tokenproxy_requests_total")
        if named {
            // By route; route="" for requests that matched none (or a route a reload removed).
            var unrouted = c.requestsByCode
            for (name, counts) in zip(routeNames, c.routes) {
                for (code, n) in counts.requestsByCode.enumerated() where n > 0 {
                    out += "tokenproxy_requests_total{route=\"\(name)\",code=\"\(code)\"} \(n)\n"
                    unrouted[code] -= n
                }
            }
            for (code, n) in unrouted.enumerated() where n > 0 {
                out += "tokenproxy_requests_total{route=\"\",code=\"\(code)\"} \(n)\n"
            }
        } else {
            for (code, n) in c.requestsByCode.enumerated() where n > 0 {
                out += "tokenproxy_requests_total{code=\"\(code)\"} \(n)\n"
            }
        }
        for counter in LoopMetrics.plainCounters {
            out += MetricCatalog.header(counter.name)
            out += "\(counter.name) \(c[keyPath: counter.field])\n"
        }
        out += MetricCatalog.header("tokenproxy_open_tunnels")
        out += "tokenproxy_open_tunnels \(c.tunnelsOpened - c.tunnelsClosed)\n"
        out += MetricCatalog.header("tokenproxy_upstream_latency_seconds")
        for (bound, count) in zip(LoopMetrics.latencyBounds, c.cumulativeLatencyBuckets) {
            out += "tokenproxy_upstream_latency_seconds_bucket{le=\"\(bound)\"} \(count)\n"
        }
        out += "tokenproxy_upstream_latency_seconds_bucket{le=\"+Inf\"} \(c.latencyCount)\n"
        out += "tokenproxy_upstream_latency_seconds_sum \(c.latencySum)\n"
        out += "tokenproxy_upstream_latency_seconds_count \(c.latencyCount)\n"
        out += MetricCatalog.header("tokenproxy_open_connections")
        out += "tokenproxy_open_connections \(openConnections)\n"
        out += MetricCatalog.header("tokenproxy_ready")
        out += "tokenproxy_ready \(ready ? 1 : 0)\n"
        // One count for the process (the files are read by whichever route names them).
        out += MetricCatalog.header("tokenproxy_assertions_refused_total")
        for reason in AssertionMetrics.Reason.allCases {
            out += "tokenproxy_assertions_refused_total{reason=\"\(reason.rawValue)\"} \(AssertionMetrics.shared.count(reason))\n"
        }
        out += routeSeries(c.routes, names: routeNames)
        // With routes:, each route's token series carry its name (CONTRACT "Several APIs").
        let perRoute = routes.map { state -> String in
            let text = tokenSeries(state.tokens)
            return named ? labelled(text, route: state.name) : text
        }
        out += merged(perRoute)
        return out
    }

    /// The per-route series of issue 22; every sample carries `route`.
    static func routeSeries(_ routes: [RouteCounters], names: [String]) -> String {
        let all = Array(zip(names, routes))
        var out = ""
        func family(_ name: String, _ sample: (String, RouteCounters) -> String) {
            out += MetricCatalog.header(name)
            for (route, counters) in all { out += sample("route=\"\(route)\"", counters) }
        }
        family("tokenproxy_request_duration_seconds") { route, c in
            c.requestDuration.indices.map { i in
                histogram("tokenproxy_request_duration_seconds", "\(route),code_class=\"\(i + 1)xx\"", c.requestDuration[i])
            }.joined()
        }
        family("tokenproxy_upstream_response_seconds") { route, c in histogram("tokenproxy_upstream_response_seconds", route, c.upstreamResponse) }
        family("tokenproxy_upstream_connect_seconds") { route, c in
            histogram("tokenproxy_upstream_connect_seconds", "\(route),tls=\"false\"", c.upstreamConnect[0])
                + histogram("tokenproxy_upstream_connect_seconds", "\(route),tls=\"true\"", c.upstreamConnect[1])
        }
        family("tokenproxy_token_wait_seconds") { route, c in histogram("tokenproxy_token_wait_seconds", route, c.tokenWait) }
        family("tokenproxy_upstream_401_total") { route, c in
            Upstream401Result.allCases.map { "tokenproxy_upstream_401_total{\(route),result=\"\($0.label)\"} \(c.upstream401[$0.rawValue])\n" }.joined()
        }
        family("tokenproxy_storm_guard_activations_total") { route, c in "tokenproxy_storm_guard_activations_total{\(route)} \(c.stormGuardActivations)\n" }
        family("tokenproxy_upstream_connections_opened_total") { route, c in
            "tokenproxy_upstream_connections_opened_total{\(route)} \(c.connectionsOpened)\n"
        }
        family("tokenproxy_upstream_connections_reused_total") { route, c in
            "tokenproxy_upstream_connections_reused_total{\(route)} \(c.connectionsReused)\n"
        }
        family("tokenproxy_upstream_connections_retired_total") { route, c in
            UpstreamRetirement.allCases.map {
                "tokenproxy_upstream_connections_retired_total{\(route),reason=\"\($0.label)\"} \(c.retirements[$0.rawValue])\n"
            }.joined()
        }
        family("tokenproxy_upstream_idle_connections") { route, c in "tokenproxy_upstream_idle_connections{\(route)} \(c.idleConnections)\n" }
        family("tokenproxy_upstream_sent_bytes_total") { route, c in "tokenproxy_upstream_sent_bytes_total{\(route)} \(c.upstreamSentBytes)\n" }
        family("tokenproxy_upstream_received_bytes_total") { route, c in
            "tokenproxy_upstream_received_bytes_total{\(route)} \(c.upstreamReceivedBytes)\n"
        }
        return out
    }

    /// One histogram's `_bucket` (cumulative, then `+Inf`), `_sum` and `_count` samples.
    static func histogram(_ name: String, _ labels: String, _ h: Histogram) -> String {
        let sep = labels.isEmpty ? "" : ","
        var out = ""
        for (bound, count) in zip(Histogram.bounds, h.cumulative) {
            out += "\(name)_bucket{\(labels)\(sep)le=\"\(bound)\"} \(count)\n"
        }
        out += "\(name)_bucket{\(labels)\(sep)le=\"+Inf\"} \(h.count)\n"
        let braces = labels.isEmpty ? "" : "{\(labels)}"
        out += "\(name)_sum\(braces) \(h.sum)\n"
        out += "\(name)_count\(braces) \(h.count)\n"
        return out
    }

    static func tokenSeries(_ tokens: TokenManager) -> String {
        var out = MetricCatalog.header("tokenproxy_token_expiry_seconds")
        let now = Date().timeIntervalSince1970
        if let expiresAt = tokens.current().snapshot?.expiresAt {
            out += "tokenproxy_token_expiry_seconds \(Int((expiresAt - now).rounded(.down)))\n"
        }
        let stats = tokens.stats
        out += MetricCatalog.header("tokenproxy_token_last_success_age_seconds")
        if let last = stats.lastSuccessAt {
            out += "tokenproxy_token_last_success_age_seconds \(Int(max(now - last, 0).rounded(.down)))\n"
        }
        out += MetricCatalog.header("tokenproxy_token_fetch_failures_total")
        for reason in FetchFailureReason.allCases {
            out += "tokenproxy_token_fetch_failures_total{reason=\"\(reason.rawValue)\"} \(stats.failures(reason))\n"
        }
        out += MetricCatalog.header("tokenproxy_token_refresh_seconds")
        out += histogram("tokenproxy_token_refresh_seconds", "", stats.refreshDuration)
        return out + TokenMetrics.render(tokens)
    }

    /// Every sample line of `text` with `route="NAME"` as its first label.
    static func labelled(_ text: String, route: String) -> String {
        var out = ""
        for line in text.split(separator: "\n", omittingEmptySubsequences: true) {
            if line.hasPrefix("#") {
                out += line + "\n"
            } else if let brace = line.firstIndex(of: "{") {
                out += line[...brace] + "route=\"\(route)\"," + line[line.index(after: brace)...] + "\n"
            } else if let space = line.firstIndex(of: " ") {
                out += line[..<space] + "{route=\"\(route)\"}" + line[space...] + "\n"
            }
        }
        return out
    }

    /// The routes' texts as one exposition: each family's HELP and TYPE once, then its samples from every route.
    static func merged(_ texts: [String]) -> String {
        guard texts.count > 1 else { return texts.first ?? "" }
        var order: [String] = []
        var headers: [String: String] = [:]
        var samples: [String: String] = [:]
        for text in texts {
            var family = ""
            for line in text.split(separator: "\n", omittingEmptySubsequences: true) {
                if line.hasPrefix("# HELP ") || line.hasPrefix("# TYPE ") {
                    family = String(line.dropFirst(7).prefix { $0 != " " })
                    if headers[family] == nil { order.append(family) }
                    if !(headers[family]?.contains(line) ?? false) { headers[family, default: ""] += line + "\n" }
                } else {
                    samples[family, default: ""] += line + "\n"
                }
            }
        }
        return order.map { headers[$0, default: ""] + samples[$0, default: ""] }.joined()
    }
}

/// Series about the token's life cycle, from the manager's counters.
enum TokenMetrics {
    static func render(_ tokens: TokenManager) -> String {
        let stats = tokens.stats
        var out = MetricCatalog.header("tokenproxy_refreshes_total")
        for result in RefreshResult.allCases {
            out += "tokenproxy_refreshes_total{source=\"\(tokens.kind)\",outcome=\"\(result.rawValue)\"} \(stats.count(of: result))\n"
        }
        // Backoff state: how many passing failures in a row, and when the next try (or proactive refresh) is due.
        out += MetricCatalog.header("tokenproxy_refresh_consecutive_failures")
        out += "tokenproxy_refresh_consecutive_failures \(stats.consecutiveFailures)\n"
        if let next = stats.nextRefreshAt {
            out += MetricCatalog.header("tokenproxy_next_refresh_timestamp_seconds")
            out += "tokenproxy_next_refresh_timestamp_seconds \(Int(next))\n"
        }
        if let store = tokens.storeMetrics { out += storeSeries(store) }
        if let last = stats.lastRefreshAt {
            out += MetricCatalog.header("tokenproxy_last_refresh_timestamp_seconds")
            out += "tokenproxy_last_refresh_timestamp_seconds \(Int(last))\n"
        }
        return out
    }
}

extension TokenMetrics {
    /// The session store's series (issue 13 point 6), from `StoreMetrics`.
    static func storeSeries(_ store: StoreMetrics) -> String {
        let counts = store.snapshot
        let backend = "backend=\"\(store.backend)\""
        var out = MetricCatalog.header("tokenproxy_store_operations_total")
        for operation in StoreMetrics.Operation.allCases {
            let op = "operation=\"\(operation.rawValue)\""
            out += "tokenproxy_store_operations_total{\(backend),\(op),result=\"ok\"} \(counts.succeeded[operation] ?? 0)\n"
            out += "tokenproxy_store_operations_total{\(backend),\(op),result=\"error\"} \(counts.failed[operation] ?? 0)\n"
        }
        out += MetricCatalog.header("tokenproxy_store_available")
        out += "tokenproxy_store_available{\(backend)} \(counts.available ? 1 : 0)\n"
        out += MetricCatalog.header("tokenproxy_store_lease_waits_total")
        out += "tokenproxy_store_lease_waits_total{\(backend)} \(counts.leaseWaits)\n"
        out += MetricCatalog.header("tokenproxy_store_lease_wait_seconds_total")
        out += "tokenproxy_store_lease_wait_seconds_total{\(backend)} \(counts.leaseWaitSeconds)\n"
        out += MetricCatalog.header("tokenproxy_refresh_races_total")
        for outcome in StoreMetrics.LeaseOutcome.allCases {
            out += "tokenproxy_refresh_races_total{\(backend),outcome=\"\(outcome.rawValue)\"} \(counts.races[outcome] ?? 0)\n"
        }
        return out
    }
}
