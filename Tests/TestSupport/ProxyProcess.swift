import Foundation
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// The real `tokenproxy serve` running in a child process with a configuration written to a
/// temporary folder.
///
/// Start-up waits for the contract's `listening on ADDRESS` log line (and `admin listening on
/// ADDRESS` when the configuration has an `admin:` section) with a deadline; it never sleeps.
public final class ProxyProcess: Sendable {
    /// The folder holding the configuration (relative paths in it resolve here).
    public let directory: TempDir
    public let configPath: String
    /// The proxy's address as logged: `127.0.0.1:PORT`, `[::1]:PORT` or `unix:/PATH`.
    public let address: String
    /// The proxy's port (0 for a unix socket).
    public let port: Int
    public let adminAddress: String?
    public let adminPort: Int?

    private let process: ChildProcess
    private let stderrCollector: OutputCollector
    private let stdoutCollector: OutputCollector

    /// - Parameters:
    ///   - config: the YAML text, written to `tokenproxy.yaml` in `directory` (a new temporary
    ///     folder when nil; write files the configuration refers to into it first).
    ///   - environment: added to (and overriding) the inherited environment.
    ///   - expectAdmin: wait for `admin listening on` too; by default, when the configuration has a
    ///     top-level `admin:` key.
    ///   - arguments: the command line; by default `serve --config <file>`.
    public init(
        config: String,
        directory: TempDir? = nil,
        environment: [String: String] = [:],
        expectAdmin: Bool? = nil,
        arguments: [String]? = nil,
        startupTimeout: TimeInterval = 30,
        binary: URL = RepositoryPaths.tokenproxyBinary
    ) throws {
        let dir = try directory ?? TempDir(prefix: "tokenproxy-e2e")
        self.directory = dir
        self.configPath = try dir.write("tokenproxy.yaml", config)
        guard FileManager.default.isExecutableFile(atPath: binary.path) else {
            throw HarnessError("no tokenproxy binary at \(binary.path): run `swift build` first or set TOKENPROXY_BIN")
        }
        let wantsAdmin = expectAdmin ?? config.split(separator: "\n").contains { $0.hasPrefix("admin:") }

        let process = try ChildProcess(
            binary.path,
            arguments: arguments ?? ["serve", "--config", configPath],
            environment: childEnvironment(environment),
            currentDirectory: dir.path
        )
        self.process = process
        stderrCollector = process.stderr
        stdoutCollector = process.stdout

        let deadline = Date().addingTimeInterval(startupTimeout)
        let found = stderrCollector.wait(until: deadline) { text -> (String, String?)? in
            let lines = text.split(separator: "\n").map(String.init)
            guard let main = lines.lazy.compactMap({ Self.address(in: $0, admin: false) }).first else { return nil }
            if !wantsAdmin { return (main, nil) }
            guard let admin = lines.lazy.compactMap({ Self.address(in: $0, admin: true) }).first else { return nil }
            return (main, admin)
        }
        guard let found else {
            var why = "logged no `listening on` line within \(startupTimeout) s"
            if stderrCollector.isFinished || !process.isRunning {
                let status = process.wait(timeout: 5)
                why = "exited (status \(status.map(String.init) ?? "?")) before it was listening"
            }
            kill(process.pid, SIGKILL)
            _ = process.wait(timeout: 10)
            throw HarnessError("tokenproxy \(why); stderr:\n\(stderrCollector.text)")
        }
        address = found.0
        port = Self.port(of: found.0)
        adminAddress = found.1
        adminPort = found.1.map(Self.port(of:))
    }

    deinit {
        if process.isRunning {
            kill(process.pid, SIGKILL)
            _ = process.wait(timeout: 10)
        }
    }

    /// `http://ADDRESS` for a TCP listener.
    public var baseURL: String { "http://\(address)" }

    /// `http://ADDRESS` of the admin listener.
    public var adminURL: String? { adminAddress.map { "http://\($0)" } }

    /// Everything the process wrote to stderr so far.
    public var stderr: String { stderrCollector.text }

    /// Everything the process wrote to stdout so far.
    public var stdout: String { stdoutCollector.text }

    public var processIdentifier: Int32 { process.pid }

    public var isRunning: Bool { process.isRunning }

    /// Sends `signal` to the process.
    public func terminate(signal: Int32 = SIGTERM) {
        process.signal(signal)
    }

    /// Waits for the process to exit and returns its status (128 + N when signal N killed it).
    public func waitForExit(timeout: TimeInterval = 30) throws -> Int32 {
        guard let status = process.wait(timeout: timeout) else {
            throw HarnessError("tokenproxy did not exit within \(timeout) s; stderr:\n\(stderr)")
        }
        stderrCollector.waitForEnd(until: Date().addingTimeInterval(5))
        return status
    }

    /// Waits until stderr contains `text` (true) or the deadline passes (false).
    public func waitForStderr(containing text: String, timeout: TimeInterval = 10) -> Bool {
        stderrCollector.wait(until: Date().addingTimeInterval(timeout)) { $0.contains(text) ? true : nil } ?? false
    }

    /// Runs a one-shot command (`check`, `token`, `status`, ...) and returns its status and output.
    public static func run(
        args: [String],
        env: [String: String] = [:],
        stdin: String? = nil,
        currentDirectory: URL? = nil,
        timeout: TimeInterval = 60,
        binary: URL = RepositoryPaths.tokenproxyBinary
    ) throws -> CommandResult {
        guard FileManager.default.isExecutableFile(atPath: binary.path) else {
            throw HarnessError("no tokenproxy binary at \(binary.path): run `swift build` first or set TOKENPROXY_BIN")
        }
        return try runCommand(
            binary.path,
            arguments: args,
            environment: childEnvironment(env),
            stdin: stdin.map { Data($0.utf8) },
            currentDirectory: currentDirectory,
            timeout: timeout
        )
    }

    // MARK: - Parsing the listening lines

    /// The address in a `listening on ADDRESS` line (text or JSON log format), for the proxy's
    /// listener (`admin: false`) or the admin listener.
    static func address(in line: String, admin: Bool) -> String? {
        let marker = "listening on "
        guard let range = line.range(of: marker) else { return nil }
        let before = line[..<range.lowerBound]
        let isAdmin = before.hasSuffix("admin ")
        guard isAdmin == admin else { return nil }
        let rest = line[range.upperBound...]
        let address = rest.prefix { !$0.isWhitespace && $0 != "\"" && $0 != "," && $0 != "}" }
        return address.isEmpty ? nil : String(address)
    }

    public static func port(of address: String) -> Int {
        if address.hasPrefix("unix:") { return 0 }
        guard let colon = address.lastIndex(of: ":") else { return 0 }
        return Int(address[address.index(after: colon)...]) ?? 0
    }
}

extension ProxyProcess {
    /// SIGTERM, then the exit status 0 of a clean stop (CONTRACT.md "Signals, admin, logs").
    public func stopAndExpectCleanExit(sourceLocation: SourceLocation = #_sourceLocation) throws {
        terminate()
        #expect(try waitForExit() == 0, sourceLocation: sourceLocation)
    }
}
