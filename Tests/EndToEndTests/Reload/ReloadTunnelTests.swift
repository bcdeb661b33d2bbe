import Foundation
import TestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// CONTRACT.md "Reload without a restart", issue 20 point 6: open tunnels finish across a reload.
/// A WebSocket tunnel is opened through a path route on the shared listener and another through a
/// route's own listener (the server is `ws_echo.py`, the client a raw socket speaking RFC 6455
/// frames, as in UpgradeTests); then the file is reloaded. Frames keep flowing both ways through
/// both tunnels until the client closes them, and a request sent after the reload follows the new file.
@Suite("Reload with open tunnels, end to end", .tags(.endToEnd), .timeLimit(.minutes(35)))
struct ReloadTunnelTests {
    let frames = UpgradeTests()

    /// The route `plain` (path prefix /plain/) always; `ws` (path prefix /ws/) and `own` (its own
    /// listener) when `withTunnelRoutes`. `version` goes into plain's upstream path, so that an
    /// answer tells which file served it.
    static func file(_ server: PythonServer, version: String, withTunnelRoutes: Bool) -> String {
        var lines = [
            "listen: 127.0.0.1:0",
            "workers: 2",
            "drain_timeout: 2s",
            "admin:",
            "  listen: 127.0.0.1:0",
            "routes:",
            "  - {name: plain, match: {path_prefix: /plain/}, upstream: \"\(server.baseURL)/\(version)\", credentials: {type: static, token_env: T_TOKEN}}",
        ]
        if withTunnelRoutes {
            lines += [
                "  - {name: ws, match: {path_prefix: /ws/}, upstream: \"\(server.baseURL)/ws\", credentials: {type: static, token_env: T_TOKEN}}",
                "  - {name: own, match: {listen: 127.0.0.1:0}, upstream: \"\(server.baseURL)/own\", credentials: {type: static, token_env: T_TOKEN}}",
            ]
        }
        return lines.joined(separator: "\n") + "\n"
    }

    /// An upgraded connection to `port`, with one text frame echoed.
    func openTunnel(port: Int, path: String) throws -> RawHTTPClient {
        let client = try RawHTTPClient(port: port, timeout: 30)
        try client.send(frames.upgradeRequest(path, host: "127.0.0.1:\(port)"))
        let switching = try client.readResponse()
        try #require(switching.status == 101, "\(switching)")
        try echo(client, "before the reload")
        return client
    }

    func echo(_ client: RawHTTPClient, _ text: String, sourceLocation: SourceLocation = #_sourceLocation) throws {
        let payload = Array(text.utf8)
        try client.send(frames.clientFrame(opcode: 0x1, payload))
        let answer = try frames.serverFrame(client)
        #expect(answer.opcode == 0x1, sourceLocation: sourceLocation)
        #expect(answer.payload == payload, sourceLocation: sourceLocation)
    }

    /// The client's close handshake (code 1000): the server's close frame comes back and the proxy
    /// closes the connection.
    func closeTunnel(_ client: RawHTTPClient, sourceLocation: SourceLocation = #_sourceLocation) throws {
        try client.send(frames.clientFrame(opcode: 0x8, [0x03, 0xE8]))
        let close = try frames.serverFrame(client)
        #expect(close.opcode == 0x8, sourceLocation: sourceLocation)
        #expect(client.waitForClose(timeout: 10), "the tunnel stayed open after the close handshake", sourceLocation: sourceLocation)
        client.close()
    }

    func plainBody(_ proxy: ProxyProcess, _ path: String) throws -> (status: Int, body: String) {
        let response = try send(proxy, "GET", path)
        return (response.status, response.bodyString)
    }

