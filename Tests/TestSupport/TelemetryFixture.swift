import Foundation
import Synchronization
import Testing

/// An OTLP/HTTP receiver (Tests/servers/otlp_receiver.py: it decodes with opentelemetry-proto, the
/// official definitions) and, with `TelemetryFixture`, a tokenproxy that exports to it.
public final class OTLPReceiver: Sendable {
    public let server: PythonServer

    public init() throws { server = try PythonServer("otlp_receiver") }

    /// The `telemetry.endpoint` that reaches it.
    public var endpoint: String { server.baseURL }

    /// Everything received so far: `spans`, `logs`, `resources`, `headers`, `exports`, `refused`, `peers`.
    public func seen() throws -> [String: Any] {
        let r = try curl([server.baseURL + "/test/seen"])
        return try #require(r.json, "otlp_receiver answered \(r.status): \(r.bodyString)")
    }

    public func spans() throws -> [[String: Any]] { try seen()["spans"] as? [[String: Any]] ?? [] }

    public func logs() throws -> [[String: Any]] { try seen()["logs"] as? [[String: Any]] ?? [] }

    /// The log records once `done` holds for them, or the last ones seen after `timeout`.
    public func logs(timeout: TimeInterval = 30, until done: ([[String: Any]]) -> Bool) throws -> [[String: Any]] {
        let deadline = Date().addingTimeInterval(timeout)
        var logs = try logs()
        while !done(logs) && Date() < deadline {
            Thread.sleep(forTimeInterval: 0.2)
            logs = try self.logs()
        }
        return logs
    }

    /// The spans once `done` holds for them, or the last ones seen after `timeout` (a batch goes
    /// within a second of a request's end).
    public func spans(timeout: TimeInterval = 30, until done: ([[String: Any]]) -> Bool) throws -> [[String: Any]] {
        let deadline = Date().addingTimeInterval(timeout)
        var spans = try spans()
        while !done(spans) && Date() < deadline {
            Thread.sleep(forTimeInterval: 0.2)
            spans = try self.spans()
        }
        return spans
    }

    /// Each export from now waits `delay` seconds, then is answered `status` (200: kept).
    public func mode(delay: Double = 0, status: Int = 200) throws {
        let r = try curl(["-X", "POST", server.baseURL + "/test/mode?delay=\(delay)&status=\(status)"])
        try #require(r.status == 200)
    }

    public func stop() { server.stop() }
}

extension Dictionary where Key == String, Value == Any {
    /// A decoded span's attribute (or a resource's).
    public func attribute(_ key: String) -> Any? { (self["attributes"] as? [String: Any])?[key] }
}

/// The echo upstream, an OTLP receiver and a tokenproxy with `telemetry:` pointing at it (the
/// static token `e2eToken`, an admin listener for /metrics).
public final class TelemetryFixture: UpstreamFixture, Sendable {
    public let upstream: PythonServer
    public let receiver: OTLPReceiver
    public let proxy: ProxyProcess
    /// The receivers `reloadToNewReceiver` made, stopped by `stop()` after the proxy's exit.
    private let movedTo = Mutex<[OTLPReceiver]>([])

    /// `telemetry`: the section's lines after `endpoint` (indented by the caller's YAML flow or
    /// here); `endpoint`: replaces the receiver's (an address nobody listens on); `top`: more
    /// top-level lines (`audit: …`).
    public init(telemetry: String = "", endpoint: String? = nil, environment: [String: String] = [:], top: String = "") throws {
        upstream = try PythonServer("echo_upstream")
        receiver = try OTLPReceiver()
        let section =
            "telemetry:\n  endpoint: \(endpoint ?? receiver.endpoint)\n" + telemetry.split(separator: "\n").map { "  " + $0 }.joined(separator: "\n")
            + (top.isEmpty ? "" : "\n" + top)
        var env = environment
        env["E2E_TOKEN"] = e2eToken
        proxy = try ProxyProcess(
            config: staticTokenConfig(upstream: upstream.baseURL + "/base", drainTimeout: "2s", admin: true, logLevel: "debug", more: section),
            environment: env)
    }

