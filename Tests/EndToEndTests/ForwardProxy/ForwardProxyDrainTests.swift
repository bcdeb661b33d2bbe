import Foundation
import TestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// SIGTERM while an intercepted CONNECT tunnel is open (CONTRACT.md "Signals, admin, logs": stop
/// accepting, close idle keep-alive connections, let in-flight requests finish up to `drain_timeout`,
/// close what is left, exit 0), with the tunnel's TLS ended in the proxy. Once, in CI, the proxy
/// exited with a crash here instead of 0; each case ends with the exit status.
@Suite(.tags(.endToEnd), .timeLimit(.minutes(20))) struct ForwardProxyDrainTests {
    static let host = "api.example.test"

    static func request(_ index: Int, target: String? = nil) -> TLSClient.Request {
        TLSClient.Request(
            index % 2 == 0 ? "POST" : "GET", target ?? "/pipe-\(index)", headers: [("Host", host)], body: index % 2 == 0 ? "body \(index)" : "")
    }

    /// A tunnel that has had its answers and waits for its next request is idle: SIGTERM closes it
    /// and the proxy exits 0 while the client still holds its end.
    @Test func anIdleInterceptedTunnelIsClosedAndTheProxyExitsZero() throws {
        let upstream = try PythonServer("echo_upstream")
        let f = try ForwardProxyFixture(routes: [.init(name: "api", host: Self.host, upstream: upstream.baseURL + "/base")])
        let client = try TLSClient.Paused(
            port: f.proxy.port, connect: "\(Self.host):443", caFile: f.caFile, serverName: Self.host,
            requests: (1...3).map { Self.request($0) }, pauseAfter: 2)

        f.proxy.terminate(signal: SIGTERM)
        #expect(try f.proxy.waitForExit(timeout: 30) == 0, "\(f.proxy.stderr.suffix(3000))")
        let outcome = try client.resume()
        #expect(outcome.connectStatus == 200)
        #expect(outcome.responses.map(\.status) == [200, 200], "\(outcome)")
        #expect(outcome.error != nil, "the third request was answered after the drain closed the idle tunnel: \(outcome)")
        upstream.stop()
    }

    /// Pipelined requests in the tunnel, the first one still at the upstream at SIGTERM: it is
    /// answered whole, and the proxy exits 0.
    @Test func aRequestInFlightInTheTunnelIsAnsweredAndTheProxyExitsZero() throws {
        let upstream = try PythonServer("echo_upstream")
        let f = try ForwardProxyFixture(
            routes: [.init(name: "api", host: Self.host, upstream: upstream.baseURL + "/base")], drainTimeout: "30s")
        let requests = [Self.request(1, target: "/slow-head?ms=2000")] + (2...4).map { Self.request($0) }
        let exchange = BackgroundExchange {
            try TLSClient.exchange(
                port: f.proxy.port, connect: "\(Self.host):443", caFile: f.caFile, pipeline: true, requests: requests)
        }
        // SIGTERM once the upstream holds the slow request, so that it is truly in flight.
        let deadline = Date().addingTimeInterval(60)
        while (try curl(["\(upstream.baseURL)/count?path=/base/slow-head"]).json?["count"] as? Int ?? 0) < 1 {
            guard Date() < deadline else { throw HarnessError("the slow request never reached the upstream") }
            usleep(20_000)
        }
        f.proxy.terminate(signal: SIGTERM)

        let outcome = try exchange.wait()
        #expect(outcome.responses.first?.status == 200, "the request in flight was not answered: \(outcome)")
        #expect(outcome.responses.first?.json?["slept_ms"] as? Int == 2000, "\(outcome)")
        // The requests behind it were not in flight: answered before the end, or cut off; never half.
        #expect(outcome.responses.allSatisfy { $0.status == 200 }, "\(outcome)")
        #expect(try f.proxy.waitForExit(timeout: 60) == 0, "\(f.proxy.stderr.suffix(3000))")
        #expect(!f.proxy.stderr.contains(e2eToken))
        upstream.stop()
    }
}

/// One `TLSClient.exchange` run on a thread of its own while the test does something else.
private final class BackgroundExchange: @unchecked Sendable {
    // @unchecked: `outcome` is written once before `done` is signalled and read only after.
    private let done = DispatchSemaphore(value: 0)
    private var outcome: Result<TLSClient.Outcome, any Error>?

    init(_ run: @escaping @Sendable () throws -> TLSClient.Outcome) {
        Thread.detachNewThread { [self] in
            outcome = Result { try run() }
            done.signal()
        }
    }

    func wait() throws -> TLSClient.Outcome {
        guard done.wait(timeout: .now() + 180) == .success else { throw HarnessError("tls_client.py did not finish within 180 s") }
        return try outcome!.get()
    }
}
