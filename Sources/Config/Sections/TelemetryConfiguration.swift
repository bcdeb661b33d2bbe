import Basics
import Sockets
import Yams

/// `telemetry:` (CONTRACT.md "Telemetry: OpenTelemetry traces and logs"): where spans and log records
/// go over OTLP/HTTP, and the standard `OTEL_*` variables that override its keys (only when the
/// section is there: without it nothing is exported).
public struct TelemetryConfiguration: Sendable, Equatable {
    /// The collector's base URL; `/v1/traces` and `/v1/logs` are appended (OTLP/HTTP's default paths).
    public var endpoint = "http://127.0.0.1:4318"
    public var serviceName = "tokenproxy"
    /// For a trace the client did not start (parent-based: a client's sampled flag is followed).
    public var sampleRatio = 1.0
    public var traces = true
    public var logs = true
    /// Extra header fields for the collector (`headers_env` or OTEL_EXPORTER_OTLP_HEADERS); the
    /// values are secrets.
    public var headers: [Header] = []
    public var caFile: String? = nil

    public struct Header: Sendable, Equatable {
        public var name: String
        public var value: Secret
    }

    public init() {}

    public var tracesURL: String { Self.signalURL(endpoint, "v1/traces") }
    public var logsURL: String { Self.signalURL(endpoint, "v1/logs") }

    /// The OTLP/HTTP exporter's rule for the base endpoint: the signal's path after the base's path.
    static func signalURL(_ base: String, _ path: String) -> String {
        base.hasSuffix("/") ? base + path : base + "/" + path
    }

    /// The variables that override the section's keys (the OpenTelemetry specification's names).
    public enum Environment {
        public static let endpoint = "OTEL_EXPORTER_OTLP_ENDPOINT"
        public static let serviceName = "OTEL_SERVICE_NAME"
        public static let headers = "OTEL_EXPORTER_OTLP_HEADERS"
        public static let certificate = "OTEL_EXPORTER_OTLP_CERTIFICATE"
    }
}

extension TelemetryConfiguration {
    static let keys = ["endpoint", "service_name", "sample_ratio", "traces", "logs", "headers_env", "ca_file"]

    static func parse(_ s: YAMLSection, in load: LoadContext) -> TelemetryConfiguration {
        load.found.collect { try s.rejectUnknownKeys(keys) }
        var telemetry = TelemetryConfiguration()
        load.found.collect {
            let (value, keyPath) = try load.env(Environment.endpoint).map { ($0, Environment.endpoint) } ?? (s.string("endpoint"), s.path("endpoint"))
            guard let value else { return }
            do {
                _ = try AddressParser.httpURL(value.trimmingWhitespace(), allowQuery: false)
            } catch let problem as AddressProblem {
                throw ConfigurationError(keyPath: keyPath, reason: problem.reason)
            }
            telemetry.endpoint = value.trimmingWhitespace()
        }
        load.found.collect {
            if let name = load.env(Environment.serviceName) {
                telemetry.serviceName = name
            } else if let name = try s.nonEmptyString("service_name") {
                telemetry.serviceName = name
            }
        }
        load.found.collect {
            guard let node = s.node("sample_ratio") else { return }
            guard case .scalar(let scalar) = node, scalar.isPlain, let ratio = Double(scalar.string), ratio >= 0, ratio <= 1 else {
                throw ConfigurationError(keyPath: s.path("sample_ratio"), reason: "expected a number from 0 to 1, got \(node.kindDescription)")
            }
            telemetry.sampleRatio = ratio
        }
        if let traces = load.found.collect({ try s.bool("traces") }) { telemetry.traces = traces }
        if let logs = load.found.collect({ try s.bool("logs") }) { telemetry.logs = logs }
        load.found.collect {
            if let value = load.env(Environment.headers) {
                telemetry.headers = try parseHeaders(value, from: Environment.headers, keyPath: Environment.headers)
            } else if let name = try s.nonEmptyString("headers_env")?.trimmingWhitespace() {
                guard let value = load.env(name) else {
                    let state = load.environment[name] == nil ? "is not set" : "is empty"
                    throw ConfigurationError(keyPath: s.path("headers_env"), reason: "the environment variable \(name) \(state)")
                }
                telemetry.headers = try parseHeaders(value, from: name, keyPath: s.path("headers_env"))
            }
        }
        load.found.collect {
            if let path = load.env(Environment.certificate) {
                guard let kind = Paths.kind(of: load.resolve(path)), kind != .folder else {
                    throw ConfigurationError(keyPath: Environment.certificate, reason: "cannot read \(load.resolve(path)): no such file")
                }
                telemetry.caFile = load.resolve(path)
            } else if let path = try load.existingFile(s, "ca_file") {
                telemetry.caFile = path
            }
        }
        return telemetry
    }

    /// `k=v,k=v` (the OpenTelemetry specification's OTEL_EXPORTER_OTLP_HEADERS: W3C Baggage-like
    /// pairs, each part percent-decoded, spaces around them ignored). Errors name the pair by its
    /// place, never its value.
    static func parseHeaders(_ text: String, from variable: String, keyPath: String) throws -> [Header] {
        var headers: [Header] = []
        for (index, pair) in text.split(separator: ",", omittingEmptySubsequences: false).enumerated() {
            let trimmed = String(pair).trimmingWhitespace()
            if trimmed.isEmpty { continue }
            let place = "pair \(index + 1) of \(variable)"
            guard let equals = trimmed.firstIndex(of: "=") else {
                throw ConfigurationError(keyPath: keyPath, reason: "\(place) has no '=' (expected name=value,name=value)")
            }
            guard let name = percentDecoded(trimmed[..<equals])?.trimmingWhitespace(), isValidFieldName(name) else {
                throw ConfigurationError(keyPath: keyPath, reason: "\(place) does not start with a valid header field name")
            }
            guard let value = percentDecoded(trimmed[trimmed.index(after: equals)...])?.trimmingWhitespace(), !value.isEmpty,
                !value.utf8.contains(where: { $0 < 0x20 && $0 != 0x09 || $0 == 0x7f })
            else {
                throw ConfigurationError(keyPath: keyPath, reason: "\(place) (\(name)) has an empty or invalid value")
            }
            headers.append(Header(name: name, value: Secret(value: value, origin: .env(variable))))
        }
        return headers
    }
}
