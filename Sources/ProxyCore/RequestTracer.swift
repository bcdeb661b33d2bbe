import Config
import HTTP1
import Logs
import Sockets
import Telemetry

/// The event loop's side of tracing (CONTRACT.md "Telemetry"): starts a request's trace from its
/// `traceparent` (continued, its sampled flag honoured) or a new one (the ratio sampler), and at the
/// request's end makes its spans. The spans of the requests that end in one turn of the loop go
/// to the exporter together when the turn's events are done (one lock a turn, not one a request).
/// One per loop (its id generator and its spans need no lock); nil in the loop's context without
/// telemetry, so a request then pays for nothing but a nil test. With `logs` and without `traces` a
/// request still gets a trace id, which its audit events carry as log records, and no span
/// (`RequestTrace.recordsSpans`).
final class RequestTracer: LoopTask {
    let exporter: TelemetryExporter
    private let loop: EventLoop
    private let sampler: TraceSampler
    private let recordsSpans: Bool
    private var ids = SpanIDGenerator()
    /// The spans finished in this turn of the loop, not yet handed over (the loop's task is
    /// scheduled while there are some).
    private var finished: [SpanData] = []

    init(exporter: TelemetryExporter, sampleRatio: Double, loop: EventLoop) {
        self.exporter = exporter
        self.loop = loop
        sampler = TraceSampler(ratio: sampleRatio)
        recordsSpans = exporter.exportsTraces
    }

    /// The end of the loop's turn: this turn's spans to the exporter.
    func runLoopTask() {
        exporter.submit(finished)
        finished.removeAll(keepingCapacity: true)
    }

    /// A request's trace, from its head. Without spans to record, the request is never sampled: its
    /// audit records carry the trace id alone, and a client's `traceparent` goes upstream as it came.
    func start(_ head: RequestHead) -> RequestTrace {
        let serverSpanID = ids.next()
        if let value = head.first("traceparent"), let parent = TraceParent(value) {
            return RequestTrace(
                traceID: parent.traceID, parentSpanID: parent.spanID, serverSpanID: serverSpanID, sampled: recordsSpans && parent.sampled,
                recordsSpans: recordsSpans, start: WallClock.nanoseconds())
        }
        let traceID = ids.nextTraceID()
        return RequestTrace(
            traceID: traceID, parentSpanID: 0, serverSpanID: serverSpanID, sampled: recordsSpans && sampler.samples(newTrace: traceID),
            recordsSpans: recordsSpans, start: WallClock.nanoseconds())
    }

    /// The request is over: its spans (the SERVER span, a CLIENT span per attempt, `token.wait`) go
    /// to the exporter when it was sampled, at the end of the loop's turn. No attribute holds a
    /// query, a token or a header value.
    func finish(_ exchange: Exchange) {
        guard let trace = exchange.record.trace, trace.sampled else { return }
        let end = WallClock.nanoseconds()
        let record = exchange.record
        let routeName = exchange.route?.state.name
        let method = exchange.head.method
        if finished.isEmpty { loop.schedule(task: self) }

        var server = SpanData(
            traceID: trace.traceID, spanID: trace.serverSpanID, parentSpanID: trace.parentSpanID, name: method, kind: .server, start: trace.start,
            end: end)
        // Room for every attribute the SERVER span may get: the array is made once.
        server.attributes.reserveCapacity(8)
        server.attributes.append(Attribute("http.request.method", method))
        server.attributes.append(Attribute("url.path", clientPath(exchange)))
        server.attributes.append(Attribute("http.response.status_code", record.status))
        server.attributes.append(Attribute("tokenproxy.retried_401", record.retriedAfter401))
        if let host = exchange.head.host { server.attributes.append(Attribute("server.address", Self.hostOnly(host))) }
        if let routeName {
            server.attributes.append(Attribute("tokenproxy.route", routeName))
            server.attributes.append(Attribute("tokenproxy.caller", record.caller ?? PlaceholderConfiguration.defaultCaller))
        }
        if let code = record.refusal {
            server.errorCode = code
            server.attributes.append(Attribute("error.type", code))
        }
        finished.append(server)

        let upstream = exchange.route?.forwarder.upstream
        for (i, attempt) in trace.attempts.enumerated() {
            var client = SpanData(
                traceID: trace.traceID, spanID: attempt.spanID, parentSpanID: trace.serverSpanID, name: method, kind: .client, start: attempt.start,
                end: attempt.end == 0 ? end : attempt.end)
            client.attributes.reserveCapacity(5)
            client.attributes.append(Attribute("http.request.method", method))
            if let upstream {
                let host = upstream.takesRequestHost ? exchange.forwardedHost.map(Self.hostOnly) ?? "" : upstream.host
                client.attributes.append(Attribute("server.address", host))
                client.attributes.append(Attribute("server.port", upstream.port))
            }
            if attempt.status > 0 {
                client.attributes.append(Attribute("http.response.status_code", attempt.status))
            } else if i == trace.attempts.count - 1, let code = record.refusal {
                // No answer came: the request's error (bad_gateway, upstream_timeout) is this attempt's.
                client.errorCode = code
                client.attributes.append(Attribute("error.type", code))
            }
            if let routeName { client.attributes.append(Attribute("tokenproxy.route", routeName)) }
            finished.append(client)
        }
        for wait in trace.waits {
            var span = SpanData(
                traceID: trace.traceID, spanID: wait.spanID, parentSpanID: trace.serverSpanID, name: "token.wait", kind: .internal, start: wait.start,
                end: wait.end == 0 ? end : wait.end)
            if let routeName { span.attributes = [Attribute("tokenproxy.route", routeName)] }
            if let refresh = wait.refresh { span.links = [refresh] }
            if wait.end == 0, record.refusal == "token_unavailable" || record.refusal == "login_required" {
                span.errorCode = record.refusal
                span.attributes.append(Attribute("error.type", record.refusal!))
            }
            finished.append(span)
        }
    }

    /// An audit event as a log record (the audit writer's call): its fields under their audit
    /// names, its `ts` the record's time, and its request's trace (nil: a head that could not be
    /// read, a tunnel no route names), the SERVER span's id when that was sampled.
    func audit(_ event: AuditEvent, trace: RequestTrace?) {
        exporter.submitAuditEvent(
            event.attributes, time: event.unixNanoseconds, traceID: trace?.traceID, spanID: trace?.serverSpanID ?? 0, sampled: trace?.sampled ?? false)
    }

    /// `url.path` (CONTRACT.md): the client's path, dot segments removed, before `strip_prefix`;
    /// for a refused target, the target up to its query, as the access log shows it.
    private func clientPath(_ exchange: Exchange) -> String {
        guard !exchange.path.isEmpty else { return AccessRecord.refusedPath(exchange.head.target) }
        guard let prefix = exchange.route?.forwarder.strippedPrefix, !prefix.isEmpty else { return exchange.path }
        return prefix + exchange.path
    }

    /// A Host field's host, without its port (`[::1]:8080` → `::1`). Read byte by byte: a
    /// Character walk costs thousands of instructions on every traced request.
    static func hostOnly(_ authority: String) -> String {
        let utf8 = authority.utf8
        if utf8.first == UInt8(ascii: "["), let close = utf8.firstIndex(of: UInt8(ascii: "]")) {
            return String(authority[utf8.index(after: utf8.startIndex)..<close])
        }
        guard let colon = utf8.firstIndex(of: UInt8(ascii: ":")) else { return authority }
        return String(authority[..<colon])
    }
}
