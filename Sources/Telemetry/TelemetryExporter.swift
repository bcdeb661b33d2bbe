import IdentityHTTP
import Logging
import Sockets
import Synchronization

/// Sends finished spans and log records to an OTLP/HTTP collector (CONTRACT.md "Telemetry") from a
/// thread of its own (`tp-telemetry`): producers only append to a bounded queue under a short
/// lock, so a slow, refusing or absent collector never delays a request. A batch goes when 512 are
/// queued or a second after the last one; a full queue drops its oldest, and what never reached
/// the collector is counted (`TelemetryMetrics`) and warned of at most once a minute per signal.
// @unchecked: `queues` is only touched with `condition` (a pthread mutex) locked.
public final class TelemetryExporter: @unchecked Sendable {
    public struct Settings: Sendable {
        /// Full URLs (`…/v1/traces`, `…/v1/logs`); nil: that signal is not exported.
        public var tracesURL: String?
        public var logsURL: String?
        /// Header lines (`name: value`) for the collector; secrets, never logged.
        public var headers: [String] = []
        public var caFile: String?
        public var origin: OTLPEncoding.Origin
        /// One export's whole time, so that a collector that never answers costs a batch, not the queue.
        public var timeout: Double = 10
        /// How long a partial batch waits for more (CONTRACT.md: 1 s).
        public var flushInterval: Double = 1
        public var queueCapacity = ExportQueue<SpanData>.defaultCapacity

        public init(tracesURL: String?, logsURL: String?, origin: OTLPEncoding.Origin) {
            self.tracesURL = tracesURL
            self.logsURL = logsURL
            self.origin = origin
        }
    }

    private struct Queues {
        var spans: ExportQueue<SpanData>
        /// Finished requests whose spans are not written yet, and how many spans they hold (within
        /// the spans' bound: the oldest are dropped first, as spans are).
        var traces: ExportQueue<any FinishedTrace>
        var tracesSpans = 0
        /// Spans of finished requests dropped for the bound since the thread last looked.
        var tracesDropped = 0
        var logs: ExportQueue<LogRecordData>
        /// The export thread was started, and has not ended.
        var running = false
        /// Asked to end once the queues are empty (`stop`, `shutDown`).
        var stopped = false
        /// `shutDown`'s deadline (monotonic seconds): no export waits past it.
        var deadline = Double.infinity
    }

    public let settings: Settings
    /// The exporter thread's connection to the collector, kept between exports.
    private let session = BlockingHTTPClient.Session()
    /// The settings' resource and scope, encoded once.
    private let origin: OTLPEncoding.EncodedOrigin
    private let condition = OSCondition()
    private var queues: Queues
    private let warnings: WarningLimit
    private let metrics: TelemetryMetrics

    public init(settings: Settings, logger: Logger, metrics: TelemetryMetrics = .shared) {
        self.settings = settings
        origin = OTLPEncoding.EncodedOrigin(settings.origin)
        self.metrics = metrics
        warnings = WarningLimit(logger: logger)
        queues = Queues(
            spans: ExportQueue(capacity: settings.queueCapacity), traces: ExportQueue(capacity: settings.queueCapacity),
            logs: ExportQueue(capacity: settings.queueCapacity))
    }

    /// Starts the export thread.
    public func start() throws {
        condition.lock()
        queues.running = true
        condition.unlock()
        do {
            try OSThread.start(name: "tp-telemetry") { [self] in run() }
        } catch {
            condition.lock()
            queues.running = false
            condition.unlock()
            throw error
        }
    }

    /// Stops the thread once what is queued was exported (a reload's replaced exporter: its records
    /// go to the endpoint they were recorded for). What is submitted after the thread ended is
    /// counted as dropped.
    public func stop() {
        condition.lock()
        queues.stopped = true
        condition.broadcast()
        condition.unlock()
    }

