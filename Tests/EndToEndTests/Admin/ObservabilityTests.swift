import Foundation
import TestSupport
import Testing

/// Issue 22: /metrics read by a real Prometheus parser, the histograms and pool series counting a
/// real request, and the access log's line for every request (docs/OBSERVABILITY.md).
@Suite(.tags(.endToEnd), .timeLimit(.minutes(35))) struct ObservabilityTests {
    /// A proxy with an admin listener and the access log in `format`, before an echo upstream.
    private static func start(format: String) throws -> (PythonServer, ProxyProcess) {
        let upstream = try PythonServer("echo_upstream")
        let proxy = try ProxyProcess(
            config: """
                listen: 127.0.0.1:0
                upstream: \(upstream.baseURL)/base
                workers: 2
                admin:
                  listen: 127.0.0.1:0
                credentials:
                  type: static
                  token_env: E2E_TOKEN
                log:
                  format: \(format)
                  access_log: true
                """,
            environment: ["E2E_TOKEN": e2eToken])
        return (upstream, proxy)
    }

    private static func stop(_ upstream: PythonServer, _ proxy: ProxyProcess) {
        proxy.terminate()
        _ = try? proxy.waitForExit()
        upstream.stop()
    }

    /// The value of the sample line that starts with `prefix` (name and labels), or nil.
    private static func sample(_ text: String, _ prefix: String) -> Double? {
        for line in text.split(separator: "\n") where line.hasPrefix(prefix + " ") {
            return Double(line.dropFirst(prefix.count + 1))
        }
        return nil
    }

    @Test func metricsPassAPrometheusParserAndTheHistogramsCountRequests() throws {
        let (upstream, proxy) = try Self.start(format: "json")
        defer { Self.stop(upstream, proxy) }
        let admin = try #require(proxy.adminURL)
        for _ in 0..<2 {
            let answer = try curl([proxy.baseURL + "/hello?q=1"])
            #expect(answer.status == 200, "\(answer.stderr)")
        }
        let metrics = try curl([admin + "/metrics"])
        #expect(metrics.status == 200)
        let text = metrics.bodyString

        let dir = try TempDir(prefix: "tokenproxy-metrics")
        let file = dir.url.appendingPathComponent("metrics.txt")
        try text.write(to: file, atomically: true, encoding: .utf8)
        let docs = RepositoryPaths.root.appendingPathComponent("docs/OBSERVABILITY.md").path
        let check = try runCommand(
            ProcessInfo.processInfo.environment["PYTHON"] ?? "python3",
            arguments: [
                RepositoryPaths.servers.appendingPathComponent("check_metrics.py").path, file.path, docs,
                "tokenproxy_request_duration_seconds", "tokenproxy_upstream_response_seconds", "tokenproxy_upstream_connect_seconds",
            ])
        #expect(check.status == 0, "\(check.output)")

        // Both requests counted once, whichever loop served them; one new connection at least.
        #expect(Self.sample(text, #"tokenproxy_request_duration_seconds_count{route="default",code_class="2xx"}"#) == 2, "\(text)")
        #expect(Self.sample(text, #"tokenproxy_upstream_response_seconds_count{route="default"}"#) == 2)
        let opened = try #require(Self.sample(text, #"tokenproxy_upstream_connections_opened_total{route="default"}"#))
        let reused = try #require(Self.sample(text, #"tokenproxy_upstream_connections_reused_total{route="default"}"#))
        #expect(opened >= 1 && opened + reused == 2, "opened \(opened) reused \(reused)")
        #expect(Self.sample(text, #"tokenproxy_upstream_connect_seconds_count{route="default",tls="false"}"#) == opened)
        #expect((Self.sample(text, #"tokenproxy_upstream_sent_bytes_total{route="default"}"#) ?? 0) > 0)
        #expect((Self.sample(text, #"tokenproxy_upstream_received_bytes_total{route="default"}"#) ?? 0) > 0)
    }

    @Test func theAccessLogLineCarriesTheTraceIdAndTheGenerationNeverTheToken() throws {
        let (upstream, proxy) = try Self.start(format: "json")
        defer { Self.stop(upstream, proxy) }
        let traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
        let answer = try curl([proxy.baseURL + "/items/7?secret=s3cr3t", "-H", "traceparent: 00-\(traceID)-00f067aa0ba902b7-01"])
        #expect(answer.status == 200)
        let denied = try curl([proxy.baseURL + "/x", "-H", "Host: elsewhere.example"])
        expectProxyError(denied, status: 403, code: "forbidden_host")
        let marker = "\"trace_id\":\"\(traceID)\""
        #expect(proxy.waitForStderr(containing: marker), "\(proxy.stderr)")
        let line = try #require(proxy.stderr.split(separator: "\n").first { $0.contains(marker) })
        let record = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
        #expect(record["access"] as? String == "request")
        #expect(record["route"] as? String == "default")
        #expect(record["method"] as? String == "GET")
        #expect(record["path"] as? String == "/items/7")
        #expect(record["status"] as? String == "200")
        #expect(record["upstream_status"] as? String == "200")
        #expect(record["token_generation"] as? String == "1")
        #expect(record["retried_401"] as? String == "false")
        #expect(record["duration_ms"] is String && record["upstream_ms"] is String && record["token_wait_ms"] is String)
        #expect(!proxy.stderr.contains("s3cr3t"), "a query reached the log")
        #expect(!proxy.stderr.contains(e2eToken), "the token reached the log")
        // A refused request names the contract's error code.
        #expect(proxy.waitForStderr(containing: #""error":"forbidden_host""#), "\(proxy.stderr)")
    }

    @Test func aClientGoneMidAnswerStillGetsItsLine() throws {
        let (upstream, proxy) = try Self.start(format: "text")
        defer { Self.stop(upstream, proxy) }
        let client = try RawHTTPClient(port: proxy.port)
        try client.send("GET /big?bytes=64000000 HTTP/1.1\r\nHost: \(proxy.address)\r\n\r\n")
        _ = try client.readBytes(64)
        client.close()
        #expect(proxy.waitForStderr(containing: "access=client_gone", timeout: 30), "\(proxy.stderr)")
        let line = try #require(proxy.stderr.split(separator: "\n").first { $0.contains("access=client_gone") })
        #expect(line.contains("path=/big") && line.contains("route=default") && line.contains("status=200"), "\(line)")
    }
}

