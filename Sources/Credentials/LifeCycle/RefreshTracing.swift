import Synchronization
import Telemetry

/// A token manager's `credential.refresh` spans (CONTRACT.md "Telemetry"): one span per call to the
/// source, a root of its own trace, with the route, the credential type, the outcome (the values of
/// `tokenproxy_refreshes_total{outcome}`) and the reason; and the span of the refresh under way or
/// last done, which each `token.wait` links to. Also the door of the manager's `credential` audit
/// events to the exporter's log records. Nothing happens until `attach` gives an exporter.
public final class RefreshTracing: Sendable {
    private struct State {
        var exporter: TelemetryExporter?
        var route = ""
        /// The refresh under way, or the last one.
        var current: SpanLink?
        var ids = SpanIDGenerator()
        var sampler = TraceSampler(ratio: 1)
    }
    private let state = Mutex(State())

    public init() {}

    /// Spans from now on go to `exporter` (nil: none), named for `route` (the first of the routes
    /// that share this manager keeps it). Each refresh starts a trace, sampled at `sampleRatio` like a
    /// request's. A reload attaches again.
    public func attach(_ exporter: TelemetryExporter?, route: String, sampleRatio: Double) {
        state.withLock { state in
            if state.exporter === exporter && !state.route.isEmpty { return }
            state.exporter = exporter
            state.route = route
            state.sampler = TraceSampler(ratio: sampleRatio)
        }
    }

    /// What a `token.wait` links to: the refresh under way or the last one (nil: none traced).
    public var current: SpanLink? { state.withLock { $0.current } }

    struct Started {
        let link: SpanLink
        let start: UInt64
    }

    func begin() -> Started? {
        state.withLock { state in
            guard state.exporter?.exportsTraces == true else { return nil }
            let link = SpanLink(traceID: state.ids.nextTraceID(), spanID: state.ids.next())
            guard state.sampler.samples(newTrace: link.traceID) else { return nil }
            state.current = link
            return Started(link: link, start: WallClock.nanoseconds())
        }
    }

    func end(_ started: Started?, credential: String, result: RefreshResult, reason: RefreshReason, outcome: RefreshOutcome) {
        guard let started else { return }
        let (exporter, route) = state.withLock { ($0.exporter, $0.route) }
        guard let exporter else { return }
        var span = SpanData(
            traceID: started.link.traceID, spanID: started.link.spanID, name: "credential.refresh", kind: .internal, start: started.start,
            end: WallClock.nanoseconds())
        span.attributes = [
            Attribute("tokenproxy.route", route), Attribute("tokenproxy.credential", credential),
            Attribute("tokenproxy.outcome", result.rawValue), Attribute("tokenproxy.reason", Self.label(reason)),
        ]
        switch outcome {
        case .token: break
        case .loginRequired: span.errorCode = RefreshOutcome.loginRequiredCode
        case .unavailable: span.errorCode = RefreshOutcome.tokenUnavailableCode
        }
        if let code = span.errorCode { span.attributes.append(Attribute("error.type", code)) }
        exporter.submit([span])
    }

    /// A `credential` audit event as a log record (with `logs`): `fields` under their audit names,
    /// `time` its `ts`, in the trace of the call's `credential.refresh` span when that was traced.
    public func exportAuditEvent(_ fields: [(name: String, value: String)], time: UInt64, refresh: SpanLink?) {
        guard let exporter = state.withLock({ $0.exporter }) else { return }
        exporter.submitAuditEvent(fields, time: time, traceID: refresh?.traceID, spanID: refresh?.spanID ?? 0, sampled: refresh != nil)
    }

    /// CONTRACT.md's words for the reasons: `expiry`, `upstream_401`, `forced`, `start`.
    static func label(_ reason: RefreshReason) -> String {
        switch reason {
        case .expiry: return "expiry"
        case .unauthorized: return "upstream_401"
        case .forced: return "forced"
        case .startup: return "start"
        }
    }
}
