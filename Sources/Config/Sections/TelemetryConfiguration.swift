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
    /// false: OTEL_TRACES_SAMPLER chose `always_on`, `always_off` or `traceidratio`, so a client's
    /// trace is sampled by its id at `sampleRatio` as a new one is, whatever its sampled flag says.
    public var parentBased = true
    public var traces = true
    public var logs = true
    /// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, OTEL_EXPORTER_OTLP_LOGS_ENDPOINT: one signal's full URL,
    /// used as it is (nil: the endpoint's `/v1/traces`, `/v1/logs`).
    public var tracesEndpoint: String? = nil
    public var logsEndpoint: String? = nil
    /// OTEL_RESOURCE_ATTRIBUTES: more attributes of the resource, in their order (the resource's
    /// own `service.version` and `service.instance.id` are the contract's, whatever these say).
    public var resourceAttributes: [ResourceAttribute] = []
    /// Extra header fields for the collector (`headers_env` or OTEL_EXPORTER_OTLP_HEADERS); the
    /// values are secrets.
    public var headers: [Header] = []
    public var caFile: String? = nil

    public struct Header: Sendable, Equatable {
        public var name: String
        public var value: Secret
    }

    public struct ResourceAttribute: Sendable, Equatable {
        public var key: String
        public var value: String
    }

    public init() {}

    public var tracesURL: String { tracesEndpoint ?? Self.signalURL(endpoint, "v1/traces") }
    public var logsURL: String { logsEndpoint ?? Self.signalURL(endpoint, "v1/logs") }

    /// The OTLP/HTTP exporter's rule for the base endpoint: the signal's path after the base's path.
    static func signalURL(_ base: String, _ path: String) -> String {
        base.hasSuffix("/") ? base + path : base + "/" + path
    }

    /// The variables that override the section's keys (the OpenTelemetry specification's names).
    public enum Environment {
        public static let endpoint = "OTEL_EXPORTER_OTLP_ENDPOINT"
        public static let tracesEndpoint = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
        public static let logsEndpoint = "OTEL_EXPORTER_OTLP_LOGS_ENDPOINT"
        public static let serviceName = "OTEL_SERVICE_NAME"
        public static let resourceAttributes = "OTEL_RESOURCE_ATTRIBUTES"
        public static let sampler = "OTEL_TRACES_SAMPLER"
        public static let samplerArgument = "OTEL_TRACES_SAMPLER_ARG"
        public static let tracesExporter = "OTEL_TRACES_EXPORTER"
        public static let logsExporter = "OTEL_LOGS_EXPORTER"
        public static let disabled = "OTEL_SDK_DISABLED"
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
            telemetry.endpoint = try checkedURL(value, keyPath: keyPath)
        }
        load.found.collect {
            if let value = load.env(Environment.tracesEndpoint) { telemetry.tracesEndpoint = try checkedURL(value, keyPath: Environment.tracesEndpoint) }
        }
        load.found.collect {
            if let value = load.env(Environment.logsEndpoint) { telemetry.logsEndpoint = try checkedURL(value, keyPath: Environment.logsEndpoint) }
        }
        load.found.collect {
            guard let value = load.env(Environment.resourceAttributes) else { return }
            telemetry.resourceAttributes = try pairs(value, from: Environment.resourceAttributes).map { pair in
                guard !pair.name.isEmpty, !pair.value.isEmpty, !hasControlBytes(pair.value) else {
                    throw ConfigurationError(keyPath: Environment.resourceAttributes, reason: "\(pair.place) has an empty key or an empty or invalid value")
                }
                return ResourceAttribute(key: pair.name, value: pair.value)
            }
        }
        load.found.collect {
            // The OpenTelemetry specification's order: OTEL_SERVICE_NAME, then OTEL_RESOURCE_ATTRIBUTES's
            // service.name; the section's key comes between them, as the variables override keys.
            if let name = load.env(Environment.serviceName) {
                telemetry.serviceName = name
            } else if let name = try s.nonEmptyString("service_name") {
                telemetry.serviceName = name
            } else if let name = telemetry.resourceAttributes.last(where: { $0.key == "service.name" })?.value {
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
        load.found.collect { try applySampler(load, to: &telemetry) }
        if let traces = load.found.collect({ try s.bool("traces") }) { telemetry.traces = traces }
        if let logs = load.found.collect({ try s.bool("logs") }) { telemetry.logs = logs }
        if let traces = load.found.collect({ try exporterChoice(load, Environment.tracesExporter) }) { telemetry.traces = traces }
        if let logs = load.found.collect({ try exporterChoice(load, Environment.logsExporter) }) { telemetry.logs = logs }
        load.found.collect {
            guard let value = load.env(Environment.disabled)?.trimmingWhitespace().lowercased() else { return }
            guard value == "true" || value == "false" else {
                throw ConfigurationError(keyPath: Environment.disabled, reason: "expected true or false, got \(value)")
            }
            if value == "true" {
                telemetry.traces = false
                telemetry.logs = false
            }
        }
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

    /// `k=v,k=v` (the OpenTelemetry specification's OTEL_EXPORTER_OTLP_HEADERS and
    /// OTEL_RESOURCE_ATTRIBUTES: W3C Baggage-like pairs, each part percent-decoded, spaces around
    /// them ignored), with each pair's place for an error, which names the pair by it, never by its
    /// value. `keyPath` is what an error names (a variable, or the key that names one).
    static func pairs(_ text: String, from variable: String, keyPath: String? = nil) throws -> [(place: String, name: String, value: String)] {
        var pairs: [(place: String, name: String, value: String)] = []
        for (index, pair) in text.split(separator: ",", omittingEmptySubsequences: false).enumerated() {
            let trimmed = String(pair).trimmingWhitespace()
            if trimmed.isEmpty { continue }
            let place = "pair \(index + 1) of \(variable)"
            guard let equals = trimmed.firstIndex(of: "=") else {
                throw ConfigurationError(keyPath: keyPath ?? variable, reason: "\(place) has no '=' (expected name=value,name=value)")
            }
            guard let name = percentDecoded(trimmed[..<equals])?.trimmingWhitespace(),
                let value = percentDecoded(trimmed[trimmed.index(after: equals)...])?.trimmingWhitespace()
            else {
                throw ConfigurationError(keyPath: keyPath ?? variable, reason: "\(place) has a bad percent-escape")
            }
            pairs.append((place, name, value))
        }
        return pairs
    }

    /// OTEL_EXPORTER_OTLP_HEADERS, or the variable `headers_env` names (at `keyPath`).
    static func parseHeaders(_ text: String, from variable: String, keyPath: String) throws -> [Header] {
        try pairs(text, from: variable, keyPath: keyPath).map { pair in
            guard isValidFieldName(pair.name) else {
                throw ConfigurationError(keyPath: keyPath, reason: "\(pair.place) does not start with a valid header field name")
            }
            guard !pair.value.isEmpty, !hasControlBytes(pair.value) else {
                throw ConfigurationError(keyPath: keyPath, reason: "\(pair.place) (\(pair.name)) has an empty or invalid value")
            }
            return Header(name: pair.name, value: Secret(value: pair.value, origin: .env(variable)))
        }
    }

    static func hasControlBytes(_ value: String) -> Bool {
        value.utf8.contains { $0 < 0x20 && $0 != 0x09 || $0 == 0x7f }
    }

    /// An OTLP/HTTP URL (the endpoint, or one signal's), trimmed.
    static func checkedURL(_ value: String, keyPath: String) throws -> String {
        do {
            _ = try AddressParser.httpURL(value.trimmingWhitespace(), allowQuery: false)
        } catch let problem as AddressProblem {
            throw ConfigurationError(keyPath: keyPath, reason: problem.reason)
        }
        return value.trimmingWhitespace()
    }

    /// OTEL_TRACES_SAMPLER and OTEL_TRACES_SAMPLER_ARG (the OpenTelemetry specification's
    /// samplers): they override `sample_ratio`. The argument alone sets the ratio of tokenproxy's
    /// own sampler, a parent-based ratio.
    static func applySampler(_ load: LoadContext, to telemetry: inout TelemetryConfiguration) throws {
        var ratio: Double?
        if let argument = load.env(Environment.samplerArgument) {
            guard let value = Double(argument.trimmingWhitespace()), value >= 0, value <= 1 else {
                throw ConfigurationError(keyPath: Environment.samplerArgument, reason: "expected a number from 0 to 1, got \(argument)")
            }
            ratio = value
        }
        guard let name = load.env(Environment.sampler)?.trimmingWhitespace().lowercased() else {
            if let ratio { telemetry.sampleRatio = ratio }
            return
        }
        switch name {
        case "always_on", "parentbased_always_on": telemetry.sampleRatio = 1
        case "always_off", "parentbased_always_off": telemetry.sampleRatio = 0
        case "traceidratio", "parentbased_traceidratio": telemetry.sampleRatio = ratio ?? 1
        default:
            throw ConfigurationError(
                keyPath: Environment.sampler,
                reason: "expected always_on, always_off, traceidratio, parentbased_always_on, parentbased_always_off or parentbased_traceidratio, got \(name)")
        }
        telemetry.parentBased = name.hasPrefix("parentbased_")
    }

    /// OTEL_TRACES_EXPORTER or OTEL_LOGS_EXPORTER: `otlp` exports the signal, `none` does not (nil:
    /// the variable is not set). tokenproxy exports OTLP only.
    static func exporterChoice(_ load: LoadContext, _ variable: String) throws -> Bool? {
        guard let value = load.env(variable) else { return nil }
        let names = value.split(separator: ",").map { String($0).trimmingWhitespace().lowercased() }.filter { !$0.isEmpty }
        if names == ["none"] { return false }
        guard !names.isEmpty, names.allSatisfy({ $0 == "otlp" }) else {
            throw ConfigurationError(keyPath: variable, reason: "tokenproxy exports OTLP only: expected otlp or none, got \(value)")
        }
        return true
    }
}
