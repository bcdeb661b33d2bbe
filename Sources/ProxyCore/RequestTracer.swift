import Config
import HTTP1
import Logs
import Sockets
import Telemetry

/// The event loop's side of tracing (CONTRACT.md "Telemetry"): starts a request's trace from its
/// `traceparent` (continued, its sampled flag honoured) or a new one (the ratio sampler), and at the
/// request's end hands it to the exporter, whose thread writes its spans. The traces of the requests
/// that end in one turn of the loop go together when the turn's events are done (one lock a turn,
/// not one a request).
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
    /// The traces finished in this turn of the loop, not yet handed over (the loop's task is
    /// scheduled while there are some).
    private var finished: [any FinishedTrace] = []

    init(exporter: TelemetryExporter, sampler: TraceSampler, loop: EventLoop) {
        self.exporter = exporter
        self.loop = loop
        self.sampler = sampler
        recordsSpans = exporter.exportsTraces
    }

    /// The end of the loop's turn: this turn's traces to the exporter.
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
                traceID: parent.traceID, parentSpanID: parent.spanID, serverSpanID: serverSpanID, sampled: recordsSpans && sampler.samples(parent: parent),
                recordsSpans: recordsSpans, start: WallClock.nanoseconds(), tracer: self)
        }
        let traceID = ids.nextTraceID()
        return RequestTrace(
            traceID: traceID, parentSpanID: 0, serverSpanID: serverSpanID, sampled: recordsSpans && sampler.samples(newTrace: traceID),
            recordsSpans: recordsSpans, start: WallClock.nanoseconds(), tracer: self)
    }

    /// The request is over: its trace goes to the exporter when it was sampled, at the end of the
    /// loop's turn, with what its spans say of it (`RequestTrace.Ending`); the exporter's thread
    /// writes the spans. No attribute holds a query, a token or a header value.
    func finish(_ exchange: Exchange) {
        guard let trace = exchange.record.trace, trace.sampled, !trace.ended else { return }
        let upstream = upstreamAddress(exchange)
        trace.end(
            RequestTrace.Ending(
                end: WallClock.nanoseconds(), method: exchange.head.method, path: clientPath(exchange), host: exchange.head.host,
                status: exchange.record.status, retriedAfter401: exchange.record.retriedAfter401, route: exchange.route?.state.name,
                caller: exchange.record.caller ?? PlaceholderConfiguration.defaultCaller, refusal: exchange.record.refusal,
                upstreamAddress: upstream.address, addressIsAuthority: upstream.isAuthority, upstreamPort: upstream.port))
        if finished.isEmpty { loop.schedule(task: self) }
        finished.append(trace)
    }

    /// An audit event as a log record (the audit writer's call): its fields under their audit
    /// names, its `ts` the record's time, and its request's trace (nil: a head that could not be
    /// read, a tunnel no route names), the SERVER span's id when that was sampled.
    func audit(_ event: AuditEvent, trace: RequestTrace?) {
        exporter.submitAuditEvent(
            event.attributes, time: event.unixNanoseconds, traceID: trace?.traceID, spanID: trace?.serverSpanID ?? 0, sampled: trace?.sampled ?? false)
    }

    /// The CLIENT spans' `server.address` and `server.port`: the upstream's host, or the authority
    /// the request's host gave (none: ""), whose port is taken off on the exporter's thread.
    private func upstreamAddress(_ exchange: Exchange) -> (address: String?, isAuthority: Bool, port: Int) {
        guard let forwarder = exchange.route?.forwarder else { return (nil, false, 0) }
        guard let host = forwarder.spanAddress else { return (exchange.forwardedHost ?? "", true, forwarder.spanPort) }
        return (host, false, forwarder.spanPort)
    }

    /// `url.path` (CONTRACT.md): the client's path, dot segments removed, before `strip_prefix`;
    /// for a refused target, the target up to its query, as the access log shows it.
    private func clientPath(_ exchange: Exchange) -> String {
        guard !exchange.path.isEmpty else { return AccessRecord.refusedPath(exchange.head.target) }
        guard let prefix = exchange.route?.forwarder.strippedPrefix, !prefix.isEmpty else { return exchange.path }
        return prefix + exchange.path
    }

}
