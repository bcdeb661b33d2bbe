import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// One of the Python servers in `Tests/servers`, started with `--port 0`; start-up waits for its
/// `READY <port>` line. Stopped by `stop()` or when released.
public final class PythonServer: Sendable {
    public let name: String
    public let port: Int
    private let process: ChildProcess
    private let stderrCollector: OutputCollector
    private let stdoutCollector: OutputCollector

    /// - Parameters:
    ///   - name: the script's name without `.py`, e.g. `echo_upstream`.
    ///   - arguments: more arguments after `--port 0`.
    public init(_ name: String, arguments: [String] = [], environment: [String: String] = [:], startupTimeout: TimeInterval = 30) throws {
        self.name = name
        let script = RepositoryPaths.servers.appendingPathComponent("\(name).py")
        guard FileManager.default.fileExists(atPath: script.path) else {
            throw HarnessError("no test server at \(script.path)")
        }
        let python = ProcessInfo.processInfo.environment["PYTHON"] ?? "python3"
        var env = childEnvironment(environment)
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        let process = try ChildProcess(python, arguments: ["-u", script.path, "--port", "0"] + arguments, environment: env)
        self.process = process
        stdoutCollector = process.stdout
        stderrCollector = process.stderr
        let port = stdoutCollector.wait(until: Date().addingTimeInterval(startupTimeout)) { text -> Int? in
            for line in text.split(separator: "\n") where line.hasPrefix("READY ") {
                return Int(line.dropFirst("READY ".count).trimmingCharacters(in: .whitespaces))
            }
            return nil
        }
        guard let port else {
            process.stop(grace: 0)
            throw HarnessError("\(name).py did not print READY; stderr:\n\(stderrCollector.text)")
        }
        self.port = port
    }

    /// `http://127.0.0.1:PORT`
    public var baseURL: String { "http://127.0.0.1:\(port)" }

    public var stderr: String { stderrCollector.text }

    public var isRunning: Bool { process.isRunning }

    /// Stops the server and waits for it to be gone (its port is closed when this returns).
    public func stop() {
        process.stop(grace: 5)
    }

    deinit { stop() }
}
