import Foundation
import TestSupport
import Testing

/// CONTRACT.md "Telemetry: OpenTelemetry traces and logs", through the real binary, curl and an
/// OTLP receiver that decodes with opentelemetry-proto: the span tree of a request and of a 401
/// retry, a continued and an unsampled `traceparent`, a collector that is slow, refusing or down,
/// and no secret in any decoded attribute.
@Suite(.tags(.endToEnd), .timeLimit(.minutes(20))) struct TelemetryTests {
    static let clientTrace = "4bf92f3577b34da6a3ce929d0e0e4736"
    static let clientSpan = "00f067aa0ba902b7"

    func echoedHeader(_ r: CurlResult, _ name: String) -> String? {
        (r.json?["headers"] as? [[String]])?.first { $0.count == 2 && $0[0].lowercased() == name }?[1]
    }

    @Test func aContinuedTraceparentGivesAServerSpanUnderTheClientsAndAClientSpanTheUpstreamSees() throws {
        let world = try TelemetryFixture()
        defer { try? world.stop() }
        let r = try curl([
            "-H", "traceparent: 00-\(Self.clientTrace)-\(Self.clientSpan)-01", "-H", "tracestate: vendor=opaque",
            world.url("/a/../items/7?api_key=query-secret-value"),
        ])
        #expect(r.status == 200)
        let spans = try world.receiver.spans { $0.count >= 2 }
        let server = try #require(spans.first { $0["kind"] as? String == "SPAN_KIND_SERVER" }, "\(spans)")
        let client = try #require(spans.first { $0["kind"] as? String == "SPAN_KIND_CLIENT" }, "\(spans)")
        #expect(server["trace_id"] as? String == Self.clientTrace)
        #expect(server["parent_span_id"] as? String == Self.clientSpan)
        #expect(server.attribute("url.path") as? String == "/items/7")
        #expect(server.attribute("http.request.method") as? String == "GET")
        #expect(server.attribute("http.response.status_code") as? Int == 200)
        #expect(server.attribute("tokenproxy.route") as? String == "default")
        #expect(server.attribute("tokenproxy.retried_401") as? Bool == false)
        #expect(client["trace_id"] as? String == Self.clientTrace)
        #expect(client["parent_span_id"] as? String == server["span_id"] as? String)
        #expect(client.attribute("server.address") as? String == "127.0.0.1")
        #expect(client.attribute("server.port") as? Int == world.upstream.port)
        #expect(client.attribute("http.response.status_code") as? Int == 200)
        // The upstream got the CLIENT span's context, and the client's tracestate as it came.
        #expect(echoedHeader(r, "traceparent") == "00-\(Self.clientTrace)-\(client["span_id"] as? String ?? "?")-01")
        #expect(echoedHeader(r, "tracestate") == "vendor=opaque")
        let resources = try world.receiver.seen()["resources"] as? [[String: Any]] ?? []
        let resource = try #require(resources.first)
        #expect(resource["service.name"] as? String == "tokenproxy")
        #expect(resource["service.version"] as? String == "0.1.0")
        #expect(resource["service.instance.id"] as? String == "\(ProcessInfo.processInfo.hostName):\(world.proxy.processIdentifier)")
        try expectNoSecret(in: world.receiver, ["query-secret-value", "api_key", e2eToken])
    }

    @Test func anUnsampledTraceparentKeepsItsTraceIDUpstreamAndExportsNothing() throws {
        let world = try TelemetryFixture()
        defer { try? world.stop() }
        let r = try curl(["-H", "traceparent: 00-\(Self.clientTrace)-\(Self.clientSpan)-00", world.url("/quiet")])
        #expect(r.status == 200)
        let sent = try #require(echoedHeader(r, "traceparent"))
        #expect(sent.hasPrefix("00-\(Self.clientTrace)-") && sent.hasSuffix("-00"), "\(sent)")
        #expect(!sent.contains(Self.clientSpan))
        // A sampled request after it: once its spans are in, the unsampled one had its chance.
        #expect(try curl([world.url("/loud")]).status == 200)
        let spans = try world.receiver.spans { $0.contains { $0.attribute("url.path") as? String == "/loud" } }
        #expect(spans.contains { $0.attribute("url.path") as? String == "/loud" })
        #expect(!spans.contains { $0["trace_id"] as? String == Self.clientTrace })
    }

    @Test func aRatioOfZeroSamplesNoNewTraceButFollowsASampledClient() throws {
        let world = try TelemetryFixture(telemetry: "sample_ratio: 0")
        defer { try? world.stop() }
        let unsampled = try curl([world.url("/new")])
        #expect(echoedHeader(unsampled, "traceparent")?.hasSuffix("-00") == true)
        #expect(try curl(["-H", "traceparent: 00-\(Self.clientTrace)-\(Self.clientSpan)-01", world.url("/followed")]).status == 200)
        let spans = try world.receiver.spans { $0.count >= 2 }
        // Neither the new trace nor the start's credential.refresh (a new trace too) was sampled.
        #expect(Set(spans.compactMap { $0["trace_id"] as? String }) == [Self.clientTrace], "\(spans)")
    }

    /// The OpenTelemetry specification's variables as the OpenTelemetry Operator sets them in a
    /// pod: OTEL_TRACES_SAMPLER `always_on` samples a client's unsampled trace too (the upstream
    /// sees the flag set), the traces go to OTEL_EXPORTER_OTLP_TRACES_ENDPOINT although the base
    /// endpoint is down, and OTEL_RESOURCE_ATTRIBUTES joins the resource.
    @Test func theSpecificationsVariablesChooseTheSamplerTheTracesURLAndTheResource() throws {
        let receiver = try OTLPReceiver()
        defer { receiver.stop() }
        let world = try TelemetryFixture(
            endpoint: "http://127.0.0.1:9",
            environment: [
                "OTEL_TRACES_SAMPLER": "always_on", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": receiver.endpoint + "/v1/traces",
                "OTEL_RESOURCE_ATTRIBUTES": "k8s.pod.name=tp-7f9c,k8s.namespace.name=payments",
            ])
        defer { try? world.stop() }
        let r = try curl(["-H", "traceparent: 00-\(Self.clientTrace)-\(Self.clientSpan)-00", world.url("/forced")])
        #expect(r.status == 200)
        #expect(echoedHeader(r, "traceparent")?.hasSuffix("-01") == true, "\(r.bodyString)")
        let spans = try receiver.spans { $0.contains { $0.attribute("url.path") as? String == "/forced" } }
        #expect(spans.contains { $0["trace_id"] as? String == Self.clientTrace && $0["kind"] as? String == "SPAN_KIND_SERVER" }, "\(spans)")
        let resource = try #require((try receiver.seen()["resources"] as? [[String: Any]])?.first)
        #expect(resource["k8s.pod.name"] as? String == "tp-7f9c")
        #expect(resource["k8s.namespace.name"] as? String == "payments")
        #expect(resource["service.name"] as? String == "tokenproxy")
    }

    @Test func withoutTelemetryAClientsTraceparentPassesUnchanged() throws {
        let world = try Fixture()
        defer { try? world.finish() }
        let value = "00-\(Self.clientTrace)-\(Self.clientSpan)-01"
        let r = try curl(["-H", "traceparent: \(value)", world.url("/x")])
        #expect(echoedHeader(r, "traceparent") == value)
    }

    @Test func aRefusedRequestsSpanCarriesTheErrorCode() throws {
        let world = try TelemetryFixture()
        defer { try? world.stop() }
        // An absolute-form target for another host: 403 forbidden_target, nothing goes upstream.
        let r = try curl(["--request-target", "http://elsewhere.example/x?token=query-secret-value", world.url("/")])
        #expect(r.status == 403)
        let spans = try world.receiver.spans { $0.contains { $0["kind"] as? String == "SPAN_KIND_SERVER" } }
        let server = try #require(spans.first { $0["kind"] as? String == "SPAN_KIND_SERVER" })
        let status = server["status"] as? [String: Any]
        #expect(status?["code"] as? String == "STATUS_CODE_ERROR")
        #expect(status?["message"] as? String == "forbidden_target")
        #expect(server.attribute("error.type") as? String == "forbidden_target")
        #expect(!spans.contains { $0["kind"] as? String == "SPAN_KIND_CLIENT" })
        try expectNoSecret(in: world.receiver, ["query-secret-value"])
    }

    @Test(arguments: [("slow", 5.0, 200), ("refusing", 0.0, 503)])
    func aSlowOrRefusingCollectorNeverFailsARequest(name: String, delay: Double, status: Int) throws {
        let world = try TelemetryFixture()
        defer { try? world.stop() }
        try world.receiver.mode(delay: delay, status: status)
        for i in 0..<200 {
            let r = try curl([world.url("/r\(i)")])
            try #require(r.status == 200, "request \(i) with a \(name) collector: \(r.status) \(r.stderr)")
        }
        if status != 200 {
            let deadline = Date().addingTimeInterval(30)
            while try world.dropped() <= 0 && Date() < deadline { Thread.sleep(forTimeInterval: 0.3) }
            #expect(try world.dropped() > 0, "a refused batch is counted as dropped")
            #expect(world.proxy.waitForStderr(containing: "telemetry: "), "the export warning")
        }
    }

    @Test func anAbsentCollectorNeverFailsARequestAndItsSpansAreCounted() throws {
        let world = try TelemetryFixture(endpoint: "http://127.0.0.1:9")
        defer { try? world.stop() }
        for i in 0..<200 {
            let r = try curl([world.url("/r\(i)")])
            try #require(r.status == 200, "request \(i): \(r.status) \(r.stderr)")
        }
        let deadline = Date().addingTimeInterval(30)
        while try world.dropped() < 401 && Date() < deadline { Thread.sleep(forTimeInterval: 0.3) }
        #expect(try world.dropped() == 401, "each request's two spans and the start's credential.refresh never reached a collector")
        let warnings = world.proxy.stderr.split(separator: "\n").filter { $0.contains("telemetry: ") && $0.contains("not exported") }
        #expect(warnings.count == 1, "one warning a minute: \(warnings)")
    }

    /// Batches a second apart go over one connection to the collector (kept open between exports,
    /// as an OTLP exporter keeps its HTTP client's), not one connection each.
    @Test func exportsShareOneConnectionToTheCollector() throws {
        let world = try TelemetryFixture()
        defer { try? world.stop() }
        for round in 1...3 {
            #expect(try curl([world.url("/c\(round)")]).status == 200)
            _ = try world.receiver.spans { spans in spans.filter { $0["kind"] as? String == "SPAN_KIND_SERVER" }.count >= round }
        }
        let seen = try world.receiver.seen()
        let peers = seen["peers"] as? [Int] ?? []
        #expect(peers.count >= 3, "three batches at least: \(seen["exports"] ?? "?") exports")
        #expect(Set(peers).count == 1, "one connection: client ports \(peers)")
    }

    @Test func theCollectorsHeadersGoWithEachExportAndNoLogShowsThem() throws {
        let secret = "otel-header-secret-\(UUID().uuidString.prefix(8))"
        let world = try TelemetryFixture(environment: ["OTEL_EXPORTER_OTLP_HEADERS": "x-api-key=\(secret),x-tenant=blue%20team"])
        defer { try? world.stop() }
        #expect(try curl([world.url("/h")]).status == 200)
        _ = try world.receiver.spans { !$0.isEmpty }
        let headers = try world.receiver.seen()["headers"] as? [[[String]]] ?? []
        let first = try #require(headers.first)
        #expect(first.contains { $0.first?.lowercased() == "x-api-key" && $0.last == secret })
        #expect(first.contains { $0.first?.lowercased() == "x-tenant" && $0.last == "blue team" })
        #expect(first.contains { $0.first?.lowercased() == "content-type" && $0.last == "application/x-protobuf" })
        #expect(!world.proxy.stderr.contains(secret))
        try expectNoSecret(in: world.receiver, [secret])
    }

    /// A reload that moves `telemetry.endpoint`: the requests after it are exported to the new
    /// collector, those before it went to the old one.
    @Test func aReloadMovesTheRequestsAfterItToTheNewEndpoint() throws {
        let world = try TelemetryFixture()
        defer { try? world.stop() }
        #expect(try curl([world.url("/before")]).status == 200)
        _ = try world.receiver.spans { $0.contains { $0.attribute("url.path") as? String == "/before" } }
        let second = try world.reloadToNewReceiver()
        #expect(try curl([world.url("/after")]).status == 200)
        let after = try second.spans { $0.contains { $0.attribute("url.path") as? String == "/after" } }
        #expect(after.contains { $0.attribute("url.path") as? String == "/after" })
        #expect(!after.contains { $0.attribute("url.path") as? String == "/before" })
        #expect(try world.receiver.spans().contains { $0.attribute("url.path") as? String == "/before" })
        #expect(!(try world.receiver.spans().contains { $0.attribute("url.path") as? String == "/after" }))
    }

    /// A request in flight across a reload that changes `telemetry` keeps the exporter it started
    /// under (CONTRACT.md: the reload applies to the requests that start after it): its spans reach
    /// the old collector or are counted as dropped, never the new collector; when the reload
    /// removed telemetry, they are counted too.
    @Test(arguments: ["moved", "removed"])
    func aRequestInFlightAcrossAReloadKeepsItsExporter(change: String) throws {
        let world = try TelemetryFixture()
        defer { try? world.stop() }
        let slow = BackgroundRequests(1) { _ in try curl([world.url("/slow-head?ms=3000")]).status }
        let reached = try within(60) { (try curl(["\(world.upstream.baseURL)/count?path=/base/slow-head"]).json?["count"] as? Int ?? 0) >= 1 }
        try #require(reached, "the slow request never reached the upstream")
        let second = change == "moved" ? try world.reloadToNewReceiver() : nil
        if second == nil { try world.reloadWithoutTelemetry() }
        #expect(try slow.wait().first?.get() == 200)
        let isSlow: ([String: Any]) -> Bool = { $0.attribute("url.path") as? String == "/slow-head" }
        let accounted = try within(30) { try world.receiver.spans().contains(where: isSlow) || world.dropped() >= 2 }
        #expect(accounted, "the request's spans reached the old collector or were counted as dropped")
        if let second {
            #expect(try curl([world.url("/after")]).status == 200)
            let after = try second.spans { $0.contains { $0.attribute("url.path") as? String == "/after" } }
            #expect(!after.contains(where: isSlow), "the request that started before the reload went to the new collector")
        }
    }

    /// An upstream nobody listens on: 502 bad_gateway on the SERVER span and on the CLIENT span of
    /// the attempt that got no answer, and the warning it logs is a log record too.
    @Test func anUnreachableUpstreamIsAFailedAttemptAndItsWarningALogRecord() throws {
        let receiver = try OTLPReceiver()
        defer { receiver.stop() }
        let proxy = try ProxyProcess(
            config: staticTokenConfig(upstream: "http://127.0.0.1:9", more: "telemetry: {endpoint: \(receiver.endpoint)}"),
            environment: ["E2E_TOKEN": e2eToken])
        defer { proxy.terminate() }
        let r = try curl([proxy.baseURL + "/down?secret=query-secret-value"])
        #expect(r.status == 502)
        let spans = try receiver.spans { $0.contains { $0["kind"] as? String == "SPAN_KIND_CLIENT" } }
        let server = try #require(spans.first { $0["kind"] as? String == "SPAN_KIND_SERVER" }, "\(spans)")
        let client = try #require(spans.first { $0["kind"] as? String == "SPAN_KIND_CLIENT" }, "\(spans)")
        for span in [server, client] {
            #expect((span["status"] as? [String: Any])?["message"] as? String == "bad_gateway")
            #expect(span.attribute("error.type") as? String == "bad_gateway")
        }
        let deadline = Date().addingTimeInterval(30)
        var logs: [[String: Any]] = []
        while logs.isEmpty && Date() < deadline {
            logs = (try receiver.seen()["logs"] as? [[String: Any]] ?? []).filter { ($0["body"] as? String)?.contains("upstream request failed") == true }
            Thread.sleep(forTimeInterval: 0.2)
        }
        let warning = try #require(logs.first, "the upstream warning as a log record")
        #expect(warning["severity_text"] as? String == "WARN")
        try expectNoSecret(in: receiver, ["query-secret-value", e2eToken])
    }

    /// A refused token (CONTRACT point 3): one refresh, one retry. The trace shows the two upstream
    /// attempts (401, then 200) as two CLIENT spans and the wait for the refresh as `token.wait`,
    /// which links to the `credential.refresh` span.
    @Test func aRetryAfter401IsTwoClientSpansAndATokenWait() throws {
        let world = try MintingTelemetryFixture(upstream: "refusing_upstream", more: "log: {level: debug, access_log: true}")
        defer { world.stop() }
        #expect(try curl([world.url("/first")]).status == 200)
        _ = try curl(["-X", "POST", world.upstream.baseURL + "/test/refuse?count=1&status=401"])
        #expect(try curl([world.url("/second")]).status == 200)
        let spans = try world.receiver.spans { spans in spans.contains { $0.attribute("url.path") as? String == "/second" } }
        let server = try #require(spans.first { $0.attribute("url.path") as? String == "/second" }, "\(spans)")
        #expect(server.attribute("tokenproxy.retried_401") as? Bool == true)
        let children = spans.filter { $0["parent_span_id"] as? String == server["span_id"] as? String }
        let attempts = children.filter { $0["kind"] as? String == "SPAN_KIND_CLIENT" }.sorted { ($0["start"] as? Int ?? 0) < ($1["start"] as? Int ?? 0) }
        #expect(attempts.map { $0.attribute("http.response.status_code") as? Int } == [401, 200])
        let wait = try #require(children.first { $0["name"] as? String == "token.wait" && $0["kind"] as? String == "SPAN_KIND_INTERNAL" })
        // The wait links to the refresh the 401 asked for: a span of its own trace.
        let link = try #require((wait["links"] as? [[String: Any]])?.first, "\(wait)")
        let refreshes = try world.receiver.spans { spans in spans.contains { $0["span_id"] as? String == link["span_id"] as? String } }
        let refresh = try #require(refreshes.first { $0["span_id"] as? String == link["span_id"] as? String }, "\(refreshes)")
        #expect(refresh["name"] as? String == "credential.refresh")
        #expect(refresh["trace_id"] as? String == link["trace_id"] as? String)
        #expect(refresh.attribute("tokenproxy.reason") as? String == "upstream_401")
        #expect(refresh.attribute("tokenproxy.outcome") as? String == "success")
        #expect(refresh.attribute("tokenproxy.credential") as? String == "oauth2_client_credentials")
        #expect(refresh.attribute("tokenproxy.route") as? String == "default")
        #expect(refreshes.contains { $0["name"] as? String == "credential.refresh" && $0.attribute("tokenproxy.reason") as? String == "start" })
        // Each attempt carried its own span's context upstream.
        let seen = try curl([world.upstream.baseURL + "/test/requests"]).json?["requests"] as? [[String: Any]] ?? []
        let sent = seen.suffix(2).map { request in
            (request["headers"] as? [[String]] ?? []).first { $0.first?.lowercased() == "traceparent" }?.last
        }
        #expect(sent == attempts.map { "00-\(server["trace_id"] as? String ?? "")-\($0["span_id"] as? String ?? "")-01" })
        // The tokens the upstream saw, and the client secret.
        let tokens = seen.compactMap { request in
            (request["headers"] as? [[String]] ?? []).first { $0.first?.lowercased() == "authorization" }?.last
        }
        #expect(tokens.count == 3)
        try expectNoSecret(in: world.receiver, [world.clientSecret] + tokens + tokens.map { String($0.dropFirst("Bearer ".count)) })
    }

    /// Every string of every decoded span, record and resource, searched for each secret.
    func expectNoSecret(in receiver: OTLPReceiver, _ secrets: [String], sourceLocation: SourceLocation = #_sourceLocation) throws {
        var seen = try receiver.seen()
        seen["headers"] = nil  // the collector's own headers are meant to reach it
        let text = String(decoding: try JSONSerialization.data(withJSONObject: seen), as: UTF8.self)
        for secret in secrets where !secret.isEmpty {
            #expect(!text.contains(secret), "a secret reached an exported attribute", sourceLocation: sourceLocation)
        }
    }
}
