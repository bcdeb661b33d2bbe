import Config
import Logs
import Sockets
import Telemetry

/// The exporter a configuration asks for, at start and at a reload (CONTRACT.md "Telemetry": a
/// reload that changes `telemetry` applies to the requests that start after it; what was queued
/// before goes to the endpoint it was recorded for).
extension Server {
    /// At start: the exporter of `configuration`, its warnings forwarded and every route's refreshes
    /// traced (before the token threads' first refresh, so that the start's is traced too).
    public func setUpTelemetry(_ make: @escaping @Sendable (TelemetryConfiguration?) -> TelemetryExporter?) {
        makeTelemetry = make
        telemetry = make(configuration.telemetry)
        telemetry?.forwardWarnings()
        attachRefreshTracing(routeStates, configuration)
    }

    /// A reload's change of `telemetry` (nil: none): the new exporter, already started, and the
    /// loops' tracer to make from it. The old exporter is stopped by `finishTelemetrySwap` once
    /// every loop has the new one.
    func telemetryForReload(_ new: Configuration) throws -> TelemetrySwap? {
        guard let makeTelemetry, new.telemetry != configuration.telemetry else { return nil }
        let fresh = makeTelemetry(new.telemetry)
        try fresh?.start()
        LogForwarding.shared.install(nil)
        fresh?.forwardWarnings()
        return TelemetrySwap(old: telemetry, new: fresh, sampler: Self.sampler(new))
    }

    func finishTelemetrySwap(_ swap: TelemetrySwap?, _ new: Configuration, states: [RouteState]) {
        if let swap {
            telemetry = swap.new
            swap.old?.stop()
        }
        attachRefreshTracing(states, new)
    }

    /// At exit, after the drain: what the exporter holds goes to the collector (OpenTelemetry SDK's
    /// Shutdown), for at most `exitFlushLimit` or `drain_timeout`, whichever is shorter, so that a
    /// slow or absent collector does not hold the exit longer.
    public func flushTelemetry() {
        guard let telemetry else { return }
        let left = telemetry.shutDown(within: min(Self.exitFlushLimit, configuration.drainTimeout))
        if left > 0 { logger.warning("\(TelemetryExporter.ownWarningPrefix)\(left) spans and log records not exported at exit") }
    }

    static let exitFlushLimit = 5.0

    /// The requests' sampler `telemetry` asks for (none: every new trace, parent-based).
    static func sampler(_ configuration: Configuration) -> TraceSampler {
        TraceSampler(ratio: configuration.telemetry?.sampleRatio ?? 1, parentBased: configuration.telemetry?.parentBased ?? true)
    }

    private func attachRefreshTracing(_ states: [RouteState], _ configuration: Configuration) {
        for state in states {
            state.tokens.refreshTracing.attach(telemetry, route: state.name, sampleRatio: configuration.telemetry?.sampleRatio ?? 1)
        }
    }
}

struct TelemetrySwap {
    let old: TelemetryExporter?
    let new: TelemetryExporter?
    let sampler: TraceSampler

    /// A loop's tracer (each loop its own; with `logs` alone too, for the audit records' trace ids).
    func tracer(on loop: EventLoop) -> RequestTracer? {
        guard let new else { return nil }
        return RequestTracer(exporter: new, sampler: sampler, loop: loop)
    }
}
