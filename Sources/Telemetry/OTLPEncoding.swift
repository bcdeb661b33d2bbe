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

    /// An origin's two fields as bytes, made once per exporter: `ResourceSpans`/`ResourceLogs`
    /// field 1 (the Resource) and `ScopeSpans`/`ScopeLogs` field 1 (the InstrumentationScope).
    struct EncodedOrigin: Sendable {
        let resource: [UInt8]
        let scope: [UInt8]

        init(_ origin: Origin) {
            var r = ProtobufWriter()
            // Resource { repeated KeyValue attributes = 1 }.
            r.message(1) { w in
                for attribute in origin.resource { w.keyValue(1, attribute) }
            }
            resource = r.bytes
            var s = ProtobufWriter()
            // InstrumentationScope { string name = 1; string version = 2 }.
            s.message(1) { w in
                w.string(1, origin.scopeName)
                w.string(2, origin.scopeVersion)
            }
            scope = s.bytes
        }
    }

    /// ExportTraceServiceRequest { repeated ResourceSpans resource_spans = 1 }.
    public static func traces(_ spans: [SpanData], origin: Origin) -> [UInt8] {
        var writer = SpanWriter(origin: EncodedOrigin(origin), spans: spans.count)
        for span in spans { writer.write(span) }
        return writer.finish()
    }

    /// ExportLogsServiceRequest { repeated ResourceLogs resource_logs = 1 }.
    public static func logs(_ records: [LogRecordData], origin: Origin) -> [UInt8] {
        logs(records, origin: EncodedOrigin(origin))
    }

    static func logs(_ records: [LogRecordData], origin: EncodedOrigin) -> [UInt8] {
        var w = ProtobufWriter(reservingCapacity: 256 + 512 * records.count)
        let resourceLogs = w.beginMessage(1)
        origin.resource.withUnsafeBytes { w.raw($0) }
        let scopeLogs = w.beginMessage(2)  // ResourceLogs.scope_logs
        origin.scope.withUnsafeBytes { w.raw($0) }
        for record in records { w.message(2) { writeLogRecord(&$0, record) } }  // ScopeLogs.log_records
        w.endMessage(scopeLogs)
        w.endMessage(resourceLogs)
        return w.bytes
    }

    /// LogRecord: time 1, severity_number 2, severity_text 3, body 5, attributes 6, flags 8,
    /// trace_id 9, span_id 10, observed_time 11.
    static func writeLogRecord(_ w: inout ProtobufWriter, _ record: LogRecordData) {
        w.fixed64(1, record.time)
        w.uint(2, record.severity.rawValue)
        w.string(3, record.severity.text)
        // AnyValue { string_value = 1 }, written even when empty (a oneof member).
        w.message(5) { body in
            body.tag(1, .lengthDelimited)
            body.appendLengthAndUTF8(record.body)
        }
        for attribute in record.attributes { w.keyValue(6, attribute) }
        if let traceID = record.traceID {
            w.fixed32(8, record.sampled ? 1 : 0)
            w.traceID(9, traceID)
            if record.spanID != 0 { w.spanID(10, record.spanID) }
        }
        w.fixed64(11, record.time)
    }

    /// trace.proto's SPAN_FLAGS_TRACE_FLAGS_MASK bit 0: sampled (only sampled spans are exported).
    static let spanFlagsSampled: UInt32 = 1
}

/// Spans written straight into an ExportTraceServiceRequest's bytes, on the exporter's thread: a
/// finished request's spans go from its trace to the bytes without a `SpanData` or an attribute
/// array made for them. A span is `begin`, its attributes, its links, `error`, then `end` (the
/// Span message's field order: attributes 9, links 13, status 15, flags 16).
public struct SpanWriter: ~Copyable {
    private var w: ProtobufWriter
    private let resourceSpansAt: Int
    private let scopeSpansAt: Int
    private var spanAt = 0

