import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// One of the Python servers in `Tests/servers`, started with `--port 0`; start-up waits for its
/// `READY <port>` line. Stopped by `stop()` or when released.
public final class PythonServer: @unchecked Sendable {
    public let name: String
    public let port: Int
    private let process: Process
    private let stderrCollector: OutputCollector
    private let stdoutCollector: OutputCollector
    private let exited = DispatchSemaphore(value: 0)

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
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = [python, "-u", script.path, "--port", "0"] + arguments
        var env = childEnvironment(environment)
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        process.environment = env
        let outPipe = Pipe()
        let errPipe = Pipe()
        process.standardOutput = outPipe
        process.standardError = errPipe
        process.standardInput = FileHandle.nullDevice
        let exited = self.exited
        process.terminationHandler = { _ in exited.signal() }
        self.process = process
        try process.run()
        stdoutCollector = OutputCollector(outPipe.fileHandleForReading)
        stderrCollector = OutputCollector(errPipe.fileHandleForReading)
        let port = stdoutCollector.wait(until: Date().addingTimeInterval(startupTimeout)) { text -> Int? in
            for line in text.split(separator: "\n") where line.hasPrefix("READY ") {
                return Int(line.dropFirst("READY ".count).trimmingCharacters(in: .whitespaces))
            }
            return nil
        }
        guard let port else {
            kill(process.processIdentifier, SIGKILL)
            _ = exited.wait(timeout: .now() + 5)
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
        guard process.isRunning else { return }
        kill(process.processIdentifier, SIGTERM)
        if exited.wait(timeout: .now() + 5) == .timedOut {
            kill(process.processIdentifier, SIGKILL)
            _ = exited.wait(timeout: .now() + 5)
        }
    }

    deinit { stop() }
}
