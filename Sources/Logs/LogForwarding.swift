import Logging
import Synchronization

/// Where warnings and errors go besides stderr: OpenTelemetry's log records (CONTRACT.md
/// "Telemetry": `logs: true`). The handler hands over each line at `warning` or above, already
/// redacted; lines below cost one comparison.
public final class LogForwarding: Sendable {
    public static let shared = LogForwarding()
    public typealias Sink = @Sendable (_ level: Logger.Level, _ message: String, _ metadata: [(String, String)]) -> Void
    private let sink = Mutex<Sink?>(nil)

    public init() {}

    public func install(_ sink: Sink?) { self.sink.withLock { $0 = sink } }

    func forward(_ level: Logger.Level, _ message: String, _ metadata: [(String, String)]) {
        guard let sink = sink.withLock({ $0 }) else { return }
        sink(level, message, metadata)
    }
}