    init(origin: OTLPEncoding.EncodedOrigin, spans: Int) {
        var w = ProtobufWriter(reservingCapacity: 256 + 320 * spans)
        resourceSpansAt = w.beginMessage(1)  // ExportTraceServiceRequest.resource_spans
        origin.resource.withUnsafeBytes { w.raw($0) }
        scopeSpansAt = w.beginMessage(2)  // ResourceSpans.scope_spans
        origin.scope.withUnsafeBytes { w.raw($0) }
        self.w = w
    }

    /// The request's bytes, every span ended.
    consuming func finish() -> [UInt8] {
        w.endMessage(scopeSpansAt)
        w.endMessage(resourceSpansAt)
        return w.bytes
    }

    /// Span: trace_id 1, span_id 2, parent_span_id 4 (0: a root span), name 5, kind 6, start 7, end 8.
    public mutating func begin(
        traceID: TraceID, spanID: UInt64, parentSpanID: UInt64, name: String, kind: SpanData.Kind, start: UInt64, end: UInt64
    ) {
        spanAt = w.beginMessage(2)  // ScopeSpans.spans
        w.traceID(1, traceID)
        w.spanID(2, spanID)
        if parentSpanID != 0 { w.spanID(4, parentSpanID) }
        w.string(5, name)
        w.uint(6, kind.rawValue)
        w.fixed64(7, start)
        w.fixed64(8, end)
    }

    public mutating func attribute(_ key: StaticString, _ value: String) {
        var value = value
        value.withUTF8 { utf8 in key.withUTF8Buffer { w.keyValue(9, key: UnsafeRawBufferPointer($0), string: UnsafeRawBufferPointer(utf8)) } }
    }

    public mutating func attribute(_ key: StaticString, _ value: Substring) {
        var value = value
        value.withUTF8 { utf8 in key.withUTF8Buffer { w.keyValue(9, key: UnsafeRawBufferPointer($0), string: UnsafeRawBufferPointer(utf8)) } }
    }

    public mutating func attribute(_ key: StaticString, _ value: Int) {
        key.withUTF8Buffer { w.keyValue(9, key: UnsafeRawBufferPointer($0), int: Int64(value)) }
    }

    public mutating func attribute(_ key: StaticString, _ value: Bool) {
        key.withUTF8Buffer { w.keyValue(9, key: UnsafeRawBufferPointer($0), bool: value) }
    }

    /// Link { trace_id = 1; span_id = 2; flags = 6 }.
    public mutating func link(_ link: SpanLink) {
        let at = w.beginMessage(13)
        w.traceID(1, link.traceID)
        w.spanID(2, link.spanID)
        w.fixed32(6, OTLPEncoding.spanFlagsSampled)
        w.endMessage(at)
    }

    /// Status { string message = 2; StatusCode code = 3 } with STATUS_CODE_ERROR = 2: the contract's
    /// error code.
    public mutating func error(_ code: String) {
        let at = w.beginMessage(15)
        w.string(2, code)
        w.uint(3, 2)
        w.endMessage(at)
    }

    /// flags 16 (the sampled bit, as trace.proto's SpanFlags), and the span's length.
    public mutating func end() {
        w.fixed32(16, OTLPEncoding.spanFlagsSampled)
        w.endMessage(spanAt)
    }

    /// A span made whole beforehand (a `credential.refresh`, the tests').
    mutating func write(_ span: SpanData) {
        begin(
            traceID: span.traceID, spanID: span.spanID, parentSpanID: span.parentSpanID, name: span.name, kind: span.kind, start: span.start,
            end: span.end)
        for attribute in span.attributes { w.keyValue(9, attribute) }
        for link in span.links { self.link(link) }
        if let code = span.errorCode { error(code) }
        end()
    }
}

extension ProtobufWriter {
    /// A trace id: 16 bytes, `high` first.
    mutating func traceID(_ field: Int, _ id: TraceID) {
        tag(field, .lengthDelimited)
        byte(16)
        appendBigEndian(id.high)
        appendBigEndian(id.low)
    }

