import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// Debian's `redis-sentinel` (installed by scripts/setup.sh) on a free loopback port, monitoring one
/// primary as `master`, with a quick failover (down after 1 s) for tests. Its configuration lives in
/// a folder of its own (a sentinel rewrites it). Stopped by `stop()` or when released.
public final class RedisSentinel: @unchecked Sendable {
    public let port: Int
    private let process: ChildProcess
    private let directory: TempDir

    public init(master: String, primaryPort: Int, quorum: Int = 2) throws {
        let directory = try TempDir(prefix: "tokenproxy-sentinel")
        self.directory = directory
        var lastError: Error? = nil
        for _ in 0..<5 {
            let port = try freePort()
            let config = try directory.write(
                "sentinel-\(port).conf",
                """
                port \(port)
                bind 127.0.0.1
                dir \(directory.path)
                sentinel monitor \(master) 127.0.0.1 \(primaryPort) \(quorum)
                sentinel down-after-milliseconds \(master) 1000
                sentinel failover-timeout \(master) 3000
                sentinel parallel-syncs \(master) 1
                """)
            let child = try ChildProcess("redis-sentinel", arguments: [config], environment: ProcessInfo.processInfo.environment)
            let ready = child.stdout.wait(until: Date().addingTimeInterval(20)) { text -> Bool? in
                if text.contains("+monitor master") { return true }
                if text.contains("Address already in use") { return false }
                return nil
            }
            if ready == true {
                self.port = port
                process = child
                return
            }
            child.stop(grace: 1)
            lastError = HarnessError("redis-sentinel did not start: \(child.stdout.text.suffix(500))")
        }
        throw lastError ?? HarnessError("redis-sentinel did not start")
    }

    deinit {
        stop()
        directory.remove()
    }

    /// `127.0.0.1:PORT`
    public var address: String { "127.0.0.1:\(port)" }

    /// Runs `redis-cli` against this sentinel and returns its stdout.
    public func cli(_ arguments: [String]) throws -> String {
        let result = try runCommand("redis-cli", arguments: ["-h", "127.0.0.1", "-p", String(port)] + arguments, timeout: 10)
        guard result.status == 0 else { throw HarnessError("redis-cli \(arguments): \(result.stderr)") }
        return result.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// The port of the primary this sentinel names now.
    public func primaryPort(_ master: String) -> Int? {
        guard let answer = try? cli(["SENTINEL", "get-master-addr-by-name", master]) else { return nil }
        return answer.split(separator: "\n").last.flatMap { Int($0) }
    }

    /// A field of `SENTINEL master NAME` (e.g. `num-slaves`, `num-other-sentinels`).
    public func masterField(_ master: String, _ field: String) -> String? {
        guard let answer = try? cli(["SENTINEL", "master", master]) else { return nil }
        let lines = answer.split(separator: "\n").map(String.init)
        guard let index = lines.firstIndex(of: field), index + 1 < lines.count else { return nil }
        return lines[index + 1]
    }

    public func stop() { process.stop(grace: 5) }
}