    /// The value of `tokenproxy_telemetry_dropped_total{signal="…"}` on /metrics.
    public func dropped(_ signal: String = "traces") throws -> Int {
        let metrics = try curl([proxy.adminURL! + "/metrics"]).bodyString
        let prefix = "tokenproxy_telemetry_dropped_total{signal=\"\(signal)\"} "
        let line = metrics.split(separator: "\n").first { $0.hasPrefix(prefix) }
        return line.flatMap { Int($0.dropFirst(prefix.count)) } ?? -1
    }

    /// A second receiver, and a reload (SIGUSR2) that moves `telemetry.endpoint` to it.
    public func reloadToNewReceiver(sourceLocation: SourceLocation = #_sourceLocation) throws -> OTLPReceiver {
        let second = try OTLPReceiver()
        movedTo.withLock { $0.append(second) }
        let config = try String(contentsOfFile: proxy.configPath, encoding: .utf8)
        try config.replacingOccurrences(of: receiver.endpoint, with: second.endpoint).write(
            toFile: proxy.configPath, atomically: true, encoding: .utf8)
        proxy.terminate(signal: SIGUSR2)
        #expect(proxy.waitForStderr(containing: "configuration reloaded", timeout: 30), sourceLocation: sourceLocation)
        return second
    }

    /// A reload (SIGUSR2) of the configuration without its `telemetry` section.
    public func reloadWithoutTelemetry(sourceLocation: SourceLocation = #_sourceLocation) throws {
        let config = try String(contentsOfFile: proxy.configPath, encoding: .utf8)
        var kept: [Substring] = []
        var inSection = false
        for line in config.split(separator: "\n", omittingEmptySubsequences: false) {
            if line.hasPrefix("telemetry:") {
                inSection = true
            } else if inSection && line.hasPrefix(" ") {
                continue
            } else {
                inSection = false
                kept.append(line)
            }
        }
        try kept.joined(separator: "\n").write(toFile: proxy.configPath, atomically: true, encoding: .utf8)
        proxy.terminate(signal: SIGUSR2)
        #expect(proxy.waitForStderr(containing: "configuration reloaded", timeout: 30), sourceLocation: sourceLocation)
    }

    public func stop() throws {
        try finish()
        receiver.stop()
        for moved in movedTo.withLock({ $0 }) { moved.stop() }
    }
}

/// An `oauth2_client_credentials` route (client `app`, a fresh client secret in the environment)
/// in front of `upstream`, a Tests/servers script, exporting to an OTLP receiver of its own.
public final class MintingTelemetryFixture: UpstreamFixture, Sendable {
    public let clientSecret = "client-secret-\(UUID().uuidString.prefix(8))"
    public let idp: OAuthServer
    public let upstream: PythonServer
    public let receiver: OTLPReceiver
    public let proxy: ProxyProcess

    /// `more`: more top-level lines.
    public init(upstream script: String, more: String) throws {
        var options = OAuthServer.Options()
        options.clients = [OAuthServer.Client(id: "app", secret: clientSecret)]
        idp = try OAuthServer.start(options)
        upstream = try PythonServer(script)
        receiver = try OTLPReceiver()
        proxy = try ProxyProcess(
            config: proxyConfig(
                upstream: upstream.baseURL,
                credentials: "type: oauth2_client_credentials\ntoken_url: \(idp.tokenURL)\nclient_id: app\nclient_secret_env: TELEMETRY_CLIENT_SECRET",
                more: "telemetry: {endpoint: \(receiver.endpoint)}\n\(more)"),
            environment: ["TELEMETRY_CLIENT_SECRET": clientSecret])
    }

    public func stop() {
        proxy.terminate()
        receiver.stop()
        upstream.stop()
    }
}