    /// At exit (OpenTelemetry SDK's Shutdown): exports what is queued, spans and log records, and
    /// returns once that is done or `seconds` have passed, whichever comes first; no export goes on
    /// past them, so a slow or absent collector holds the exit at most that long. Answers the
    /// spans and records left unexported (0: all of them went, or failed and were counted).
    @discardableResult
    public func shutDown(within seconds: Double) -> Int {
        let deadline = EventLoop.monotonicNow() + max(0, seconds)
        condition.lock()
        defer { condition.unlock() }
        queues.stopped = true
        queues.deadline = min(queues.deadline, deadline)
        condition.broadcast()
        while queues.running {
            let left = deadline - EventLoop.monotonicNow()
            guard left > 0 else { break }
            condition.wait(seconds: left)
        }
        return queues.spans.count + queues.tracesSpans + queues.logs.count
    }

    public var exportsTraces: Bool { settings.tracesURL != nil }
    public var exportsLogs: Bool { settings.logsURL != nil }

    /// Queues a request's finished spans (one lock for all of them).
    public func submit(_ spans: [SpanData]) {
        guard exportsTraces, !spans.isEmpty else { return }
        condition.lock()
        guard !queues.stopped || queues.running else {
            condition.unlock()
            return metrics.add(spans.count, .traces)
        }
        for span in spans { queues.spans.append(span) }
        let full = queues.spans.count >= ExportQueue<SpanData>.batchLimit
        condition.unlock()
        if full { condition.broadcast() }
    }

    /// Queues finished requests, whose spans this thread writes (an event loop's turn, one lock).
    /// Past the bound (in spans) the oldest are dropped and counted.
    public func submit(_ traces: [any FinishedTrace]) {
        guard exportsTraces, !traces.isEmpty else { return }
        condition.lock()
        guard !queues.stopped || queues.running else {
            condition.unlock()
            return metrics.add(traces.reduce(0) { $0 + $1.spanCount }, .traces)
        }
        var dropped = 0
        for trace in traces {
            queues.tracesSpans += trace.spanCount
            if let oldest = queues.traces.append(trace) {
                queues.tracesSpans -= oldest.spanCount
                dropped += oldest.spanCount
            }
            while queues.tracesSpans + queues.spans.count > queues.spans.capacity, let oldest = queues.traces.removeOldest() {
                queues.tracesSpans -= oldest.spanCount
                dropped += oldest.spanCount
            }
        }
        _ = queues.traces.takeDropped()
        queues.tracesDropped += dropped
        let full = queues.tracesSpans + queues.spans.count >= ExportQueue<SpanData>.batchLimit
        condition.unlock()
        if full { condition.broadcast() }
    }

    /// Queues one log record (the audit writer's and the warnings' door).
    public func submit(_ record: LogRecordData) {
        guard exportsLogs else { return }
        condition.lock()
        guard !queues.stopped || queues.running else {
            condition.unlock()
            return metrics.add(1, .logs)
        }
        queues.logs.append(record)
        let full = queues.logs.count >= ExportQueue<LogRecordData>.batchLimit
        condition.unlock()
        if full { condition.broadcast() }
    }

    /// One audit event as a log record (CONTRACT.md "Telemetry"): its fields as attributes under
    /// their audit names, `time` its `ts`, and its request's trace id (the span id only when the
    /// request was sampled). The audit writer's door; nothing calls it before the audit log exists.
    public func submitAuditEvent(_ fields: [(name: String, value: String)], time: UInt64, traceID: TraceID?, spanID: UInt64, sampled: Bool) {
        var record = LogRecordData(time: time, severity: .info, body: fields.first { $0.name == "event" }?.value ?? "audit")
        record.attributes = fields.map { Attribute($0.name, $0.value) }
        record.traceID = traceID
        record.spanID = sampled ? spanID : 0
        record.sampled = sampled
        submit(record)
    }

