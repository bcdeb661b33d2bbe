import Foundation
import Synchronization
import TestSupport
import Testing

/// Reloads that keep an address in the file keep its listener, whatever route owns it now (issue 29,
/// point 5: a renamed route or two swapped addresses were refused with "Address already in use"),
/// and `POST /reload` runs on one worker however many ask at once.
@Suite(.tags(.endToEnd), .timeLimit(.minutes(35))) struct ReloadListenerTests {
    final class World: Sendable {
        let one: PythonServer
        let two: PythonServer
        let dir: TempDir
        let portA: Int
        let portB: Int

        init() throws {
            one = try PythonServer("echo_upstream")
            two = try PythonServer("echo_upstream")
            dir = try TempDir(prefix: "tokenproxy-reload")
            portA = try freePort()
            portB = try freePort()
        }

        /// Routes named `names` on the ports `ports`, forwarding to /one and /two.
        func file(names: (String, String), ports: (Int, Int)) -> String {
            """
            listen: 127.0.0.1:0
            workers: 2
            admin:
              listen: 127.0.0.1:0
            routes:
              - name: \(names.0)
                match: {listen: "127.0.0.1:\(ports.0)"}
                upstream: \(one.baseURL)/one
                credentials: {type: static, token_env: E2E_TOKEN}
              - name: \(names.1)
                match: {listen: "127.0.0.1:\(ports.1)"}
                upstream: \(two.baseURL)/two
                credentials: {type: static, token_env: E2E_TOKEN}
            """
        }

        func serve(_ yaml: String) throws -> ProxyProcess {
            try ProxyProcess(config: yaml, directory: dir, environment: ["E2E_TOKEN": e2eToken])
        }

        /// Routes `a` and `b` on `portA` and `portB`, and a kept-alive connection to `portA` that
        /// the route to /one served.
        func serveWithAKeptConnection(sourceLocation: SourceLocation = #_sourceLocation) throws -> (ProxyProcess, RawHTTPClient) {
            let proxy = try serve(file(names: ("a", "b"), ports: (portA, portB)))
            let kept = try RawHTTPClient(port: portA)
            #expect(try ReloadListenerTests.servedBy(kept, port: portA) == "/one", sourceLocation: sourceLocation)
            return (proxy, kept)
        }

        func reload(_ proxy: ProxyProcess, to yaml: String) throws -> CurlResult {
            _ = try dir.write("tokenproxy.yaml", yaml)
            return try curl(["-X", "POST", try #require(proxy.adminURL) + "/reload"])
        }

        func finish(_ proxy: ProxyProcess) throws {
            try proxy.stopAndExpectCleanExit()
            one.stop()
            two.stop()
        }
    }

    /// The upstream base path that served a GET on `client` (a kept-alive connection).
    static func servedBy(_ client: RawHTTPClient, port: Int) throws -> String {
        try client.send(rawRequest("GET", "/x", host: "127.0.0.1:\(port)"))
        let response = try client.readResponse()
        guard response.status == 200 else { return "status \(response.status): \(response.bodyString)" }
        return String(try Echo(response.body).path.dropLast(2))
    }

    static func servedBy(port: Int) throws -> String {
        let client = try RawHTTPClient(port: port)
        defer { client.close() }
        return try servedBy(client, port: port)
    }

    @Test func aRenamedRouteKeepsItsListenerAndItsConnections() throws {
        let w = try World()
        let (proxy, kept) = try w.serveWithAKeptConnection()
        let reload = try w.reload(proxy, to: w.file(names: ("alpha", "b"), ports: (w.portA, w.portB)))
        #expect(reload.status == 200, "\(reload.bodyString)")
        #expect(try Self.servedBy(kept, port: w.portA) == "/one", "the kept-alive connection follows the renamed route")
        #expect(try Self.servedBy(port: w.portA) == "/one")
        #expect(try Self.servedBy(port: w.portB) == "/two")
        kept.close()
        try w.finish(proxy)
    }

    @Test func twoRoutesThatSwapTheirAddressesKeepBothListeners() throws {
        let w = try World()
        let (proxy, kept) = try w.serveWithAKeptConnection()
        let reload = try w.reload(proxy, to: w.file(names: ("a", "b"), ports: (w.portB, w.portA)))
        #expect(reload.status == 200, "\(reload.bodyString)")
        #expect(try Self.servedBy(port: w.portA) == "/two")
        #expect(try Self.servedBy(port: w.portB) == "/one")
        #expect(try Self.servedBy(kept, port: w.portA) == "/two", "the address's connections follow it to its new route")
        kept.close()
        try w.finish(proxy)
    }

    /// 50 reloads asked at once: every one answered 200, and no thread per call.
    @Test func concurrentReloadsShareOneWorker() throws {
        let w = try World()
        let yaml = w.file(names: ("a", "b"), ports: (w.portA, w.portB))
        let proxy = try w.serve(yaml)
        let admin = try #require(proxy.adminURL)
        #expect(try curl(["-X", "POST", admin + "/reload"]).status == 200)
        let threadsBefore = try Self.threads(proxy.processIdentifier)
        let statuses = Mutex<[Int]>([])
        // The process's threads, sampled while the reloads run (a thread per call ends with its call).
        let peak = Mutex(threadsBefore)
        let sampling = Mutex(true)
        let pid = proxy.processIdentifier
        let sampler = Thread {
            while sampling.withLock({ $0 }) {
                if let n = try? Self.threads(pid) { peak.withLock { $0 = max($0, n) } }
                usleep(2_000)
            }
        }
        sampler.start()
        DispatchQueue.concurrentPerform(iterations: 50) { _ in
            let status = (try? curl(["-X", "POST", admin + "/reload"]).status) ?? 0
            statuses.withLock { $0.append(status) }
        }
        sampling.withLock { $0 = false }
        let most = peak.withLock { $0 }
        #expect(statuses.withLock { $0 }.allSatisfy { $0 == 200 }, "\(statuses.withLock { $0 })")
        #expect(most <= threadsBefore + 1, "threads: \(threadsBefore) before, \(most) at most during 50 reloads")
        #expect(try Self.servedBy(port: w.portA) == "/one")
        try w.finish(proxy)
    }

    /// `Threads:` of /proc/PID/status.
    static func threads(_ pid: Int32) throws -> Int {
        let status = try String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)
        let line = try #require(status.split(separator: "\n").first { $0.hasPrefix("Threads:") })
        return try #require(Int(line.dropFirst("Threads:".count).trimmingCharacters(in: .whitespaces)))
    }
}
