/// Every metric family /metrics can expose, declared once (Envoy's habit): its name, type, labels
/// and help. `MetricsRenderer` takes each family's `# HELP` and `# TYPE` lines from here, and
/// docs/OBSERVABILITY.md lists the same names (a test compares them).
struct MetricFamily: Sendable {
    let name: String
    let type: String
    /// The labels its samples carry (`route` is added to the token families with `routes:`).
    let labels: [String]
    let help: String
}

enum MetricCatalog {
    static let families: [MetricFamily] = [
        // Requests and clients
        MetricFamily(name: "tokenproxy_requests_total", type: "counter", labels: ["route", "code"], help: "Requests answered, by HTTP status code."),
        MetricFamily(
            name: "tokenproxy_request_duration_seconds", type: "histogram", labels: ["route", "code_class"],
            help: "Time from a request's head to the last byte of its answer queued for the client, by the status's class."),
        MetricFamily(
            name: "tokenproxy_upstream_401_retries_total", type: "counter", labels: [], help: "Requests retried once after an upstream 401."),
        MetricFamily(
            name: "tokenproxy_upstream_401_total", type: "counter", labels: ["route", "result"],
            help: "Upstream 401 answers to a request sent with a token, by what followed: retried, passed_through, login_required, token_unavailable."),
        MetricFamily(
            name: "tokenproxy_storm_guard_activations_total", type: "counter", labels: ["route"],
            help: "Times a freshly refreshed token was refused too and upstream 401s were passed on without a refresh for a while."),
        MetricFamily(
            name: "tokenproxy_requests_waited_for_token_total", type: "counter", labels: [], help: "Requests that had to wait for a refresh."),
        MetricFamily(
            name: "tokenproxy_token_wait_seconds", type: "histogram", labels: ["route"], help: "Time requests spent waiting for a token."),
        MetricFamily(
            name: "tokenproxy_client_received_bytes_total", type: "counter", labels: [], help: "Request body bytes received from clients."),
        MetricFamily(name: "tokenproxy_client_sent_bytes_total", type: "counter", labels: [], help: "Response bytes sent to clients."),
        MetricFamily(
            name: "tokenproxy_tunnels_total", type: "counter", labels: [],
            help: "Connections that became a tunnel after 101 Switching Protocols (WebSocket)."),
        MetricFamily(name: "tokenproxy_open_tunnels", type: "gauge", labels: [], help: "Tunnels open now."),
        MetricFamily(
            name: "tokenproxy_dropped_header_fields_total", type: "counter", labels: [],
            help: "Request header fields not forwarded because their names hold an underscore (spoofable through WSGI/CGI)."),
        MetricFamily(name: "tokenproxy_open_connections", type: "gauge", labels: [], help: "Client connections open now."),
        MetricFamily(name: "tokenproxy_ready", type: "gauge", labels: [], help: "1 while a usable token is held."),
        // The upstream
        MetricFamily(
            name: "tokenproxy_upstream_latency_seconds", type: "histogram", labels: [],
            help: "Time from sending a request upstream to its response head."),
        MetricFamily(
            name: "tokenproxy_upstream_response_seconds", type: "histogram", labels: ["route"],
            help: "Time from the request's last byte written upstream to the response head."),
        MetricFamily(
            name: "tokenproxy_upstream_connect_seconds", type: "histogram", labels: ["route", "tls"],
            help: "Time to open an upstream connection: TCP, TLS and any proxy tunnel."),
        MetricFamily(
            name: "tokenproxy_upstream_connections_opened_total", type: "counter", labels: ["route"], help: "Upstream connections opened."),
        MetricFamily(
            name: "tokenproxy_upstream_connections_reused_total", type: "counter", labels: ["route"],
            help: "Requests sent on an idle pooled upstream connection."),
        MetricFamily(
            name: "tokenproxy_upstream_connections_retired_total", type: "counter", labels: ["route", "reason"],
            help: "Upstream connections closed, by reason."),
        MetricFamily(
            name: "tokenproxy_upstream_idle_connections", type: "gauge", labels: ["route"], help: "Idle upstream connections in the pools now."),
        MetricFamily(
            name: "tokenproxy_upstream_sent_bytes_total", type: "counter", labels: ["route"], help: "Bytes written to upstream connections."),
        MetricFamily(
            name: "tokenproxy_upstream_received_bytes_total", type: "counter", labels: ["route"], help: "Bytes read from upstream connections."),
        MetricFamily(
            name: "tokenproxy_upstream_fresh_connection_retries_total", type: "counter", labels: [],
            help: "Requests sent again on a fresh upstream connection after a reused one closed before answering."),
        // Tokens (labelled with `route` when the file has `routes:`)
        MetricFamily(
            name: "tokenproxy_token_expiry_seconds", type: "gauge", labels: [],
            help: "Seconds until the current access token expires (absent for tokens that do not expire)."),
        MetricFamily(
            name: "tokenproxy_token_last_success_age_seconds", type: "gauge", labels: [],
            help: "Seconds since the token source last handed over a usable token (absent before the first)."),
        MetricFamily(name: "tokenproxy_refreshes_total", type: "counter", labels: ["source", "outcome"], help: "Calls to the token source, by outcome."),
        MetricFamily(
            name: "tokenproxy_assertions_refused_total", type: "counter", labels: ["reason"],
            help: "Assertions read from a file (client_assertion_file, assertion_file) that were not sent: expired, or no JWT."),
        MetricFamily(
            name: "tokenproxy_token_fetch_failures_total", type: "counter", labels: ["reason"],
            help: "Failed calls to the token source, by reason: network, timeout, http_5xx, http_429, refused, bad_answer, client_misconfigured."),
        MetricFamily(
            name: "tokenproxy_token_refresh_seconds", type: "histogram", labels: [], help: "How long each call to the token source took."),
        MetricFamily(
            name: "tokenproxy_refresh_consecutive_failures", type: "gauge", labels: [], help: "Passing refresh failures in a row (0 after a success)."),
        MetricFamily(
            name: "tokenproxy_next_refresh_timestamp_seconds", type: "gauge", labels: [],
            help: "When the next refresh (proactive, or a retry after a failure) is due."),
        MetricFamily(
            name: "tokenproxy_last_refresh_timestamp_seconds", type: "gauge", labels: [], help: "When the token source last answered."),
        // The session store
        MetricFamily(
            name: "tokenproxy_store_operations_total", type: "counter", labels: ["backend", "operation", "result"],
            help: "Session store operations, by operation and result."),
        MetricFamily(
            name: "tokenproxy_store_available", type: "gauge", labels: ["backend"], help: "1 while the last store operation reached the store."),
        MetricFamily(
            name: "tokenproxy_store_lease_waits_total", type: "counter", labels: ["backend"],
            help: "Refreshes that waited for the lease another process held."),
        MetricFamily(
            name: "tokenproxy_store_lease_wait_seconds_total", type: "counter", labels: ["backend"], help: "Time spent waiting for the lease."),
        MetricFamily(
            name: "tokenproxy_refresh_races_total", type: "counter", labels: ["backend", "outcome"],
            help:
                "How refreshes under the store's lock ended: won (this process called the identity provider), lost (another process had refreshed), fenced (a stale write refused)."
        ),
        // The configuration
        MetricFamily(name: "tokenproxy_config_reloads_total", type: "counter", labels: ["outcome"], help: "Configuration reloads, by outcome."),
    ]

    private static let byName: [String: MetricFamily] = Dictionary(uniqueKeysWithValues: families.map { ($0.name, $0) })

    /// The `# HELP` and `# TYPE` lines of family `name` (a name missing from the list is a bug).
    static func header(_ name: String) -> String {
        guard let family = byName[name] else { preconditionFailure("\(name) is not in MetricCatalog.families") }
        return "# HELP \(name) \(family.help)\n# TYPE \(name) \(family.type)\n"
    }
}
