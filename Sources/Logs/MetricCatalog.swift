/// Every metric family /metrics can expose, declared once (Envoy's habit): its name, type, labels
/// and help. This catalog is the only list of names: the code that counts and the registry that
/// renders refer to a family by its constant here, and docs/OBSERVABILITY.md lists the same names (a
/// test compares them).
public struct MetricFamily: Sendable, Equatable {
    public let name: String
    public let type: Kind
    /// The labels its samples carry (`route` is added to the token families with `routes:`).
    public let labels: [String]
    public let help: String

    /// The exposition format's `# TYPE` (Prometheus text format 0.0.4).
    public enum Kind: String, Sendable {
        case counter, gauge, histogram
    }
}

public enum MetricCatalog {
    // The audit log
    public static let auditLinesLostTotal = MetricFamily(
        name: "tokenproxy_audit_lines_lost_total", type: .counter, labels: [],
        help: "Audit lines that could not be written (a full disk, a closed stderr).")

    // Requests and clients
    public static let requestsTotal = MetricFamily(
        name: "tokenproxy_requests_total", type: .counter, labels: ["route", "code"], help: "Requests answered, by HTTP status code.")
    public static let requestDurationSeconds = MetricFamily(
        name: "tokenproxy_request_duration_seconds", type: .histogram, labels: ["route", "code_class"],
        help: "Time from a request's head to the last byte of its answer queued for the client, by the status's class.")
    public static let upstream401RetriesTotal = MetricFamily(
        name: "tokenproxy_upstream_401_retries_total", type: .counter, labels: [], help: "Requests retried once after an upstream 401.")
    public static let upstream401Total = MetricFamily(
        name: "tokenproxy_upstream_401_total", type: .counter, labels: ["route", "result"],
        help: "Upstream 401 answers to a request sent with a token, by what followed: retried, passed_through, login_required, token_unavailable.")
    public static let stormGuardActivationsTotal = MetricFamily(
        name: "tokenproxy_storm_guard_activations_total", type: .counter, labels: ["route"],
        help: "Times a freshly refreshed token was refused too and upstream 401s were passed on without a refresh for a while.")
    public static let requestsWaitedForTokenTotal = MetricFamily(
        name: "tokenproxy_requests_waited_for_token_total", type: .counter, labels: [], help: "Requests that had to wait for a refresh.")
    public static let tokenWaitSeconds = MetricFamily(
        name: "tokenproxy_token_wait_seconds", type: .histogram, labels: ["route"], help: "Time requests spent waiting for a token.")
    public static let clientReceivedBytesTotal = MetricFamily(
        name: "tokenproxy_client_received_bytes_total", type: .counter, labels: [], help: "Request body bytes received from clients.")
    public static let clientSentBytesTotal = MetricFamily(
        name: "tokenproxy_client_sent_bytes_total", type: .counter, labels: [], help: "Response bytes sent to clients.")
    public static let tunnelsTotal = MetricFamily(
        name: "tokenproxy_tunnels_total", type: .counter, labels: [],
        help: "Connections that became a tunnel after 101 Switching Protocols (WebSocket).")
    public static let openTunnels = MetricFamily(name: "tokenproxy_open_tunnels", type: .gauge, labels: [], help: "Tunnels open now.")
    public static let budgetRefusalsTotal = MetricFamily(
        name: "tokenproxy_budget_refusals_total", type: .counter, labels: ["route", "caller", "reason"],
        help: "Requests answered 429 rate_limited over a route's budget, by caller and reason: concurrency, rate.")
    public static let forwardProxyConnectsTotal = MetricFamily(
        name: "tokenproxy_forward_proxy_connects_total", type: .counter, labels: ["route", "outcome"],
        help: "CONNECT requests to the forward proxy, by route (\"\" when none) and outcome: intercepted, tunnelled, refused.")
    public static let tlsHandshakeFailuresTotal = MetricFamily(
        name: "tokenproxy_tls_handshake_failures_total", type: .counter, labels: [],
        help: "TLS handshakes with clients that failed (a connection closed before its ClientHello is none).")
    public static let droppedHeaderFieldsTotal = MetricFamily(
        name: "tokenproxy_dropped_header_fields_total", type: .counter, labels: [],
        help: "Request header fields not forwarded because their names hold an underscore (spoofable through WSGI/CGI).")
    public static let openConnections = MetricFamily(
        name: "tokenproxy_open_connections", type: .gauge, labels: [], help: "Client connections open now.")
    public static let ready = MetricFamily(name: "tokenproxy_ready", type: .gauge, labels: [], help: "1 while a usable token is held.")
    // The upstream
    public static let upstreamLatencySeconds = MetricFamily(
        name: "tokenproxy_upstream_latency_seconds", type: .histogram, labels: [],
        help: "Time from sending a request upstream to its response head.")
    public static let upstreamResponseSeconds = MetricFamily(
        name: "tokenproxy_upstream_response_seconds", type: .histogram, labels: ["route"],
        help: "Time from the request's last byte written upstream to the response head.")
    public static let upstreamConnectSeconds = MetricFamily(
        name: "tokenproxy_upstream_connect_seconds", type: .histogram, labels: ["route", "tls"],
        help: "Time to open an upstream connection: TCP, TLS and any proxy tunnel.")
    public static let upstreamConnectionsOpenedTotal = MetricFamily(
        name: "tokenproxy_upstream_connections_opened_total", type: .counter, labels: ["route"], help: "Upstream connections opened.")
    public static let upstreamConnectionsReusedTotal = MetricFamily(
        name: "tokenproxy_upstream_connections_reused_total", type: .counter, labels: ["route"],
        help: "Requests sent on an idle pooled upstream connection.")
    public static let upstreamConnectionsRetiredTotal = MetricFamily(
        name: "tokenproxy_upstream_connections_retired_total", type: .counter, labels: ["route", "reason"],
        help: "Upstream connections closed, by reason.")
    public static let upstreamIdleConnections = MetricFamily(
        name: "tokenproxy_upstream_idle_connections", type: .gauge, labels: ["route"], help: "Idle upstream connections in the pools now.")
    public static let upstreamSentBytesTotal = MetricFamily(
        name: "tokenproxy_upstream_sent_bytes_total", type: .counter, labels: ["route"], help: "Bytes written to upstream connections.")
    public static let upstreamReceivedBytesTotal = MetricFamily(
        name: "tokenproxy_upstream_received_bytes_total", type: .counter, labels: ["route"], help: "Bytes read from upstream connections.")
    public static let scrubbedTotal = MetricFamily(
        name: "tokenproxy_scrubbed_total", type: .counter, labels: ["route"],
        help: "Credential values replaced by * in answers (scrub: true), in a field or the body alike.")
    public static let upstreamFreshConnectionRetriesTotal = MetricFamily(
        name: "tokenproxy_upstream_fresh_connection_retries_total", type: .counter, labels: [],
        help: "Requests sent again on a fresh upstream connection after a reused one closed before answering.")
    // Tokens (labelled with `route` when the file has `routes:`)
    public static let tokenExpirySeconds = MetricFamily(
        name: "tokenproxy_token_expiry_seconds", type: .gauge, labels: [],
        help: "Seconds until the current access token expires (absent for tokens that do not expire).")
    public static let tokenLastSuccessAgeSeconds = MetricFamily(
        name: "tokenproxy_token_last_success_age_seconds", type: .gauge, labels: [],
        help: "Seconds since the token source last handed over a usable token (absent before the first).")
    public static let refreshesTotal = MetricFamily(
        name: "tokenproxy_refreshes_total", type: .counter, labels: ["source", "outcome"], help: "Calls to the token source, by outcome.")
    public static let assertionsRefusedTotal = MetricFamily(
        name: "tokenproxy_assertions_refused_total", type: .counter, labels: ["reason"],
        help: "Assertions read from a file (client_assertion_file, assertion_file) that were not sent: expired, or no JWT.")
    public static let tokenFetchFailuresTotal = MetricFamily(
        name: "tokenproxy_token_fetch_failures_total", type: .counter, labels: ["reason"],
        help: "Failed calls to the token source, by reason: network, timeout, http_5xx, http_429, refused, bad_answer, client_misconfigured.")
    public static let tokenRefreshSeconds = MetricFamily(
        name: "tokenproxy_token_refresh_seconds", type: .histogram, labels: [], help: "How long each call to the token source took.")
    public static let refreshConsecutiveFailures = MetricFamily(
        name: "tokenproxy_refresh_consecutive_failures", type: .gauge, labels: [], help: "Passing refresh failures in a row (0 after a success).")
    public static let nextRefreshTimestampSeconds = MetricFamily(
        name: "tokenproxy_next_refresh_timestamp_seconds", type: .gauge, labels: [],
        help: "When the next refresh (proactive, or a retry after a failure) is due.")
    public static let lastRefreshTimestampSeconds = MetricFamily(
        name: "tokenproxy_last_refresh_timestamp_seconds", type: .gauge, labels: [], help: "When the token source last answered.")
    // The session store
    public static let storeOperationsTotal = MetricFamily(
        name: "tokenproxy_store_operations_total", type: .counter, labels: ["backend", "operation", "result"],
        help: "Session store operations, by operation and result.")
    public static let storeAvailable = MetricFamily(
        name: "tokenproxy_store_available", type: .gauge, labels: ["backend"], help: "1 while the last store operation reached the store.")
    public static let storeLeaseWaitsTotal = MetricFamily(
        name: "tokenproxy_store_lease_waits_total", type: .counter, labels: ["backend"],
        help: "Refreshes that waited for the lease another process held.")
    public static let storeLeaseWaitSecondsTotal = MetricFamily(
        name: "tokenproxy_store_lease_wait_seconds_total", type: .counter, labels: ["backend"], help: "Time spent waiting for the lease.")
    public static let refreshRacesTotal = MetricFamily(
        name: "tokenproxy_refresh_races_total", type: .counter, labels: ["backend", "outcome"],
        help:
            "How refreshes under the store's lock ended: won (this process called the identity provider), lost (another process had refreshed), fenced (a stale write refused)."
    )
    // Telemetry
    public static let telemetryDroppedTotal = MetricFamily(
        name: "tokenproxy_telemetry_dropped_total", type: .counter, labels: ["signal"],
        help:
            "Spans (traces) and log records (logs) that never reached the OpenTelemetry collector: dropped from the full queue, "
            + "or lost with a refused or failed batch."
    )
    // The configuration
    public static let configReloadsTotal = MetricFamily(
        name: "tokenproxy_config_reloads_total", type: .counter, labels: ["outcome"], help: "Configuration reloads, by outcome.")

