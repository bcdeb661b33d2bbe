/// The OTLP/HTTP request bodies (opentelemetry-proto's collector/trace/v1 and collector/logs/v1
/// `Export…ServiceRequest`), written by `ProtobufWriter`. The field numbers are the .proto files'.
/// One resource and one instrumentation scope per request: every span of a batch is this process's.
public enum OTLPEncoding {
    /// The resource's attributes (CONTRACT.md "Telemetry": service.name, service.version,
    /// service.instance.id) and the scope's name and version.
    public struct Origin: Sendable, Equatable {
        public var resource: [Attribute]
        public var scopeName: String
        public var scopeVersion: String
        public init(resource: [Attribute], scopeName: String, scopeVersion: String) {
            self.resource = resource
            self.scopeName = scopeName
            self.scopeVersion = scopeVersion
        }
    }

    /// ExportTraceServiceRequest { repeated ResourceSpans resource_spans = 1 }.
    public static func traces(_ spans: [SpanData], origin: Origin) -> [UInt8] {
        var w = ProtobufWriter(reservingCapacity: 256 + 320 * spans.count)
        w.message(1) { resourceSpans in
            resourceSpans.message(1) { writeResource(&$0, origin) }
            resourceSpans.message(2) { scopeSpans in
                scopeSpans.message(1) { writeScope(&$0, origin) }
                for span in spans { scopeSpans.message(2) { writeSpan(&$0, span) } }
            }
        }
        return w.bytes
    }

    /// ExportLogsServiceRequest { repeated ResourceLogs resource_logs = 1 }.
    public static func logs(_ records: [LogRecordData], origin: Origin) -> [UInt8] {
        var w = ProtobufWriter(reservingCapacity: 256 + 512 * records.count)
        w.message(1) { resourceLogs in
            resourceLogs.message(1) { writeResource(&$0, origin) }
            resourceLogs.message(2) { scopeLogs in
                scopeLogs.message(1) { writeScope(&$0, origin) }
                for record in records { scopeLogs.message(2) { writeLogRecord(&$0, record) } }
            }
        }
        return w.bytes
    }

    /// Resource { repeated KeyValue attributes = 1 }.
    static func writeResource(_ w: inout ProtobufWriter, _ origin: Origin) {
        for attribute in origin.resource { w.message(1) { writeKeyValue(&$0, attribute) } }
    }

    /// InstrumentationScope { string name = 1; string version = 2 }.
    static func writeScope(_ w: inout ProtobufWriter, _ origin: Origin) {
        w.string(1, origin.scopeName)
        w.string(2, origin.scopeVersion)
    }

    /// Span: trace_id 1, span_id 2, parent_span_id 4, name 5, kind 6, start 7, end 8,
    /// attributes 9, links 13, status 15, flags 16 (the sampled bit, as trace.proto's SpanFlags).
    static func writeSpan(_ w: inout ProtobufWriter, _ span: SpanData) {
        writeTraceID(&w, 1, span.traceID)
        writeSpanID(&w, 2, span.spanID)
        if span.parentSpanID != 0 { writeSpanID(&w, 4, span.parentSpanID) }
        w.string(5, span.name)
        w.uint(6, span.kind.rawValue)
        w.fixed64(7, span.start)
        w.fixed64(8, span.end)
        for attribute in span.attributes { w.message(9) { writeKeyValue(&$0, attribute) } }
        for link in span.links {
            // Link { trace_id = 1; span_id = 2; flags = 6 }
            w.message(13) { l in
                writeTraceID(&l, 1, link.traceID)
                writeSpanID(&l, 2, link.spanID)
                l.fixed32(6, spanFlagsSampled)
            }
        }
        if let code = span.errorCode {
            // Status { string message = 2; StatusCode code = 3 } with STATUS_CODE_ERROR = 2.
            w.message(15) { s in
                s.string(2, code)
                s.uint(3, 2)
            }
        }
        w.fixed32(16, spanFlagsSampled)
    }

    /// LogRecord: time 1, severity_number 2, severity_text 3, body 5, attributes 6, flags 8,
    /// trace_id 9, span_id 10, observed_time 11.
    static func writeLogRecord(_ w: inout ProtobufWriter, _ record: LogRecordData) {
        w.fixed64(1, record.time)
        w.uint(2, record.severity.rawValue)
        w.string(3, record.severity.text)
        w.message(5) { writeAnyValue(&$0, .string(record.body)) }
        for attribute in record.attributes { w.message(6) { writeKeyValue(&$0, attribute) } }
        if let traceID = record.traceID {
            w.fixed32(8, record.sampled ? 1 : 0)
            writeTraceID(&w, 9, traceID)
            if record.spanID != 0 { writeSpanID(&w, 10, record.spanID) }
        }
        w.fixed64(11, record.time)
    }

    /// KeyValue { string key = 1; AnyValue value = 2 }.
    static func writeKeyValue(_ w: inout ProtobufWriter, _ attribute: Attribute) {
        w.string(1, attribute.key)
        w.message(2) { writeAnyValue(&$0, attribute.value) }
    }

    /// AnyValue's oneof: string_value 1, bool_value 2, int_value 3, double_value 4. A oneof member
    /// is written even at its default (false, 0, ""), or the value would read as unset.
    static func writeAnyValue(_ w: inout ProtobufWriter, _ value: Attribute.Value) {
        switch value {
        case .string(let s):
            w.tag(1, .lengthDelimited)
            w.appendLengthAndUTF8(s)
        case .bool(let b):
            w.tag(2, .varint)
            w.varint(b ? 1 : 0)
        case .int(let i):
            w.tag(3, .varint)
            w.varint(UInt64(bitPattern: i))
        case .double(let d):
            w.tag(4, .fixed64)
            w.appendLittleEndian(d.bitPattern)
        }
    }

    /// trace.proto's SPAN_FLAGS_TRACE_FLAGS_MASK bit 0: sampled (only sampled spans are exported).
    static let spanFlagsSampled: UInt32 = 1

    /// A trace id: 16 bytes, `high` first.
    static func writeTraceID(_ w: inout ProtobufWriter, _ field: Int, _ id: TraceID) {
        w.tag(field, .lengthDelimited)
        w.varint(16)
        w.appendBigEndian(id.high)
        w.appendBigEndian(id.low)
    }

    /// A span id: 8 bytes.
    static func writeSpanID(_ w: inout ProtobufWriter, _ field: Int, _ id: UInt64) {
        w.tag(field, .lengthDelimited)
        w.varint(8)
        w.appendBigEndian(id)
    }
}
