import Foundation
import TestSupport
import Testing

/// CONTRACT.md "Telemetry": the audit events as OTLP log records (request and credential events,
/// whatever `traces` says and whether the request was sampled), what is queued at exit, and what
/// was queued when a reload moved the endpoint.
extension TelemetryTests {
    static let auditTop = "audit: {path: ./audit.jsonl}"

    /// The audit file's lines as JSON objects.
    func auditLines(_ proxy: ProxyProcess) throws -> [[String: Any]] {
        let text = (try? String(contentsOfFile: proxy.directory.file("audit.jsonl"), encoding: .utf8)) ?? ""
        return try text.split(separator: "\n").map { line in
            try #require(JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any], "\(line)")
        }
    }

    /// An audit line's `ts` (RFC 3339 with milliseconds) in Unix nanoseconds, as its record's time.
    func unixNanoseconds(_ ts: Any?) throws -> Int {
        let parser = ISO8601DateFormatter()
        parser.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        let date = try #require((ts as? String).flatMap(parser.date(from:)), "ts \(String(describing: ts))")
        return Int((date.timeIntervalSince1970 * 1000).rounded()) * 1_000_000
    }

    /// The trace id of a `traceparent` value.
    func traceID(_ traceparent: String?) -> String? {
        traceparent.map { $0.split(separator: "-").dropFirst().first.map(String.init) ?? "" }
    }

    @Test func withoutTracesTheAuditEventsAreStillLogRecordsWithTheRequestsTraceID() throws {
        let world = try TelemetryFixture(telemetry: "traces: false", top: Self.auditTop)
        defer { try? world.stop() }
        let continued = "00-\(Self.clientTrace)-\(Self.clientSpan)-01"
        let first = try curl(["-H", "traceparent: \(continued)", world.url("/continued?api_key=query-secret-value")])
        #expect(first.status == 200)
        // No span to be the parent of: the client's traceparent goes upstream as it came.
        #expect(echoedHeader(first, "traceparent") == continued)
        #expect(try curl([world.url("/new")]).status == 200)
        let records = try world.receiver.logs { $0.filter { $0.attribute("event") as? String == "request" }.count >= 2 }
        let lines = try auditLines(world.proxy)
        for path in ["/continued", "/new"] {
            let record = try #require(records.first { $0.attribute("path") as? String == path }, "\(records)")
            let line = try #require(lines.first { $0["path"] as? String == path }, "\(lines)")
            #expect(record.attribute("decision") as? String == "forwarded")
            #expect(record.attribute("route") as? String == "default")
            #expect(record.attribute("status") as? String == "200")
            #expect(record["body"] as? String == "request")
            #expect(record["time"] as? Int == (try unixNanoseconds(line["ts"])))
            // The record's trace id is the request's, as its audit line says; no span was made.
            let trace = try #require(record["trace_id"] as? String)
            #expect(trace.count == 32 && trace != String(repeating: "0", count: 32))
            #expect(line["trace_id"] as? String == trace)
            #expect(record["span_id"] as? String == "")
        }
        #expect(records.first { $0.attribute("path") as? String == "/continued" }?["trace_id"] as? String == Self.clientTrace)
        #expect(try world.receiver.spans().isEmpty)
        try expectNoSecret(in: world.receiver, ["query-secret-value", "api_key", e2eToken])
    }

    @Test func anUnsampledRequestsAuditEventIsALogRecordWithItsTraceIDAndASampledOneWithItsSpan() throws {
        let world = try TelemetryFixture(telemetry: "sample_ratio: 0", top: Self.auditTop)
        defer { try? world.stop() }
        let unsampled = try curl([world.url("/unsampled")])
        #expect(unsampled.status == 200)
        let sent = try #require(echoedHeader(unsampled, "traceparent"))
        #expect(try curl(["-H", "traceparent: 00-\(Self.clientTrace)-\(Self.clientSpan)-01", world.url("/sampled")]).status == 200)
        let records = try world.receiver.logs { $0.filter { $0.attribute("event") as? String == "request" }.count >= 2 }
        let quiet = try #require(records.first { $0.attribute("path") as? String == "/unsampled" }, "\(records)")
        #expect(quiet["trace_id"] as? String == traceID(sent))
        #expect(quiet["span_id"] as? String == "")
        let loud = try #require(records.first { $0.attribute("path") as? String == "/sampled" }, "\(records)")
        let spans = try world.receiver.spans { $0.contains { $0["kind"] as? String == "SPAN_KIND_SERVER" } }
        let server = try #require(spans.first { $0["kind"] as? String == "SPAN_KIND_SERVER" }, "\(spans)")
        #expect(loud["trace_id"] as? String == Self.clientTrace)
        #expect(loud["span_id"] as? String == server["span_id"] as? String)
    }

