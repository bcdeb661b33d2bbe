import Foundation
import TestSupport
import Testing

/// `Upgrade` requests (issue 11 point 5; CONTRACT.md point 1): forwarded with the token, a 101
/// turns both connections into a tunnel, any other answer ends the attempt normally. The server
/// is `ws_echo.py` (the `websockets` package), the client `ws_client.py` (the same package) or a
/// raw socket speaking RFC 6455 frames.
@Suite(.tags(.endToEnd), .timeLimit(.minutes(35))) struct UpgradeTests {
    final class WSFixture: @unchecked Sendable {
        let server: PythonServer
        let proxy: ProxyProcess

        /// `limits`: lines for the config's `limits:` section.
        init(limits: String = "") throws {
            server = try PythonServer("ws_echo")
            proxy = try ProxyProcess(
                config: staticTokenConfig(
                    upstream: "\(server.baseURL)/ws", drainTimeout: "2s", logLevel: "debug",
                    more: limits.isEmpty ? "" : "limits:\n" + limits),
                environment: ["E2E_TOKEN": e2eToken])
        }

        var host: String { proxy.address }

        func stats() throws -> [String: Any] {
            try #require(try curl([server.baseURL + "/_stats"]).json)
        }

        func finish(sourceLocation: SourceLocation = #_sourceLocation) throws {
            proxy.terminate(signal: SIGTERM)
            #expect(try proxy.waitForExit(timeout: 15) == 0, sourceLocation: sourceLocation)
            #expect(!proxy.stderr.contains(e2eToken), "the token appeared in tokenproxy's stderr", sourceLocation: sourceLocation)
            server.stop()
        }
    }

    /// RFC 6455 §1.3's example key and the accept value it must produce.
    static let key = "dGhlIHNhbXBsZSBub25jZQ=="
    static let accept = "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="

    func upgradeRequest(_ path: String, host: String) -> [UInt8] {
        rawRequest(
            "GET", path, host: host,
            headers: [
                ("Connection", "Upgrade"), ("Upgrade", "websocket"), ("Sec-WebSocket-Version", "13"), ("Sec-WebSocket-Key", Self.key),
            ])
    }

    /// A masked client frame (payload under 126 bytes).
    func clientFrame(opcode: UInt8, _ payload: [UInt8]) -> [UInt8] {
        precondition(payload.count < 126)
        let mask: [UInt8] = [0x37, 0xFA, 0x21, 0x3D]
        return [0x80 | opcode, 0x80 | UInt8(payload.count)] + mask + payload.enumerated().map { $0.element ^ mask[$0.offset % 4] }
    }

    /// Reads one unmasked server frame (payload under 126 bytes): its opcode and payload.
    func serverFrame(_ client: RawHTTPClient) throws -> (opcode: UInt8, payload: [UInt8]) {
        let head = try client.readBytes(2)
        #expect(head[1] & 0x80 == 0, "a server frame must not be masked")
        let length = Int(head[1] & 0x7F)
        try #require(length < 126, "unexpected long frame")
        return (head[0] & 0x0F, try client.readBytes(length))
    }

    @Test func websocketEchoesThroughTheTunnelWithTheToken() throws {
        let f = try WSFixture()
        let urls = ["ws://\(f.host)/chat?first", "ws://\(f.host)/chat?second"]
        let run = try runCommand(
            "python3", arguments: [RepositoryPaths.servers.appendingPathComponent("ws_client.py").path] + urls,
            environment: childEnvironment(["PYTHONDONTWRITEBYTECODE": "1"]), timeout: 150)
        let result = try #require(try JSONSerialization.jsonObject(with: Data(run.stdout.utf8)) as? [String: Any], "\(run.output)")
        #expect(result["ok"] as? Bool == true, "\(result)")
        let connections = result["connections"] as? [[String: Any]] ?? []
        #expect(connections.count == 2, "\(result)")
        for connection in connections {
            #expect(connection["echoed"] as? Int == 3)
            #expect(connection["close_code"] as? Int == 1000)
        }
        let stats = try f.stats()
        #expect(stats["upgrades"] as? Int == 2)
        #expect(stats["authorizations"] as? [String] == ["Bearer \(e2eToken)", "Bearer \(e2eToken)"], "\(stats)")
        // Each tunnel has its access-log line when it closes, besides the 101's (issue 22 point 4).
        func lines(_ marks: String...) -> Int {
            f.proxy.stderr.split(separator: "\n").filter { line in marks.allSatisfy { line.contains($0) } }.count
        }
        let deadline = Date().addingTimeInterval(10)
        while lines("access=tunnel_closed") < 2 && Date() < deadline { Thread.sleep(forTimeInterval: 0.05) }
        #expect(lines("access=tunnel_closed", "route=default", "status=101") == 2, "\(f.proxy.stderr)")
        #expect(lines("access=request", "status=101") == 2, "\(f.proxy.stderr)")
        try f.finish()
    }

    @Test func upgradeAnsweredWith403EndsNormallyAndTheConnectionGoesOn() throws {
        let f = try WSFixture()
        let client = try RawHTTPClient(port: f.proxy.port)
        try client.send(upgradeRequest("/forbidden", host: f.host))
        let refused = try client.readResponse()
        #expect(refused.status == 403, "\(refused)")
        #expect(refused.bodyString == "forbidden\n")
        // A plain request on the same client connection.
        try client.send(rawRequest("GET", "/plain", host: f.host))
        let plain = try client.readResponse()
        #expect(plain.status == 200, "\(plain)")
        #expect(plain.bodyString == "plain /ws/plain\n")
        let stats = try f.stats()
        #expect(stats["authorizations"] as? [String] == ["Bearer \(e2eToken)", "Bearer \(e2eToken)"], "\(stats)")
        #expect(stats["upgrades"] as? Int == 0)
        try f.finish()
    }

    @Test func upgradeOnAConnectionThatCarriedAPlainRequest() throws {
        let f = try WSFixture()
        let client = try RawHTTPClient(port: f.proxy.port)
        try client.send(rawRequest("GET", "/plain", host: f.host))
        #expect(try client.readResponse().bodyString == "plain /ws/plain\n")
        try client.send(upgradeRequest("/chat", host: f.host))
        let switching = try client.readResponse()
        #expect(switching.status == 101, "\(switching)")
        #expect(switching.header("Sec-WebSocket-Accept") == Self.accept)
        #expect(switching.header("Upgrade")?.lowercased() == "websocket")
        // A text frame each way, then the close handshake (code 1000).
        let text = Array("after a plain request".utf8)
        try client.send(clientFrame(opcode: 0x1, text))
        let echo = try serverFrame(client)
        #expect(echo.opcode == 0x1)
        #expect(echo.payload == text)
        try client.send(clientFrame(opcode: 0x8, [0x03, 0xE8]))
        let close = try serverFrame(client)
        #expect(close.opcode == 0x8)
        #expect(Array(close.payload.prefix(2)) == [0x03, 0xE8])
        #expect(client.waitForClose(timeout: 10), "the tunnel stayed open after the close handshake")
        let stats = try f.stats()
        #expect(stats["upgrades"] as? Int == 1)
        #expect((stats["authorizations"] as? [String])?.last == "Bearer \(e2eToken)")
        // The proxy keeps serving.
        let again = try RawHTTPClient(port: f.proxy.port)
        try again.send(rawRequest("GET", "/plain", host: f.host))
        #expect(try again.readResponse().status == 200)
        try f.finish()
    }

    /// `client_idle_timeout` with no byte either way closes a tunnel (docs/ENGINE.md, "Upgrade and
    /// WebSocket"). The websockets server pings every 20 s, far beyond the 1 s timeout here.
    @Test func aTunnelSilentBothWaysIsClosedAfterTheIdleTimeout() throws {
        let f = try WSFixture(limits: "  client_idle_timeout: 1s")
        let client = try RawHTTPClient(port: f.proxy.port)
        try client.send(upgradeRequest("/chat", host: f.host))
        #expect(try client.readResponse().status == 101)
        let text = Array("one frame, then silence".utf8)
        try client.send(clientFrame(opcode: 0x1, text))
        #expect(try serverFrame(client).payload == text)
        let silentSince = Date()
        #expect(client.waitForClose(timeout: 20), "the tunnel stayed open with nothing going either way")
        #expect(Date().timeIntervalSince(silentSince) >= 0.9, "closed before the idle timeout")
        try f.finish()
    }
}