/// Issue 22 point 2: the token life cycle as /metrics tells it, against a real OAuth 2.0 server.
@Suite(.tags(.endToEnd), .timeLimit(.minutes(35))) struct TokenLifecycleMetricsTests {
    @Test func aFailedFetchIsCountedByItsReasonAndEveryCallIsTimed() throws {
        let idp = try OAuthServer.start()
        defer { idp.stop() }
        // The first call to the token endpoint answers 503; the backoff's retry gets a token.
        try idp.control("/test/fail", query: ["status": "503", "count": "1"])
        let proxy = try ProxyProcess(
            config: """
                listen: 127.0.0.1:0
                upstream: http://127.0.0.1:9/base
                workers: 1
                admin:
                  listen: 127.0.0.1:0
                credentials:
                  type: oauth2_client_credentials
                  token_url: \(idp.tokenURL)
                  client_id: app
                  client_secret_env: OAUTH_SECRET
                """,
            environment: ["OAUTH_SECRET": "secret"])
        defer {
            proxy.terminate()
            _ = try? proxy.waitForExit()
        }
        let admin = try #require(proxy.adminURL)
        var text = ""
        let deadline = Date().addingTimeInterval(30)
        repeat {
            text = try curl([admin + "/metrics"]).bodyString
            if text.contains(#"tokenproxy_refreshes_total{source="oauth2_client_credentials",outcome="success"} 1"#) { break }
            Thread.sleep(forTimeInterval: 0.1)
        } while Date() < deadline
        #expect(text.contains(#"tokenproxy_token_fetch_failures_total{reason="http_5xx"} 1"#), "\(text)")
        #expect(text.contains(#"tokenproxy_token_fetch_failures_total{reason="network"} 0"#))
        #expect(text.contains("tokenproxy_token_refresh_seconds_count 2"), "\(text)")
        #expect(text.contains("tokenproxy_token_last_success_age_seconds "), "\(text)")

        let dir = try TempDir(prefix: "tokenproxy-metrics")
        let file = dir.url.appendingPathComponent("metrics.txt")
        try text.write(to: file, atomically: true, encoding: .utf8)
        let check = try runCommand(
            ProcessInfo.processInfo.environment["PYTHON"] ?? "python3",
            arguments: [
                RepositoryPaths.servers.appendingPathComponent("check_metrics.py").path, file.path,
                RepositoryPaths.root.appendingPathComponent("docs/OBSERVABILITY.md").path, "tokenproxy_token_refresh_seconds",
            ])
        #expect(check.status == 0, "\(check.output)")
    }
}
