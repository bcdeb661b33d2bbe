import Credentials
import FoundationEssentials

/// The Prometheus text format (version 0.0.4) for every series in `LoopMetrics` and the token state.
enum MetricsRenderer {
    static func render(_ c: LoopMetrics.Counters, routes: [RouteState], openConnections: Int, ready: Bool, named: Bool) -> String {
        var out = ""
        func series(_ name: String, _ type: String, _ help: String) {
            out += "# HELP \(name) \(help)\n# TYPE \(name) \(type)\n"
        }
        series("tokenproxy_requests_total", "counter", "Requests answered, by HTTP status code.")
        if named {
            // By route; route="" for requests that matched none (or a route a reload removed).
            var unrouted = c.requestsByCode
            for state in routes {
                let counts = state.requestsByCode.withLock { $0 }
                for (code, n) in counts.enumerated() where n > 0 {
                    out += "tokenproxy_requests_total{route=\"\(state.name)\",code=\"\(code)\"} \(n)\n"
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
            series(counter.name, counter.type, counter.help)
            out += "\(counter.name) \(c[keyPath: counter.field])\n"
        }
        series("tokenproxy_open_tunnels", "gauge", "Tunnels open now.")
        out += "tokenproxy_open_tunnels \(c.tunnelsOpened - c.tunnelsClosed)\n"
        series("tokenproxy_upstream_latency_seconds", "histogram", "Time from sending a request upstream to its response head.")
        for (bound, count) in zip(LoopMetrics.latencyBounds, c.cumulativeLatencyBuckets) {
            out += "tokenproxy_upstream_latency_seconds_bucket{le=\"\(bound)\"} \(count)\n"
        }
        out += "tokenproxy_upstream_latency_seconds_bucket{le=\"+Inf\"} \(c.latencyCount)\n"
        out += "tokenproxy_upstream_latency_seconds_sum \(c.latencySum)\n"
        out += "tokenproxy_upstream_latency_seconds_count \(c.latencyCount)\n"
        series("tokenproxy_open_connections", "gauge", "Client connections open now.")
        out += "tokenproxy_open_connections \(openConnections)\n"
        series("tokenproxy_ready", "gauge", "1 while a usable token is held.")
        out += "tokenproxy_ready \(ready ? 1 : 0)\n"
        // With routes:, each route's token series carry its name (CONTRACT "Several APIs").
        let perRoute = routes.map { state -> String in
            let text = tokenSeries(state.tokens)
            return named ? labelled(text, route: state.name) : text
        }
        out += merged(perRoute)
        return out
    }

    static func tokenSeries(_ tokens: TokenManager) -> String {
        var out = "# HELP tokenproxy_token_expiry_seconds Seconds until the current access token expires (absent for tokens that do not expire).\n"
        out += "# TYPE tokenproxy_token_expiry_seconds gauge\n"
        if let expiresAt = tokens.current().snapshot?.expiresAt {
            out += "tokenproxy_token_expiry_seconds \(Int((expiresAt - Date().timeIntervalSince1970).rounded(.down)))\n"
        }
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
        var out = "# HELP tokenproxy_refreshes_total Calls to the token source, by outcome.\n# TYPE tokenproxy_refreshes_total counter\n"
        for result in RefreshResult.allCases {
            out += "tokenproxy_refreshes_total{source=\"\(tokens.kind)\",outcome=\"\(result.rawValue)\"} \(stats.count(of: result))\n"
        }
        // Backoff state: how many passing failures in a row, and when the next try (or proactive refresh) is due.
        out += "# HELP tokenproxy_refresh_consecutive_failures Passing refresh failures in a row (0 after a success).\n# TYPE tokenproxy_refresh_consecutive_failures gauge\n"
        out += "tokenproxy_refresh_consecutive_failures \(stats.consecutiveFailures)\n"
        if let next = stats.nextRefreshAt {
            out += "# HELP tokenproxy_next_refresh_timestamp_seconds When the next refresh (proactive, or a retry after a failure) is due.\n# TYPE tokenproxy_next_refresh_timestamp_seconds gauge\n"
            out += "tokenproxy_next_refresh_timestamp_seconds \(Int(next))\n"
        }
        if let store = tokens.storeMetrics { out += storeSeries(store) }
        out += "# HELP tokenproxy_assertions_refused_total Assertions read from a file that were not sent: expired, or no JWT.\n# TYPE tokenproxy_assertions_refused_total counter\n"
        for reason in AssertionMetrics.Reason.allCases {
            out += "tokenproxy_assertions_refused_total{reason=\"\(reason.rawValue)\"} \(AssertionMetrics.shared.count(reason))\n"
        }
        if let last = stats.lastRefreshAt {
            out += "# HELP tokenproxy_last_refresh_timestamp_seconds When the token source last answered.\n# TYPE tokenproxy_last_refresh_timestamp_seconds gauge\n"
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
        var out = "# HELP tokenproxy_store_operations_total Session store operations, by operation and result.\n# TYPE tokenproxy_store_operations_total counter\n"
        for operation in StoreMetrics.Operation.allCases {
            let op = "operation=\"\(operation.rawValue)\""
            out += "tokenproxy_store_operations_total{\(backend),\(op),result=\"ok\"} \(counts.succeeded[operation] ?? 0)\n"
            out += "tokenproxy_store_operations_total{\(backend),\(op),result=\"error\"} \(counts.failed[operation] ?? 0)\n"
        }
        out += "# HELP tokenproxy_store_available 1 while the last store operation reached the store.\n# TYPE tokenproxy_store_available gauge\n"
        out += "tokenproxy_store_available{\(backend)} \(counts.available ? 1 : 0)\n"
        out += "# HELP tokenproxy_store_lease_waits_total Refreshes that waited for the lease another process held.\n# TYPE tokenproxy_store_lease_waits_total counter\n"
        out += "tokenproxy_store_lease_waits_total{\(backend)} \(counts.leaseWaits)\n"
        out += "# HELP tokenproxy_store_lease_wait_seconds_total Time spent waiting for the lease.\n# TYPE tokenproxy_store_lease_wait_seconds_total counter\n"
        out += "tokenproxy_store_lease_wait_seconds_total{\(backend)} \(counts.leaseWaitSeconds)\n"
        out += "# HELP tokenproxy_refresh_races_total How refreshes under the store's lock ended: won (this process called the identity provider), lost (another process had refreshed), fenced (a stale write refused).\n# TYPE tokenproxy_refresh_races_total counter\n"
        for outcome in StoreMetrics.LeaseOutcome.allCases {
            out += "tokenproxy_refresh_races_total{\(backend),outcome=\"\(outcome.rawValue)\"} \(counts.races[outcome] ?? 0)\n"
        }
        return out
    }
}