    /// Starts ws_echo and the proxy with the tunnel routes; opens one tunnel through `ws` and one
    /// through `own`'s listener.
    func start() throws -> (server: PythonServer, proxy: ProxyProcess, ownPort: Int, viaPath: RawHTTPClient, viaOwn: RawHTTPClient) {
        let server = try PythonServer("ws_echo")
        let proxy = try ProxyProcess(
            config: Self.file(server, version: "v1", withTunnelRoutes: true), environment: ["T_TOKEN": "tunnel-reload-token"])
        let line = try #require(proxy.stderr.split(separator: "\n").first { $0.contains("route own listening on ") })
        let ownPort = ProxyProcess.port(of: String(line.split(separator: " ").last!))
        #expect(try plainBody(proxy, "/plain/x") == (200, "plain /v1/x\n"))
        let viaPath = try openTunnel(port: proxy.port, path: "/ws/chat")
        let viaOwn = try openTunnel(port: ownPort, path: "/chat")
        return (server, proxy, ownPort, viaPath, viaOwn)
    }

    func finish(_ server: PythonServer, _ proxy: ProxyProcess) throws {
        let stats = try #require(try curl([server.baseURL + "/_stats"]).json)
        let authorizations = stats["authorizations"] as? [String] ?? []
        #expect(!authorizations.isEmpty && authorizations.allSatisfy { $0 == "Bearer tunnel-reload-token" }, "\(stats)")
        try proxy.stopAndExpectCleanExit()
        #expect(!proxy.stderr.contains("tunnel-reload-token"))
        server.stop()
    }

    @Test(
        "a reload (POST /reload) that keeps the tunnels' routes: both tunnels keep carrying frames until the client closes them; new requests follow the new file"
    )
    func tunnelsSurviveAReloadThatKeepsTheirRoutes() throws {
        let (server, proxy, ownPort, viaPath, viaOwn) = try start()
        _ = try proxy.directory.write("tokenproxy.yaml", Self.file(server, version: "v2", withTunnelRoutes: true))
        let reload = try curl(["-sS", "-X", "POST", proxy.adminURL! + "/reload"])
        #expect(reload.status == 200, "\(reload.bodyString)")
        // A request sent after the 200 follows the new file.
        #expect(try plainBody(proxy, "/plain/x") == (200, "plain /v2/x\n"))
        for round in 0..<3 {
            try echo(viaPath, "after the reload, path route, \(round)")
            try echo(viaOwn, "after the reload, own listener, \(round)")
        }
        // The kept routes take new tunnels too, and the kept listener still accepts.
        let again = try openTunnel(port: ownPort, path: "/chat")
        try closeTunnel(again)
        let againViaPath = try openTunnel(port: proxy.port, path: "/ws/chat")
        try closeTunnel(againViaPath)
        try echo(viaPath, "still open")
        try closeTunnel(viaPath)
        try closeTunnel(viaOwn)
        try finish(server, proxy)
    }

    @Test(
        "a reload (SIGUSR2) that removes the tunnels' route and listener: both tunnels keep carrying frames until the client closes them; new requests follow the new file"
    )
    func tunnelsSurviveAReloadThatRemovesTheirRoutes() throws {
        let (server, proxy, ownPort, viaPath, viaOwn) = try start()
        _ = try proxy.directory.write("tokenproxy.yaml", Self.file(server, version: "v2", withTunnelRoutes: false))
        proxy.terminate(signal: SIGUSR2)
        #expect(within(20) { (try? plainBody(proxy, "/plain/x").body) == "plain /v2/x\n" }, "the new file is in effect")
        // The removed path route matches nothing now; the removed listener is closed.
        #expect(try plainBody(proxy, "/ws/plain").status == 404)
        #expect(within(20) { (try? RawHTTPClient(port: ownPort, timeout: 2)) == nil }, "the removed listener is closed")
        for round in 0..<3 {
            try echo(viaPath, "after the reload, removed path route, \(round)")
            try echo(viaOwn, "after the reload, removed listener, \(round)")
        }
        // An upgrade sent now follows the new file: no route.
        let refused = try RawHTTPClient(port: proxy.port, timeout: 30)
        try refused.send(frames.upgradeRequest("/ws/chat", host: proxy.address))
        #expect(try refused.readResponse().status == 404)
        refused.close()
        try echo(viaOwn, "still open")
        try closeTunnel(viaPath)
        try closeTunnel(viaOwn)
        try finish(server, proxy)
    }
}
