import Logs
import Synchronization

/// The signals the exporter sends, as `tokenproxy_telemetry_dropped_total{signal}` labels them.
public enum TelemetrySignal: String, Sendable, CaseIterable {
    case traces
    case logs
}

/// What never reached a collector, for the process (an exporter a reload replaced still counted
/// here): dropped from a full queue, or lost with a refused or failed batch (CONTRACT.md "Telemetry").
public final class TelemetryMetrics: Sendable {
    public static let shared = TelemetryMetrics()
    private let dropped = Mutex(LabeledCounts<TelemetrySignal>())

    public init() {}

    func add(_ n: Int, _ signal: TelemetrySignal) {
        guard n > 0 else { return }
        dropped.withLock { $0.increment(signal, by: UInt64(n)) }
    }

    public func dropped(_ signal: TelemetrySignal) -> UInt64 { dropped.withLock { $0[signal] } }

    public func collect(into registry: inout MetricRegistry) {
        dropped.withLock { $0 }.collect(MetricCatalog.telemetryDroppedTotal, as: "signal", into: &registry)
    }
}
