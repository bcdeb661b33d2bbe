import Basics
import Logging
import Sockets

/// The format of a log line.
public enum LogFormat: String, Sendable, CaseIterable {
    /// `2026-11-22T03:00:00.123Z info listening on 127.0.0.1:8080 key=value`
    case text
    /// `{"ts":"2026-11-22T03:00:00.123Z","level":"info","msg":"listening on …","key":"value"}`
    case json
}

/// A swift-log handler writing one line per record to stderr, every message and metadata value
/// redacted through a `SecretRegistry` first.
///
/// Levels are the contract's four: `error`, `warn`, `info`, `debug` (swift-log's `critical` maps to
/// `error`, `notice` to `info`, `trace` to `debug`).
public struct TokenproxyLogHandler: LogHandler {
    public var logLevel: Logger.Level
    public var metadata: Logger.Metadata = [:]
    public var metadataProvider: Logger.MetadataProvider?

    public let label: String
    public let format: LogFormat
    private let registry: SecretRegistry
    private let output: @Sendable (String) -> Void

    /// - Parameters:
    ///   - output: receives each finished line, newline included; by default it is written to fd 2
    ///     with unbuffered `write(2)` calls.
    public init(
        label: String,
        level: Logger.Level = .info,
        format: LogFormat = .text,
        registry: SecretRegistry = .shared,
        metadataProvider: Logger.MetadataProvider? = nil,
        output: @escaping @Sendable (String) -> Void = TokenproxyLogHandler.writeToStandardError
    ) {
        self.label = label
        self.logLevel = level
        self.format = format
        self.registry = registry
        self.metadataProvider = metadataProvider
        self.output = output
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    public func log(event: LogEvent) {
        var merged = metadata
        if let provided = metadataProvider?.get() {
            merged.merge(provided) { _, new in new }
        }
        if let own = event.metadata {
            merged.merge(own) { _, new in new }
        }
        let message = registry.redact(event.message.description)
        let line = Self.render(
            timestamp: Self.timestamp(),
            level: Self.levelName(event.level),
            message: message,
            metadata: merged,
            format: format,
            registry: registry
        )
        output(line)
        if event.level >= .warning {
            LogForwarding.shared.forward(event.level, message, merged.sorted { $0.key < $1.key }.map { ($0.key, registry.redact(Self.plain($0.value))) })
        }
    }

    /// The contract's name for a swift-log level.
    public static func levelName(_ level: Logger.Level) -> String {
        switch level {
        case .trace, .debug: return "debug"
        case .info, .notice: return "info"
        case .warning: return "warn"
        case .error, .critical: return "error"
        }
    }

    /// Builds one line (with its trailing newline). Exposed for tests.
    static func render(
        timestamp: String,
        level: String,
        message: String,
        metadata: Logger.Metadata,
        format: LogFormat,
        registry: SecretRegistry
    ) -> String {
        let keys = metadata.keys.sorted()
        switch format {
        case .text:
            var line = "\(timestamp) \(level) \(Self.singleLine(message))"
            for key in keys {
                let value = registry.redact(Self.plain(metadata[key]!))
                line += " \(Self.singleLine(key))=\(Self.textValue(value))"
            }
            return line + "\n"
        case .json:
            var line = "{\"ts\":\(Self.jsonString(timestamp)),\"level\":\(Self.jsonString(level)),\"msg\":\(Self.jsonString(message))"
            for key in keys where key != "ts" && key != "level" && key != "msg" {
                line += ",\(Self.jsonString(key)):\(Self.jsonValue(metadata[key]!, registry: registry))"
            }
            return line + "}\n"
        }
    }

    // MARK: - Rendering

    private static func plain(_ value: Logger.Metadata.Value) -> String {
        switch value {
        case .string(let s): return s
        case .stringConvertible(let c): return c.description
        case .array(let items): return "[" + items.map(plain).joined(separator: ",") + "]"
        case .dictionary(let dict):
            return "{" + dict.keys.sorted().map { "\($0):\(plain(dict[$0]!))" }.joined(separator: ",") + "}"
        }
    }

    private static func jsonValue(_ value: Logger.Metadata.Value, registry: SecretRegistry) -> String {
        switch value {
        case .string(let s): return jsonString(registry.redact(s))
        case .stringConvertible(let c): return jsonString(registry.redact(c.description))
        case .array(let items): return "[" + items.map { jsonValue($0, registry: registry) }.joined(separator: ",") + "]"
        case .dictionary(let dict):
            return "{"
                + dict.keys.sorted().map { "\(jsonString($0)):\(jsonValue(dict[$0]!, registry: registry))" }
                .joined(separator: ",") + "}"
        }
    }

    /// Keeps a record on one line: control characters are escaped.
    private static func singleLine(_ s: String) -> String { JSONString.controlCharactersEscaped(s) }

    /// A text-format value: bare when it is a simple word, JSON-quoted otherwise.
    private static func textValue(_ s: String) -> String {
        let needsQuotes = s.isEmpty || s.utf8.contains { $0 <= 0x20 || $0 == 0x22 || $0 == 0x3D || $0 == 0x7F || $0 == 0x5C }
        return needsQuotes ? jsonString(s) : s
    }

    /// A JSON string literal (RFC 8259 §7).
    public static func jsonString(_ s: String) -> String { JSONString.quoted(s) }

    /// RFC 3339 UTC time with milliseconds: `2026-11-22T03:00:00.123Z`.
    static func timestamp() -> String {
        let (seconds, milliseconds) = Syscall.wallClockParts()
        return timestamp(epochSeconds: seconds, milliseconds: milliseconds)
    }

    /// The UTC calendar time of `epochSeconds` (`CivilTime`: no C time function is needed).
    static func timestamp(epochSeconds: Int, milliseconds: Int) -> String {
        let time = CivilTime(epochSeconds: epochSeconds)
        func pad(_ v: Int, _ width: Int) -> String {
            let s = String(v)
            return s.count >= width ? s : String(repeating: "0", count: width - s.count) + s
        }
        return "\(pad(time.year, 4))-\(pad(time.month, 2))-\(pad(time.day, 2))"
            + "T\(pad(time.secondOfDay / 3600, 2)):\(pad(time.secondOfDay / 60 % 60, 2)):\(pad(time.secondOfDay % 60, 2))"
            + ".\(pad(milliseconds, 3))Z"
    }

    /// Writes `line` to fd 2 with `write(2)`, across interruptions and short writes. Unbuffered, so
    /// lines from several threads never interleave within a line smaller than PIPE_BUF and nothing
    /// is lost when the process exits.
    public static let writeToStandardError: @Sendable (String) -> Void = { line in
        let bytes = Array(line.utf8)
        bytes.withUnsafeBytes { raw in try? Syscall.writeAll(2, raw) }
    }
}

/// Installs the tokenproxy log handler as the process's swift-log backend.
public enum LogSetup {
    /// Parses a contract level name (`error`, `warn`, `info`, `debug`; `warning` and `trace` are
    /// accepted too). Returns nil for anything else.
    public static func level(named name: String) -> Logger.Level? {
        switch name.lowercased() {
        case "error": return .error
        case "warn", "warning": return .warning
        case "info": return .info
        case "debug": return .debug
        case "trace": return .trace
        default: return nil
        }
    }

    /// Call once, before the first `Logger` is made. An unknown level means `info`, an unknown
    /// format `text` (the configuration layer rejects both before this is reached).
    public static func bootstrap(level: String, format: String) {
        let parsedLevel = Self.level(named: level) ?? .info
        let parsedFormat = LogFormat(rawValue: format.lowercased()) ?? .text
        LoggingSystem.bootstrap { label in
            TokenproxyLogHandler(label: label, level: parsedLevel, format: parsedFormat)
        }
    }
}