    /// Every family, in the order docs/OBSERVABILITY.md lists them.
    public static let families: [MetricFamily] = [
        requestsTotal,
        requestDurationSeconds,
        upstream401RetriesTotal,
        upstream401Total,
        stormGuardActivationsTotal,
        requestsWaitedForTokenTotal,
        tokenWaitSeconds,
        clientReceivedBytesTotal,
        clientSentBytesTotal,
        tunnelsTotal,
        openTunnels,
        budgetRefusalsTotal,
        droppedHeaderFieldsTotal,
        openConnections,
        ready,
        upstreamLatencySeconds,
        upstreamResponseSeconds,
        upstreamConnectSeconds,
        upstreamConnectionsOpenedTotal,
        upstreamConnectionsReusedTotal,
        upstreamConnectionsRetiredTotal,
        upstreamIdleConnections,
        upstreamSentBytesTotal,
        upstreamReceivedBytesTotal,
        scrubbedTotal,
        upstreamFreshConnectionRetriesTotal,
        tokenExpirySeconds,
        tokenLastSuccessAgeSeconds,
        refreshesTotal,
        assertionsRefusedTotal,
        tokenFetchFailuresTotal,
        tokenRefreshSeconds,
        refreshConsecutiveFailures,
        nextRefreshTimestampSeconds,
        lastRefreshTimestampSeconds,
        storeOperationsTotal,
        storeAvailable,
        storeLeaseWaitsTotal,
        storeLeaseWaitSecondsTotal,
        refreshRacesTotal,
        telemetryDroppedTotal,
        configReloadsTotal,
        auditLinesLostTotal,
    ]
}