    /// A span id: 8 bytes.
    mutating func spanID(_ field: Int, _ id: UInt64) {
        tag(field, .lengthDelimited)
        byte(8)
        appendBigEndian(id)
    }

    /// KeyValue { string key = 1; AnyValue value = 2 } as field `field`, whose AnyValue is
    /// `valueSize` bytes that `writeValue` puts at the address it is given: every length is
    /// computed before the bytes (none to widen afterwards) and the whole field written after one
    /// capacity test (an exporter writes about ten a request).
    @inline(__always)
    private mutating func keyValue(
        _ field: Int, key: UnsafeRawBufferPointer, valueSize: Int, _ writeValue: (UnsafeMutablePointer<UInt8>) -> Void
    ) {
        let tag = UInt64(field) << 3 | UInt64(WireType.lengthDelimited.rawValue)
        let keyValueSize = 1 + Self.varintSize(UInt64(key.count)) + key.count + 1 + Self.varintSize(UInt64(valueSize)) + valueSize
        writeReserved(Self.varintSize(tag) + Self.varintSize(UInt64(keyValueSize)) + keyValueSize) { at in
            var i = Self.putVarint(tag, at: at)
            i += Self.putVarint(UInt64(keyValueSize), at: at + i)
            at[i] = 0x0A  // key: field 1, length-delimited
            i += 1
            i += Self.putVarint(UInt64(key.count), at: at + i)
            if let from = key.baseAddress { UnsafeMutableRawPointer(at + i).copyMemory(from: from, byteCount: key.count) }
            i += key.count
            at[i] = 0x12  // value: field 2, length-delimited
            i += 1
            i += Self.putVarint(UInt64(valueSize), at: at + i)
            writeValue(at + i)
            return i + valueSize
        }
    }

    // AnyValue's oneof: string_value 1, bool_value 2, int_value 3, double_value 4. A oneof member is
    // written even at its default (false, 0, ""), or the value would read as unset.

    mutating func keyValue(_ field: Int, key: UnsafeRawBufferPointer, string: UnsafeRawBufferPointer) {
        keyValue(field, key: key, valueSize: 1 + Self.varintSize(UInt64(string.count)) + string.count) { at in
            at[0] = 0x0A
            let n = Self.putVarint(UInt64(string.count), at: at + 1)
            if let from = string.baseAddress { UnsafeMutableRawPointer(at + 1 + n).copyMemory(from: from, byteCount: string.count) }
        }
    }

    mutating func keyValue(_ field: Int, key: UnsafeRawBufferPointer, int: Int64) {
        let value = UInt64(bitPattern: int)
        keyValue(field, key: key, valueSize: 1 + Self.varintSize(value)) { at in
            at[0] = 0x18
            _ = Self.putVarint(value, at: at + 1)
        }
    }

    mutating func keyValue(_ field: Int, key: UnsafeRawBufferPointer, bool: Bool) {
        keyValue(field, key: key, valueSize: 2) { at in
            at[0] = 0x10
            at[1] = bool ? 1 : 0
        }
    }

    mutating func keyValue(_ field: Int, key: UnsafeRawBufferPointer, double: Double) {
        keyValue(field, key: key, valueSize: 9) { at in
            at[0] = 0x21
            UnsafeMutableRawPointer(at + 1).storeBytes(of: double.bitPattern.littleEndian, as: UInt64.self)
        }
    }

    /// An `Attribute` (a key and value made beforehand) as field `field`.
    mutating func keyValue(_ field: Int, _ attribute: Attribute) {
        var key = attribute.key
        key.withUTF8 { keyUTF8 in
            let key = UnsafeRawBufferPointer(keyUTF8)
            switch attribute.value {
            case .string(var s): s.withUTF8 { keyValue(field, key: key, string: UnsafeRawBufferPointer($0)) }
            case .int(let i): keyValue(field, key: key, int: i)
            case .bool(let b): keyValue(field, key: key, bool: b)
            case .double(let d): keyValue(field, key: key, double: d)
            }
        }
    }
}
