import Foundation
import TestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// `limits.max_connections` (CONTRACT.md error table: 503 `overloaded`) and descriptor exhaustion
/// (issue 12 point 8): a client over the limit reads the 503, never a connection reset, and a proxy
/// out of descriptors says so once, then recovers.
@Suite(.tags(.endToEnd), .timeLimit(.minutes(35))) struct OverloadTests {
    /// A proxy that takes one connection; `holder` is that connection, kept open.
    private func fullProxy() throws -> (Fixture, RawHTTPClient) {
        let f = try Fixture(extra: "limits:\n  max_connections: 1")
        let holder = try f.connect()
        try holder.send(rawRequest("GET", "/holder", host: f.host))
        #expect(try holder.readResponse().status == 200)
        return (f, holder)
    }

    @Test func clientsOverTheLimitReadThe503AndACleanCloseNotAReset() throws {
        let (f, holder) = try fullProxy()
        // Many clients at once, each sending its request at once, as curl does: the request is
        // often already there, unread, when the proxy turns the connection away. Each reads until
        // the proxy closes: a clean end of file, never a reset (RFC 9112 §9.6).
        let outcomes = Locked<[String]>([])
        DispatchQueue.concurrentPerform(iterations: 8) { worker in
            for i in 0..<40 {
                let outcome = requestReadingUntilClose(port: f.proxy.port, request: rawRequest("GET", "/over/\(worker)/\(i)", host: f.host))
                outcomes.withLock { $0.append(outcome) }
            }
        }
        let all = outcomes.withLock { $0 }
        let bad = all.filter { $0 != "503 overloaded, then end of file" }
        #expect(bad.isEmpty, "\(bad.count) of \(all.count) clients: \(Set(bad).prefix(3))")
        holder.close()
        try f.finish()
    }

    @Test func aClientOverTheLimitStillSendingABodyReadsThe503() throws {
        let (f, holder) = try fullProxy()
        let client = try f.connect()
        // More than the kernel buffers between the two: the client is still sending when refused.
        let body = [UInt8](repeating: UInt8(ascii: "x"), count: 8 << 20)
        try client.send(rawRequest("POST", "/upload", host: f.host, body: body))
        let response = try client.readResponse()
        expectProxyError(response, status: 503, code: "overloaded")
        #expect(client.waitForClose(timeout: 5), "the refused connection stayed open")
        holder.close()
        try f.finish()
    }

    /// The tests run in parallel in one process: a child that another test starts while this test's
    /// client is open must not keep that client open after the test closes it (the proxy would
    /// count it until the child ends; `runningOutOfDescriptorsIsLoggedOnceThenRecovered` waited for
    /// such children in full runs).
    @Test func aClientClosedWhileAnotherTestsChildRunsIsClosedForTheProxy() throws {
        let (f, holder) = try fullProxy()
        let child = try ChildProcess("sleep", arguments: ["120"], environment: childEnvironment([:]))
        defer { child.stop(grace: 0) }
        holder.close()
        // The one place comes free once the proxy has seen the holder's end.
        var status = 0
        let deadline = Date().addingTimeInterval(30)
        while status != 200 && Date() < deadline {
            let client = try f.connect()
            try client.send(rawRequest("GET", "/after", host: f.host))
            status = try client.readResponse().status
            if status != 200 { usleep(50_000) }
        }
        #expect(status == 200, "the proxy still counts the closed client")
        try f.finish()
    }

    @Test func runningOutOfDescriptorsIsLoggedOnceThenRecovered() throws {
        let upstream = try PythonServer("echo_upstream")
        let dir = try TempDir()
        let configPath = dir.file("tokenproxy.yaml")
        // The shell lowers the descriptor limit, then becomes tokenproxy.
        let proxy = try ProxyProcess(
            config: staticTokenConfig(upstream: "\(upstream.baseURL)/base"),
            directory: dir,
            environment: ["E2E_TOKEN": e2eToken],
            arguments: ["-c", "ulimit -n 64 && exec \"$0\" serve --config \"$1\"", RepositoryPaths.tokenproxyBinary.path, configPath],
            binary: URL(fileURLWithPath: "/bin/sh"))
        // More connections than descriptors: the kernel completes them all, the proxy cannot take them all.
        var clients = try (0..<100).map { _ in try RawHTTPClient(port: proxy.port, timeout: 10) }
        #expect(proxy.waitForStderr(containing: "cannot accept on", timeout: 10), "\(proxy.stderr)")
        // Let the paused listener be retried several times while descriptors are still short.
        Thread.sleep(forTimeInterval: 1)
        clients.removeAll()
        let after = try curl([proxy.baseURL + "/after"], timeout: 20)
        #expect(after.status == 200, "no recovery: exit \(after.exitCode) \(after.stderr)")
        #expect(proxy.waitForStderr(containing: "accepting again", timeout: 10), "\(proxy.stderr)")
        let lines = proxy.stderr.split(separator: "\n")
        #expect(lines.filter { $0.contains("cannot accept on") }.count == 1, "\(proxy.stderr)")
        let recovery = try #require(lines.first { $0.contains("accepting again") })
        #expect(recovery.contains("Too many open files"), "\(recovery)")
        let count = recovery.split(separator: " ").drop { $0 != "after" }.dropFirst().first.flatMap { Int($0) }
        #expect((count ?? 0) >= 2, "the failed attempts were not counted: \(recovery)")
        proxy.terminate()
        #expect(try proxy.waitForExit() == 0, "\(proxy.stderr)")
    }
}

/// A value shared by the threads of `concurrentPerform`. `@unchecked Sendable`: every access to
/// `value` holds `lock`.
private final class Locked<Value>: @unchecked Sendable {
    private let lock = NSLock()
    private var value: Value
    init(_ value: Value) { self.value = value }
    func withLock<T>(_ body: (inout Value) -> T) -> T {
        lock.lock()
        defer { lock.unlock() }
        return body(&value)
    }
}

/// Connects to 127.0.0.1:`port`, sends `request`, reads until the server closes, and says what
/// came: `"<status> <error code>, then end of file"`, or what went wrong (a reset is named as such,
/// unlike `RawHTTPClient`, which counts it as a close).
private func requestReadingUntilClose(port: Int, request: [UInt8]) -> String {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
    guard fd >= 0 else { return "socket: errno \(errno)" }
    defer { close(fd) }
    var timeout = timeval(tv_sec: 10, tv_usec: 0)
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    address.sin_port = UInt16(port).bigEndian
    let connected = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
    }
    guard connected == 0 else { return "connect: \(String(cString: strerror(errno)))" }
    let sent = request.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
    guard sent == request.count else { return "send: \(String(cString: strerror(errno)))" }
    var received: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: 4096)
    while true {
        let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
        if n > 0 {
            received += chunk[0..<n]
            continue
        }
        let text = String(decoding: received, as: UTF8.self)
        if n < 0 { return "\(String(cString: strerror(errno))) after \(received.count) bytes" }
        let status = text.split(separator: " ", maxSplits: 2).dropFirst().first.map(String.init) ?? "none"
        let code = text.contains("\"error\":\"overloaded\"") ? "overloaded" : "other"
        return "\(status) \(code), then end of file"
    }
}
