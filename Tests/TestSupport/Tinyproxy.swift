import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// Debian's `tinyproxy` (installed by scripts/setup.sh) as a real forward HTTP proxy, on a free
/// loopback port, with a generated configuration and its log in a temporary folder. Start-up
/// waits for its "Accepting connections" log line. Stopped by `stop()` or when released.
public final class Tinyproxy: @unchecked Sendable {
    public let port: Int
    /// The value tinyproxy puts in the Via header of the requests it forwards itself.
    public let viaName: String
    private let process: ChildProcess
    private let directory: TempDir
    private let logPath: String

    public init(viaName: String = "tokenproxy-e2e-tinyproxy", startupTimeout: TimeInterval = 15) throws {
        guard let binary = ["/usr/bin/tinyproxy", "/usr/sbin/tinyproxy"].first(where: { FileManager.default.isExecutableFile(atPath: $0) }) else {
            throw HarnessError("no tinyproxy: run scripts/setup.sh")
        }
        self.viaName = viaName
        let directory = try TempDir(prefix: "tinyproxy")
        self.directory = directory
        logPath = directory.file("tinyproxy.log")
        // tinyproxy cannot be told to pick a port: take one the kernel says is free, and try again
        // on the rare clash with a port someone took meanwhile.
        var attempt = 0
        while true {
            attempt += 1
            let port = try freePort()
            let config = try directory.write(
                "tinyproxy.conf",
                """
                Port \(port)
                Listen 127.0.0.1
                Timeout 60
                MaxClients 64
                Allow 127.0.0.1
                LogFile "\(logPath)"
                LogLevel Info
                ViaProxyName "\(viaName)"
                """)
            try? FileManager.default.removeItem(atPath: logPath)
            let child = try ChildProcess(binary, arguments: ["-d", "-c", config], environment: childEnvironment([:]))
            let deadline = Date().addingTimeInterval(startupTimeout)
            var ready = false
            while Date() < deadline && child.isRunning {
                if let log = try? String(contentsOfFile: logPath, encoding: .utf8), log.contains("Accepting connections") {
                    ready = true
                    break
                }
                usleep(20_000)
            }
            if ready {
                self.port = port
                process = child
                return
            }
            child.stop(grace: 1)
            if attempt >= 3 {
                let log = (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? ""
                throw HarnessError("tinyproxy did not start: \(child.stderr.text) \(child.stdout.text) \(log)")
            }
        }
    }

    deinit { stop() }

    /// `http://127.0.0.1:PORT`
    public var url: String { "http://127.0.0.1:\(port)" }

    /// Everything tinyproxy logged so far (each request line it served, each CONNECT).
    public func log() -> String {
        (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? ""
    }

    public func stop() {
        process.stop(grace: 5)
    }
}
