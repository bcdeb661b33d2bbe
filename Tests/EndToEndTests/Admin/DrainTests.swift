import Foundation
import TestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// CONTRACT.md "Signals, admin, logs": SIGTERM stops accepting at once (issue 12 point 7: a client
/// that connects during the drain is refused, not left waiting until the process exits), while the
/// request in flight still gets its answer.
@Suite(.tags(.endToEnd), .timeLimit(.minutes(35))) struct DrainTests {
    /// How a client that connects during the drain fares within `within` seconds.
    private enum LateClient: Equatable {
        case refused
        case answered(status: Int)
        case closed
        case hung
    }

    private func connectDuringDrain(_ connect: () throws -> RawHTTPClient, host: String, within: TimeInterval) -> LateClient {
        let client: RawHTTPClient
        do {
            client = try connect()
        } catch {
            return .refused
        }
        do {
            try client.send(rawRequest("GET", "/late", host: host))
        } catch {
            return .closed
        }
        if let response = try? client.readResponse(timeout: within) { return .answered(status: response.status) }
        return client.waitForClose(timeout: 0.1) ? .closed : .hung
    }

    /// Starts a proxy with a long drain, puts one slow request in flight, sends SIGTERM, and hands
    /// the proxy and the in-flight client to `during`; then checks that the in-flight request was
    /// answered and the process exited 0.
    private func withRequestInFlight(listen: String, workers: Int, directory: TempDir? = nil, during: (ProxyProcess) throws -> Void) throws {
        let upstream = try PythonServer("echo_upstream")
        let proxy = try ProxyProcess(
            config: """
                listen: \(listen)
                upstream: \(upstream.baseURL)/base
                workers: \(workers)
                drain_timeout: 30s
                credentials:
                  type: static
                  token_env: E2E_TOKEN
                """,
            directory: directory,
            environment: ["E2E_TOKEN": e2eToken])
        let inFlight =
            proxy.address.hasPrefix("unix:")
            ? try RawHTTPClient(unixPath: String(proxy.address.dropFirst(5)), timeout: 30)
            : try RawHTTPClient(port: proxy.port, timeout: 30)
        try inFlight.send(rawRequest("GET", "/slow-head?ms=5000", host: "localhost"))
        // Wait until the upstream holds the request, so that it is truly in flight at SIGTERM.
        let deadline = Date().addingTimeInterval(15)
        while (try curl(["\(upstream.baseURL)/count?path=/base/slow-head"]).json?["count"] as? Int ?? 0) < 1 {
            guard Date() < deadline else { throw HarnessError("the slow request never reached the upstream") }
            usleep(20_000)
        }
        proxy.terminate(signal: SIGTERM)
        #expect(proxy.waitForStderr(containing: "draining: no new connections", timeout: 10), "\(proxy.stderr)")
        try during(proxy)
        let answer = try inFlight.readResponse()
        #expect(answer.status == 200, "the request in flight was not answered: \(answer)")
        #expect(try proxy.waitForExit(timeout: 40) == 0, "\(proxy.stderr)")
    }

    @Test func aClientConnectingDuringTheDrainIsRefusedAtOnce() throws {
        try withRequestInFlight(listen: "127.0.0.1:0", workers: 2) { proxy in
            // The request in flight needs about 5 s more: a hung client would wait that long.
            let late = connectDuringDrain({ try RawHTTPClient(port: proxy.port, timeout: 2) }, host: proxy.address, within: 2)
            #expect(late == .refused || late == .closed || late == .answered(status: 503), "\(late)")
            #expect(proxy.isRunning, "the drain ended before the late client was tried")
        }
    }

    @Test func aUnixSocketIsGoneAsSoonAsTheDrainStarts() throws {
        let dir = try TempDir()
        let socketPath = dir.file("proxy.sock")
        try withRequestInFlight(listen: "unix:\(socketPath)", workers: 1, directory: dir) { proxy in
            let late = connectDuringDrain({ try RawHTTPClient(unixPath: socketPath, timeout: 2) }, host: "localhost", within: 2)
            #expect(late == .refused || late == .closed || late == .answered(status: 503), "\(late)")
            #expect(proxy.isRunning, "the drain ended before the late client was tried")
        }
    }
}
