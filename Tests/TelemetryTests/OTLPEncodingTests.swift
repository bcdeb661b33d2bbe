import Testing

@testable import Telemetry

/// The expected bytes were made by opentelemetry-proto 1.39.1 (PyPI, the official definitions)
/// from the same values: `SerializeToString().hex()` of the message built field by field.
@Suite struct OTLPEncodingTests {
    let origin = OTLPEncoding.Origin(resource: [Attribute("service.name", "tokenproxy")], scopeName: "tokenproxy", scopeVersion: "1.2.3")
    let trace = TraceID(high: 0x0102_0304_0506_0708, low: 0x090A_0B0C_0D0E_0F10)

    @Test func aServerSpanWithAttributesALinkAndAnErrorIsTheOfficialEncoding() {
        var span = SpanData(
            traceID: trace, spanID: 0x1112_1314_1516_1718, parentSpanID: 0x2122_2324_2526_2728, name: "GET", kind: .server,
            start: 1_700_000_000_000_000_000, end: 1_700_000_000_001_500_000)
        span.attributes = [Attribute("http.request.method", "GET"), Attribute("http.response.status_code", 502), Attribute("tokenproxy.retried_401", false)]
        span.links = [SpanLink(traceID: trace, spanID: 0x3132_3334_3536_3738)]
        span.errorCode = "bad_gateway"
        let expected =
            "0a92020a1e0a1c0a0c736572766963652e6e616d65120c0a0a746f6b656e70726f787912ef010a130a0a746f6b656e70726f78791205312e322e3312d7010a10"
            + "0102030405060708090a0b0c0d0e0f1012081112131415161718220821222324252627282a0347455430023900002a36fe9c97174160e34036fe9c97174a1c0a"
            + "13687474702e726571756573742e6d6574686f6412050a034745544a200a19687474702e726573706f6e73652e7374617475735f636f6465120318f6034a1c0a"
            + "16746f6b656e70726f78792e726574726965645f343031120210006a210a100102030405060708090a0b0c0d0e0f101208313233343536373835010000007a0f"
            + "120b6261645f676174657761791802850101000000"
        #expect(hex(OTLPEncoding.traces([span], origin: origin)) == expected)

        // The same span written field by field, as a finished request's trace writes its spans.
        var writer = SpanWriter(origin: OTLPEncoding.EncodedOrigin(origin), spans: 1)
        writer.begin(
            traceID: trace, spanID: 0x1112_1314_1516_1718, parentSpanID: 0x2122_2324_2526_2728, name: "GET", kind: .server,
            start: 1_700_000_000_000_000_000, end: 1_700_000_000_001_500_000)
        writer.attribute("http.request.method", "GET")
        writer.attribute("http.response.status_code", 502)
        writer.attribute("tokenproxy.retried_401", false)
        writer.link(SpanLink(traceID: trace, spanID: 0x3132_3334_3536_3738))
        writer.error("bad_gateway")
        writer.end()
        #expect(hex(writer.finish()) == expected)
    }

    /// Spans of over 127 bytes each, and a batch of them over 16,383 bytes: every length widened in
    /// place moves its span's bytes whole (the writer's buffer grows many times on the way; the
    /// end-to-end tests decode such batches with opentelemetry-proto).
    @Test func aBatchOfLongSpansKeepsEveryLength() {
        var spans: [SpanData] = []
        for i in 0..<200 {
            var span = SpanData(traceID: trace, spanID: UInt64(i + 1), name: "GET", kind: .client, start: 1, end: 2)
            span.attributes = [Attribute("url.path", String(repeating: "p", count: 100 + i)), Attribute("server.port", i)]
            spans.append(span)
        }
        let bytes = OTLPEncoding.traces(spans, origin: origin)
        #expect(bytes.count > 200 * 128)
        // The 200 spans' url.path values appear in order, each whole.
        let text = String(decoding: bytes, as: UTF8.self)
        var from = text.startIndex
        for i in 0..<200 {
            let path = String(repeating: "p", count: 100 + i)
            let found = text.range(of: path, range: from..<text.endIndex)
            #expect(found != nil, "span \(i)")
            if let found { from = found.upperBound }
        }
    }

    @Test func aWarningRecordWithItsTraceIsTheOfficialEncoding() {
        var record = LogRecordData(time: 1_700_000_000_000_000_000, severity: .warn, body: "telemetry: lost")
        record.attributes = [Attribute("decision", "refused"), Attribute("ratio", .double(0.25))]
        record.traceID = trace
        record.spanID = 0x1112_1314_1516_1718
        record.sampled = true
        let expected =
            "0ab3010a1e0a1c0a0c736572766963652e6e616d65120c0a0a746f6b656e70726f78791290010a130a0a746f6b656e70726f78791205312e322e3312790900"
            + "002a36fe9c9717100d1a045741524e2a110a0f74656c656d657472793a206c6f737432150a086465636973696f6e12090a077265667573656432120a0572617469"
            + "6f120921000000000000d03f45010000004a100102030405060708090a0b0c0d0e0f10520811121314151617185900002a36fe9c9717"
        #expect(hex(OTLPEncoding.logs([record], origin: origin)) == expected)
    }

    @Test func varintsTakeSevenBitsABYte() {
        var w = ProtobufWriter()
        w.varint(300)
        w.varint(0)
        w.varint(UInt64.max)
        #expect(hex(w.bytes) == "ac0200ffffffffffffffffff01")
    }

    /// A nested message's length is written after its contents: one of 20,004 bytes takes a
    /// three-byte varint where one byte was kept for it.
    @Test func aLongNestedMessagesLengthTakesAsManyBytesAsItNeeds() {
        var w = ProtobufWriter()
        w.message(1) { $0.string(1, String(repeating: "a", count: 20000)) }
        #expect(hex(Array(w.bytes.prefix(8))) == "0aa49c010aa09c01")
        #expect(w.bytes.count == 8 + 20000)
        #expect(w.bytes.dropFirst(8).allSatisfy { $0 == UInt8(ascii: "a") })
    }

    func hex(_ bytes: [UInt8]) -> String {
        bytes.map { ($0 < 16 ? "0" : "") + String($0, radix: 16) }.joined()
    }
}
