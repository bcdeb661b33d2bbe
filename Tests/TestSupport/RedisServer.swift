import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// A real `redis-server` (Debian's, installed by scripts/setup.sh) on a free loopback port, with
/// append-only persistence in a folder of its own, so that a restart keeps the data (or, with
/// `persistent: false`, none: a restart empties it). Start-up waits for its "Ready to accept
/// connections" log line; it never sleeps.
public final class RedisServer: @unchecked Sendable {
    public let port: Int
    public let directory: TempDir
    private let lock = NSLock()
    private var process: ChildProcess?
    private let extraArguments: [String]
    /// TLS only (`--port 0 --tls-port PORT`), with these files; nil: plain TCP.
    public let tls: TLSFiles?

    /// A server certificate and key, and the CA that verifies clients (`tls-auth-clients`).
    public struct TLSFiles: Sendable {
        public var certFile: String
        public var keyFile: String
        public var caFile: String
        public var authClients: Bool
        public init(certFile: String, keyFile: String, caFile: String, authClients: Bool = false) {
            self.certFile = certFile
            self.keyFile = keyFile
            self.caFile = caFile
            self.authClients = authClients
        }

        func arguments(port: Int) -> [String] {
            [
                "--port", "0", "--tls-port", String(port), "--tls-cert-file", certFile, "--tls-key-file", keyFile,
                "--tls-ca-cert-file", caFile, "--tls-auth-clients", authClients ? "yes" : "no",
            ]
        }
    }

    /// - Parameters:
    ///   - arguments: more `redis-server` options (`--requirepass`, ...).
    ///   - persistent: false: no append-only file, so that a restart comes back empty.
    public init(arguments: [String] = [], persistent: Bool = true, tls: TLSFiles? = nil) throws {
        directory = try TempDir(prefix: "tokenproxy-redis")
        self.tls = tls
        extraArguments = (persistent ? [] : ["--appendonly", "no"]) + arguments
        var lastError: Error? = nil
        // A port the kernel just gave out and took back: another process could take it in between,
        // so a start that cannot bind tries another one.
        for _ in 0..<5 {
            let candidate = try freePort()
            do {
                process = try Self.start(port: candidate, directory: directory, arguments: arguments + (tls?.arguments(port: candidate) ?? []))
                port = candidate
                return
            } catch {
                lastError = error
            }
        }
        throw lastError ?? HarnessError("redis-server did not start")
    }

    /// `redis://127.0.0.1:PORT`, or `rediss://` for a TLS server.
    public var url: String { "\(tls == nil ? "redis" : "rediss")://127.0.0.1:\(port)" }

    public var isRunning: Bool { lock.withLock { process?.isRunning ?? false } }

    public var log: String { lock.withLock { (process?.stdout.text ?? "") + (process?.stderr.text ?? "") } }

    /// Stops the server (SIGTERM: Redis writes its append-only file and exits) and waits for it.
    public func stop() {
        let running = lock.withLock { () -> ChildProcess? in
            defer { process = nil }
            return process
        }
        running?.stop(grace: 10)
    }

    /// Kills the server at once (SIGKILL), as a crashed machine would stop it.
    public func kill() {
        let running = lock.withLock { () -> ChildProcess? in
            defer { process = nil }
            return process
        }
        running?.signal(SIGKILL)
        _ = running?.wait(timeout: 10)
    }

    /// Starts it again on the same port with the same data folder.
    public func restart() throws {
        stop()
        var lastError: Error? = nil
        // The port was just released by the old process; a new bind may need a moment (TIME_WAIT does
        // not block a listening bind on Linux, but be patient with a slow machine).
        for _ in 0..<20 {
            do {
                let started = try Self.start(port: port, directory: directory, arguments: extraArguments + (tls?.arguments(port: port) ?? []))
                lock.withLock { process = started }
                return
            } catch {
                lastError = error
                usleep(100_000)
            }
        }
        throw lastError ?? HarnessError("redis-server did not restart")
    }

    /// Runs `redis-cli` against this server and returns its stdout.
    @discardableResult
    public func cli(_ arguments: [String]) throws -> String {
        var options = ["-h", "127.0.0.1", "-p", String(port)]
        if let tls {
            options += ["--tls", "--cacert", tls.caFile]
            if tls.authClients { options += ["--cert", tls.certFile, "--key", tls.keyFile] }
        }
        let result = try runCommand("redis-cli", arguments: options + arguments, timeout: 10)
        guard result.status == 0 else { throw HarnessError("redis-cli \(arguments): \(result.stderr)") }
        return result.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    deinit {
        stop()
        directory.remove()
    }

    private static func start(port: Int, directory: TempDir, arguments: [String]) throws -> ChildProcess {
        let process = try ChildProcess(
            "redis-server",
            arguments: [
                "--port", String(port), "--bind", "127.0.0.1", "--dir", directory.path, "--save", "",
                "--appendonly", "yes", "--appendfsync", "always", "--daemonize", "no", "--logfile", "",
                "--protected-mode", "yes",
            ] + arguments,
            environment: ProcessInfo.processInfo.environment
        )
        let ready = process.stdout.wait(until: Date().addingTimeInterval(20)) { text -> Bool? in
            if text.contains("Ready to accept connections") { return true }
            if text.contains("Address already in use") || text.contains("Could not create server TCP") { return false }
            return nil
        }
        guard ready == true else {
            process.stop(grace: 2)
            throw HarnessError("redis-server on port \(port) did not become ready: \(process.stdout.text.suffix(500))")
        }
        return process
    }
}
