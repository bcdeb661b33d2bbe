/// One finished span as the exporter queues it (the OTLP `Span` message's fields that tokenproxy
/// sets; opentelemetry-proto's trace/v1/trace.proto). Ids are numbers here and bytes on the wire:
/// a trace id is 16 bytes, a span id 8, big-endian as W3C Trace Context writes them in hex.
public struct SpanData: Sendable, Equatable {
    public enum Kind: UInt64, Sendable {
        case `internal` = 1
        case server = 2
        case client = 3
    }

    public var traceID: TraceID
    public var spanID: UInt64
    /// 0: a root span.
    public var parentSpanID: UInt64 = 0
    public var name: String
    public var kind: Kind
    /// Unix time in nanoseconds.
    public var start: UInt64
    public var end: UInt64
    public var attributes: [Attribute] = []
    public var links: [SpanLink] = []
    /// nil: the status is unset; else the contract's error code (CONTRACT.md "Telemetry").
    public var errorCode: String? = nil

    public init(traceID: TraceID, spanID: UInt64, parentSpanID: UInt64 = 0, name: String, kind: Kind, start: UInt64, end: UInt64) {
        self.traceID = traceID
        self.spanID = spanID
        self.parentSpanID = parentSpanID
        self.name = name
        self.kind = kind
        self.start = start
        self.end = end
    }
}

/// A finished request handed to the exporter as it is (one reference from the event loop): its
/// spans are written on the exporter's thread, straight into the export's bytes, so the loop pays
/// for neither the spans nor their attributes. The loop no longer changes it once handed over.
public protocol FinishedTrace: AnyObject, Sendable {
    /// How many spans `writeSpans` writes (the queue's bound and a batch's limit count spans).
    var spanCount: Int { get }
    func writeSpans(_ writer: inout SpanWriter)
}

/// A 128-bit trace id, `high` first on the wire.
public struct TraceID: Sendable, Hashable {
    public var high: UInt64
    public var low: UInt64
    public init(high: UInt64, low: UInt64) {
        self.high = high
        self.low = low
    }
    /// All zeros is not a trace id (W3C Trace Context §3.2.2.3).
    public var isValid: Bool { high != 0 || low != 0 }
}

/// A link to another span (a `token.wait` to the `credential.refresh` it waited for).
public struct SpanLink: Sendable, Equatable {
    public var traceID: TraceID
    public var spanID: UInt64
    public init(traceID: TraceID, spanID: UInt64) {
        self.traceID = traceID
        self.spanID = spanID
    }
}

/// One attribute: a key from the semantic conventions or `tokenproxy.*`, and a value. No value
/// is ever a token, a secret or a query (CONTRACT.md "Telemetry"): the callers set only names,
/// codes, statuses and paths without their query.
public struct Attribute: Sendable, Equatable {
    public enum Value: Sendable, Equatable {
        case string(String)
        case int(Int64)
        case bool(Bool)
        case double(Double)
    }
    public var key: String
    public var value: Value
    public init(_ key: String, _ value: Value) {
        self.key = key
        self.value = value
    }
    public init(_ key: String, _ value: String) { self.init(key, .string(value)) }
    public init(_ key: String, _ value: Int) { self.init(key, .int(Int64(value))) }
    public init(_ key: String, _ value: Bool) { self.init(key, .bool(value)) }
}

/// One log record (logs/v1/logs.proto `LogRecord`): a warning, or an audit event with its fields
/// as attributes.
public struct LogRecordData: Sendable, Equatable {
    /// The OTLP severity numbers tokenproxy uses (logs.proto `SeverityNumber`).
    public enum Severity: UInt64, Sendable {
        case info = 9
        case warn = 13
        case error = 17
        var text: String {
            switch self {
            case .info: return "INFO"
            case .warn: return "WARN"
            case .error: return "ERROR"
            }
        }
    }
    /// Unix time in nanoseconds.
    public var time: UInt64
    public var severity: Severity
    public var body: String
    public var attributes: [Attribute] = []
    /// The request's trace, when the record belongs to one; the span id only when it was sampled.
    public var traceID: TraceID? = nil
    public var spanID: UInt64 = 0
    public var sampled = false

    public init(time: UInt64, severity: Severity, body: String) {
        self.time = time
        self.severity = severity
        self.body = body
    }
}