    /// A request whose head could not be read is refused with its audit line, and the line is a
    /// log record too (of no trace: the proxy never read a traceparent).
    @Test func aRequestRefusedBeforeItsHeadWasReadIsALogRecordToo() throws {
        let world = try TelemetryFixture(top: Self.auditTop)
        defer { try? world.stop() }
        let client = try RawHTTPClient(port: world.proxy.port)
        try client.send("GET /x HTTP/1.1\r\nHost: a\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n")
        #expect(try client.readResponse().status == 400)
        let records = try world.receiver.logs { $0.contains { $0.attribute("decision") as? String == "refused" } }
        let refused = try #require(records.first { $0.attribute("decision") as? String == "refused" }, "\(records)")
        #expect(refused.attribute("event") as? String == "request")
        #expect(refused.attribute("reason") as? String == "bad_request")
        #expect(refused.attribute("status") as? String == "400")
        #expect(refused["trace_id"] as? String == "")
        let line = try #require(try auditLines(world.proxy).first { $0["decision"] as? String == "refused" })
        #expect(refused["time"] as? Int == (try unixNanoseconds(line["ts"])))
    }

    /// Each mint is a `credential` audit event, and as a log record in the trace of its
    /// `credential.refresh` span; no token or client secret in any attribute.
    @Test func eachMintIsACredentialLogRecordInItsRefreshsTrace() throws {
        let world = try MintingTelemetryFixture(upstream: "echo_upstream", more: Self.auditTop)
        defer { world.stop() }
        let answered = try curl([world.url("/first")])
        #expect(answered.status == 200)
        let token = try #require(try Echo(answered.body).value("Authorization"))
        let records = try world.receiver.logs { $0.contains { $0.attribute("event") as? String == "credential" } }
        let minted = try #require(records.first { $0.attribute("event") as? String == "credential" }, "\(records)")
        #expect(minted["body"] as? String == "credential")
        #expect(minted.attribute("route") as? String == "default")
        #expect(minted.attribute("credential") as? String == "oauth2_client_credentials")
        #expect(minted.attribute("action") as? String == "mint")
        #expect(minted.attribute("outcome") as? String == "success")
        let line = try #require(try auditLines(world.proxy).first { $0["event"] as? String == "credential" })
        #expect(minted["time"] as? Int == (try unixNanoseconds(line["ts"])))
        let spans = try world.receiver.spans { $0.contains { $0["name"] as? String == "credential.refresh" } }
        let refresh = try #require(spans.first { $0["name"] as? String == "credential.refresh" }, "\(spans)")
        #expect(minted["trace_id"] as? String == refresh["trace_id"] as? String)
        #expect(minted["span_id"] as? String == refresh["span_id"] as? String)
        try expectNoSecret(in: world.receiver, [world.clientSecret, token, String(token.dropFirst("Bearer ".count))])
    }

    /// SIGTERM right after the requests: the spans and records still queued go out before the
    /// process ends (OpenTelemetry SDK's Shutdown).
    @Test func whatIsQueuedAtSIGTERMReachesTheCollectorBeforeTheExit() throws {
        let world = try TelemetryFixture(top: Self.auditTop)
        defer { world.receiver.stop() }
        let paths = (0..<5).map { "/exit-\($0)" }
        for path in paths { #expect(try curl([world.url(path)]).status == 200) }
        try world.finish()
        let spans = try world.receiver.spans()
        let records = try world.receiver.logs()
        for path in paths {
            #expect(spans.contains { $0.attribute("url.path") as? String == path }, "the SERVER span of \(path)")
            #expect(records.contains { $0.attribute("path") as? String == path }, "the audit record of \(path)")
        }
    }

    /// A collector that does not answer holds the exit no longer than the flush's bound (here the
    /// fixture's `drain_timeout: 2s`).
    @Test func aCollectorThatDoesNotAnswerDoesNotHoldTheExit() throws {
        let world = try TelemetryFixture()
        defer { world.receiver.stop() }
        try world.receiver.mode(delay: 120)
        for i in 0..<5 { #expect(try curl([world.url("/held-\(i)")]).status == 200) }
        world.proxy.terminate(signal: SIGTERM)
        #expect(try world.proxy.waitForExit(timeout: 60) == 0)
        world.upstream.stop()
    }

    /// A reload that moves the endpoint while spans wait behind a slow export: they still go to the
    /// collector they were recorded for, and the requests after it to the new one.
    @Test func spansQueuedBeforeAReloadGoToTheEndpointTheyWereRecordedFor() throws {
        let world = try TelemetryFixture()
        defer { try? world.stop() }
        try world.receiver.mode(delay: 3)
        #expect(try curl([world.url("/first")]).status == 200)
        // An export is under way (it takes 3 s): the next request's spans wait in the queue.
        let deadline = Date().addingTimeInterval(30)
        while (try world.receiver.seen()["exports"] as? Int ?? 0) == 0 && Date() < deadline { Thread.sleep(forTimeInterval: 0.1) }
        #expect(try curl([world.url("/queued")]).status == 200)
        let second = try world.reloadToNewReceiver()
        #expect(try curl([world.url("/after")]).status == 200)
        let before = try world.receiver.spans { $0.contains { $0.attribute("url.path") as? String == "/queued" } }
        #expect(before.contains { $0.attribute("url.path") as? String == "/queued" })
        let after = try second.spans { $0.contains { $0.attribute("url.path") as? String == "/after" } }
        #expect(after.contains { $0.attribute("url.path") as? String == "/after" })
        #expect(!after.contains { $0.attribute("url.path") as? String == "/queued" })
        #expect(try world.dropped() == 0)
    }
}