    private func run() {
        let batchLimit = ExportQueue<SpanData>.batchLimit
        while true {
            condition.lock()
            if !queues.stopped && queues.spans.count + queues.tracesSpans < batchLimit && queues.logs.count < batchLimit {
                condition.wait(seconds: settings.flushInterval)
            }
            // A batch of at most 512 spans: those made beforehand, then finished requests (at
            // least one), whose spans are written into the batch's bytes off the lock.
            let spans = queues.spans.takeBatch()
            var spanCount = spans.count
            var traces: [any FinishedTrace] = []
            while let oldest = queues.traces.oldest, spanCount + oldest.spanCount <= batchLimit || spanCount == 0 {
                _ = queues.traces.removeOldest()
                queues.tracesSpans -= oldest.spanCount
                spanCount += oldest.spanCount
                traces.append(oldest)
            }
            let logs = queues.logs.takeBatch()
            let droppedSpans = queues.spans.takeDropped() + queues.tracesDropped
            queues.tracesDropped = 0
            let droppedLogs = queues.logs.takeDropped()
            let stopping = queues.stopped && queues.spans.isEmpty && queues.traces.isEmpty && queues.logs.isEmpty
            let deadline = queues.deadline
            condition.unlock()
            noteLost(droppedSpans, .traces, why: "the export queue was full")
            noteLost(droppedLogs, .logs, why: "the export queue was full")
            if let url = settings.tracesURL, spanCount > 0 {
                var writer = SpanWriter(origin: origin, spans: spanCount)
                for span in spans { writer.write(span) }
                for trace in traces { trace.writeSpans(&writer) }
                export(writer.finish(), to: url, count: spanCount, .traces, deadline: deadline)
            }
            if let url = settings.logsURL, !logs.isEmpty {
                export(OTLPEncoding.logs(logs, origin: origin), to: url, count: logs.count, .logs, deadline: deadline)
            }
            if stopping || EventLoop.monotonicNow() >= deadline {
                condition.lock()
                queues.running = false
                condition.broadcast()
                condition.unlock()
                return
            }
        }
    }

    /// One POST (OTLP/HTTP §"Binary Protobuf Encoding"); a failure loses the batch (no retry:
    /// the next batch is already waiting, and the queue's bound is the contract's). It takes at
    /// most `settings.timeout`, and ends by `deadline` (monotonic seconds) at the latest.
    private func export(_ body: [UInt8], to url: String, count: Int, _ signal: TelemetrySignal, deadline: Double) {
        var request = HTTPCallRequest(url: url, method: "POST", headers: ["Content-Type: application/x-protobuf"] + settings.headers, body: body)
        request.timeout = min(settings.timeout, deadline - EventLoop.monotonicNow())
        guard request.timeout >= 0.01 else { return noteLost(count, signal, why: "the process was exiting") }
        request.caFile = settings.caFile
        do {
            let response = try session.perform(request)
            guard (200..<300).contains(response.status) else {
                noteLost(count, signal, why: "the collector answered \(response.status)")
                return
            }
        } catch let error as HTTPCallError {
            noteLost(count, signal, why: error.kind == .timedOut ? "the collector did not answer in time" : "the collector could not be reached")
        } catch {
            noteLost(count, signal, why: "the collector could not be reached")
        }
    }

    private func noteLost(_ count: Int, _ signal: TelemetrySignal, why: String) {
        guard count > 0 else { return }
        metrics.add(count, signal)
        warnings.warn(signal, "telemetry: \(count) \(signal == .traces ? "spans" : "log records") not exported: \(why)")
    }
}

/// The export warning, at most one line a minute per signal (CONTRACT.md "Telemetry"), with the
/// number of losses not reported since.
final class WarningLimit: Sendable {
    static let interval: Double = 60
    private let logger: Logger
    private let last = Mutex<[TelemetrySignal: (at: Double, unreported: Int)]>([:])

    init(logger: Logger) { self.logger = logger }

    func warn(_ signal: TelemetrySignal, _ message: String, now: Double = EventLoop.monotonicNow()) {
        let more: Int? = last.withLock { table in
            if let previous = table[signal], now - previous.at < Self.interval {
                table[signal] = (previous.at, previous.unreported + 1)
                return nil
            }
            let unreported = table[signal]?.unreported ?? 0
            table[signal] = (now, 0)
            return unreported
        }
        guard let more else { return }
        logger.warning("\(message)\(more > 0 ? " (and \(more) more failures since the last report)" : "")")
    }
}
