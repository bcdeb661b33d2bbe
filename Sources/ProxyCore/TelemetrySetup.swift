import Config
import Glibc
import Logging
import Logs
import Telemetry

extension TelemetryExporter {
    /// The exporter `telemetry:` asks for (nil: neither traces nor logs), not yet started. The
    /// resource (CONTRACT.md "Telemetry"): `service.name`, `service.version` as `--version` prints
    /// it, and `service.instance.id` as `HOST:PID` (the host name as `hostname` prints it).
    public static func make(_ telemetry: TelemetryConfiguration?, version: String, logger: Logger) -> TelemetryExporter? {
        guard let telemetry, telemetry.traces || telemetry.logs else { return nil }
        var resource = [
            Attribute("service.name", telemetry.serviceName), Attribute("service.version", version),
            Attribute("service.instance.id", "\(hostName()):\(getpid())"),
        ]
        // OTEL_RESOURCE_ATTRIBUTES's others (its service.name is `serviceName` already).
        let own = Set(resource.map(\.key))
        resource += telemetry.resourceAttributes.filter { !own.contains($0.key) }.map { Attribute($0.key, $0.value) }
        let origin = OTLPEncoding.Origin(resource: resource, scopeName: "tokenproxy", scopeVersion: version)
        var settings = Settings(tracesURL: telemetry.traces ? telemetry.tracesURL : nil, logsURL: telemetry.logs ? telemetry.logsURL : nil, origin: origin)
        settings.headers = telemetry.headers.map { "\($0.name): \($0.value.value)" }
        settings.caFile = telemetry.caFile
        return TelemetryExporter(settings: settings, logger: logger)
    }

    /// Warnings and errors go out as log records too (`telemetry.logs`); the exporter's own
    /// warnings stay off them (a collector that is down would only lose them).
    public func forwardWarnings() {
        guard exportsLogs else { return }
        LogForwarding.shared.install { [self] level, message, metadata in
            guard !message.hasPrefix(Self.ownWarningPrefix) else { return }
            var record = LogRecordData(time: WallClock.nanoseconds(), severity: level >= .error ? .error : .warn, body: message)
            record.attributes = metadata.map { Attribute($0.0, $0.1) }
            submit(record)
        }
    }

    static let ownWarningPrefix = "telemetry: "

    private static func hostName() -> String {
        var buffer = [CChar](repeating: 0, count: 256)
        guard gethostname(&buffer, buffer.count - 1) == 0 else { return "localhost" }
        return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
