import Foundation
import TestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// The listeners (CONTRACT.md "Signals, admin, logs"; issue 12 points 1 and 2): a unix socket
/// serves with any number of event loops, and whatever stops a listener from being bound or
/// watched stops `serve` with status 1 and a message naming the address, never `listening on`.
@Suite(.tags(.endToEnd), .timeLimit(.minutes(35))) struct ListenerTests {
    // MARK: unix sockets with several event loops

    /// The configuration of a proxy on `socketPath`; `workers` nil leaves the key out (the default:
    /// one loop per CPU).
    private func unixConfig(_ socketPath: String, upstream: PythonServer, workers: Int?) -> String {
        """
        listen: unix:\(socketPath)
        upstream: \(upstream.baseURL)/base
        \(workers.map { "workers: \($0)" } ?? "")
        credentials:
          type: static
          token_env: E2E_TOKEN
        """
    }

    /// Opens `count` connections at once (so that the kernel hands them to different loops), then
    /// sends one request on each, and checks every answer; then curl, as a user would.
    private func expectEveryConnectionServed(_ socketPath: String, count: Int) throws {
        let clients = try (0..<count).map { _ in try RawHTTPClient(unixPath: socketPath, timeout: 10) }
        for (i, client) in clients.enumerated() {
            try client.send(rawRequest("GET", "/over-unix/\(i)", host: "localhost"))
        }
        for (i, client) in clients.enumerated() {
            let response = try client.readResponse()
            #expect(response.status == 200, "connection \(i): \(response)")
            #expect(try Echo(response.body).path == "/base/over-unix/\(i)")
        }
        let r = try curl(["--unix-socket", socketPath, "http://localhost/with-curl"])
        #expect(r.status == 200, "curl: exit \(r.exitCode) \(r.stderr)")
        #expect(try Echo(r.body).values("Authorization") == ["Bearer \(e2eToken)"])
    }

    @Test func aUnixSocketServesWithTheDefaultWorkers() throws {
        let upstream = try PythonServer("echo_upstream")
        let dir = try TempDir()
        let socketPath = dir.file("proxy.sock")
        let proxy = try ProxyProcess(config: unixConfig(socketPath, upstream: upstream, workers: nil), directory: dir, environment: ["E2E_TOKEN": e2eToken])
        #expect(proxy.address == "unix:\(socketPath)")
        try expectEveryConnectionServed(socketPath, count: 8)
        #expect(!proxy.stderr.contains("cannot watch"), "\(proxy.stderr)")
        try proxy.stopAndExpectCleanExit()
        #expect(!FileManager.default.fileExists(atPath: socketPath), "the socket file outlived the proxy")
    }

    @Test func aUnixSocketServesWithFourWorkers() throws {
        let upstream = try PythonServer("echo_upstream")
        let dir = try TempDir()
        let socketPath = dir.file("proxy.sock")
        let proxy = try ProxyProcess(config: unixConfig(socketPath, upstream: upstream, workers: 4), directory: dir, environment: ["E2E_TOKEN": e2eToken])
        #expect(proxy.stderr.contains("4 event loop(s)"), "\(proxy.stderr)")
        try expectEveryConnectionServed(socketPath, count: 16)
        try proxy.stopAndExpectCleanExit()
    }

    @Test func aSecondProxyOnALiveUnixSocketFailsAndLeavesTheFirstServing() throws {
        let upstream = try PythonServer("echo_upstream")
        let dir = try TempDir()
        let socketPath = dir.file("proxy.sock")
        let first = try ProxyProcess(config: unixConfig(socketPath, upstream: upstream, workers: 2), directory: dir, environment: ["E2E_TOKEN": e2eToken])
        let config = try dir.write("second.yaml", unixConfig(socketPath, upstream: upstream, workers: 2))
        let second = try ProxyProcess.run(args: ["serve", "--config", config], env: ["E2E_TOKEN": e2eToken], timeout: 30)
        expectListenerFailure(second, naming: "unix:\(socketPath)")
        let r = try curl(["--unix-socket", socketPath, "http://localhost/still-first"])
        #expect(r.status == 200, "the first proxy lost its socket: exit \(r.exitCode) \(r.stderr)")
        first.terminate()
        #expect(try first.waitForExit() == 0)
    }

    // MARK: listeners that cannot be bound

    /// Exit status 1, the address named, and no `listening on` line.
    private func expectListenerFailure(_ result: CommandResult, naming address: String, sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(result.status == 1, "exit status: \(result.output)", sourceLocation: sourceLocation)
        #expect(result.stderr.contains("cannot listen on"), "\(result.stderr)", sourceLocation: sourceLocation)
        #expect(result.stderr.contains(address), "the message does not name \(address): \(result.stderr)", sourceLocation: sourceLocation)
        #expect(!result.stderr.contains("listening on"), "a failed listener was logged as listening: \(result.stderr)", sourceLocation: sourceLocation)
    }

    /// Runs `serve` on `listen` (and `extra` YAML) and returns how it ended.
    private func serve(listen: String, extra: String = "", workers: Int = 2) throws -> CommandResult {
        let dir = try TempDir()
        let config = try dir.write(
            "tokenproxy.yaml",
            """
            listen: \(listen)
            upstream: http://127.0.0.1:9/base
            workers: \(workers)
            credentials:
              type: static
              token_env: E2E_TOKEN
            \(extra)
            """)
        return try ProxyProcess.run(args: ["serve", "--config", config], env: ["E2E_TOKEN": e2eToken], timeout: 30)
    }

    @Test func aPortAnotherProgramListensOnStopsServeWithStatus1() throws {
        let occupier = try LocalListener()
        let result = try serve(listen: "127.0.0.1:\(occupier.port)")
        expectListenerFailure(result, naming: "127.0.0.1:\(occupier.port)")
    }

    @Test func aPortAnotherProxyListensOnStopsServeWithStatus1() throws {
        // Both would set SO_REUSEPORT: without a check, the second would silently share the port.
        let f = try Fixture()
        let result = try serve(listen: "127.0.0.1:\(f.proxy.port)")
        expectListenerFailure(result, naming: "127.0.0.1:\(f.proxy.port)")
        #expect(try curl([f.url("/first-still-serves")]).status == 200)
        try f.finish()
    }

    @Test func anAdminPortInUseStopsServeAndLeavesNoSocketFile() throws {
        let occupier = try LocalListener()
        let dir = try TempDir()
        let socketPath = dir.file("proxy.sock")
        let result = try serve(listen: "unix:\(socketPath)", extra: "admin:\n  listen: 127.0.0.1:\(occupier.port)")
        expectListenerFailure(result, naming: "127.0.0.1:\(occupier.port)")
        #expect(result.stderr.contains("admin"), "\(result.stderr)")
        #expect(!FileManager.default.fileExists(atPath: socketPath), "the proxy's socket file was left behind")
    }

    @Test func aUnixPathInAFolderThatDoesNotExistStopsServeWithStatus1() throws {
        let dir = try TempDir()
        let socketPath = dir.file("no-such-folder/proxy.sock")
        expectListenerFailure(try serve(listen: "unix:\(socketPath)"), naming: "unix:\(socketPath)")
    }

    @Test func aUnixPathUnderAPlainFileStopsServeWithStatus1() throws {
        let dir = try TempDir()
        let file = try dir.write("plain-file", "x")
        expectListenerFailure(try serve(listen: "unix:\(file)/proxy.sock"), naming: "unix:\(file)/proxy.sock")
    }

    @Test(.enabled(if: geteuid() != 0, "root may create files in a read-only folder"))
    func aUnixPathInAFolderThatIsNotWritableStopsServeWithStatus1() throws {
        let dir = try TempDir()
        let folder = dir.file("read-only")
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o555])
        defer { try? FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: folder) }
        expectListenerFailure(try serve(listen: "unix:\(folder)/proxy.sock"), naming: "unix:\(folder)/proxy.sock")
    }

    @Test func aUnixPathWhereAnotherKindOfFileSitsStopsServeAndKeepsTheFile() throws {
        let dir = try TempDir()
        let file = try dir.write("not-a-socket", "precious")
        expectListenerFailure(try serve(listen: "unix:\(file)"), naming: "unix:\(file)")
        #expect(try String(contentsOfFile: file, encoding: .utf8) == "precious")
    }
}

/// A plain TCP listener on 127.0.0.1 (a port the OS picks), standing for another program.
final class LocalListener {
    let fd: Int32
    let port: Int

    init() throws {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw HarnessError("socket: errno \(errno)") }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0 }
        }
        guard bound, listen(fd, 16) == 0 else {
            Glibc.close(fd)
            throw HarnessError("cannot listen on 127.0.0.1: errno \(errno)")
        }
        self.fd = fd
        port = Int(UInt16(bigEndian: address.sin_port))
    }

    deinit { Glibc.close(fd) }
}
