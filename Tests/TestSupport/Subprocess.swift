import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// Errors of the test harness; each carries what a failing test needs to explain itself.
public struct HarnessError: Error, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}

/// Collects everything a pipe delivers on a thread of its own, so a test can wait for a line
/// with a deadline (and never has to sleep).
// @unchecked: `bytes` and `finished` are read and written only with `condition` locked.
public final class OutputCollector: @unchecked Sendable {
    private let condition = NSCondition()
    private var bytes: [UInt8] = []
    private var finished = false
    /// Takes ownership of `fd` (the read end of a pipe) and reads it until end of file.
    public init(fd: Int32) {
        let thread = Thread { [self] in
            var buffer = [UInt8](repeating: 0, count: 65536)
            while true {
                let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
                if n < 0 && errno == EINTR { continue }
                condition.lock()
                if n > 0 {
                    bytes.append(contentsOf: buffer[0..<n])
                } else {
                    finished = true
                }
                condition.broadcast()
                condition.unlock()
                if n <= 0 { break }
            }
            Glibc.close(fd)
        }
        thread.start()
    }

    /// Everything read so far.
    public var data: [UInt8] {
        condition.lock()
        defer { condition.unlock() }
        return bytes
    }

    public var text: String { String(decoding: data, as: UTF8.self) }

    /// True once the writing side closed.
    public var isFinished: Bool {
        condition.lock()
        defer { condition.unlock() }
        return finished
    }

    /// Waits until `match` finds something in the text so far, the pipe closes, or the deadline
    /// passes. Returns what `match` found, or nil.
    public func wait<T>(until deadline: Date, _ match: (String) -> T?) -> T? {
        condition.lock()
        defer { condition.unlock() }
        while true {
            if let found = match(String(decoding: bytes, as: UTF8.self)) { return found }
            if finished { return nil }
            if !condition.wait(until: deadline) {
                return match(String(decoding: bytes, as: UTF8.self))
            }
        }
    }

    /// Waits until the pipe closes or the deadline passes; true when it closed.
    @discardableResult
    public func waitForEnd(until deadline: Date) -> Bool {
        condition.lock()
        defer { condition.unlock() }
        while !finished {
            if !condition.wait(until: deadline) { return finished }
        }
        return true
    }
}

/// The result of a one-shot command.
public struct CommandResult: Sendable {
    public var status: Int32
    public var stdout: String
    public var stderr: String
    public var stdoutData: [UInt8]
    /// stdout and stderr together, for "the message names the key" assertions.
    public var output: String { stdout + stderr }
}

/// The environment a child gets: ours, without the variables that would change tokenproxy's
/// behaviour behind a test's back, plus `overrides`.
public func childEnvironment(_ overrides: [String: String]) -> [String: String] {
    var env = ProcessInfo.processInfo.environment
    for key in [
        "TOKENPROXY_CONFIG", "TOKENPROXY_LISTEN", "TOKENPROXY_UPSTREAM", "HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "ALL_PROXY", "all_proxy",
    ] {
        env[key] = nil
    }
    env.merge(overrides) { _, new in new }
    return env
}

/// A child process started with `posix_spawn`, with its stdout and stderr collected.
///
/// Foundation's `Process` is not used: it hands the spawning thread's signal mask to the child,
/// and on a test runner's worker thread (libdispatch) nearly every signal is blocked, so the
/// child would never see SIGTERM. Here the child starts with an empty mask and default handlers.
// @unchecked: `status` is read and written only with `condition` locked; `stdinFD` only by the thread
// that feeds the child's stdin.
public final class ChildProcess: @unchecked Sendable {
    public let pid: pid_t
    public let stdout: OutputCollector
    public let stderr: OutputCollector
    private var stdinFD: Int32
    private let condition = NSCondition()
    private var status: Int32?

    /// - Parameters:
    ///   - executable: a path, or a name looked up in PATH.
    ///   - withStdin: give the child a pipe for stdin (else /dev/null).
    public init(
        _ executable: String,
        arguments: [String],
        environment: [String: String],
        currentDirectory: String? = nil,
        withStdin: Bool = false
    ) throws {
        _ = Self.ignoreSIGPIPE
        // Pipes are made close-on-exec under one lock with the spawn itself, so a child started
        // concurrently from another test never inherits another child's pipe (which would keep
        // that pipe from ever reaching end of file).
        Self.spawnLock.lock()
        defer { Self.spawnLock.unlock() }
        func makePipe() throws -> (read: Int32, write: Int32) {
            var fds: [Int32] = [-1, -1]
            guard pipe(&fds) == 0 else { throw HarnessError("pipe: \(String(cString: strerror(errno)))") }
            _ = fcntl(fds[0], F_SETFD, FD_CLOEXEC)
            _ = fcntl(fds[1], F_SETFD, FD_CLOEXEC)
            return (fds[0], fds[1])
        }
        let out = try makePipe()
        let err = try makePipe()
        let inp = withStdin ? try makePipe() : nil

        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        if let inp {
            posix_spawn_file_actions_adddup2(&actions, inp.read, 0)
        } else {
            posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        }
        posix_spawn_file_actions_adddup2(&actions, out.write, 1)
        posix_spawn_file_actions_adddup2(&actions, err.write, 2)
        if let currentDirectory, let addChdir = Self.addChdir {
            _ = addChdir(&actions, currentDirectory)
        }
        if let addCloseFrom = Self.addCloseFrom { _ = addCloseFrom(&actions, 3) }

        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var empty = sigset_t()
        sigemptyset(&empty)
        var all = sigset_t()
        sigfillset(&all)
        posix_spawnattr_setsigmask(&attributes, &empty)
        posix_spawnattr_setsigdefault(&attributes, &all)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))

        let argv: [UnsafeMutablePointer<CChar>?] = ([executable] + arguments).map { strdup($0) } + [nil]
        let envp: [UnsafeMutablePointer<CChar>?] = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer {
            for pointer in argv { free(pointer) }
            for pointer in envp { free(pointer) }
        }
        var child: pid_t = 0
        let rc =
            executable.contains("/")
            ? posix_spawn(&child, executable, &actions, &attributes, argv, envp)
            : posix_spawnp(&child, executable, &actions, &attributes, argv, envp)
        Glibc.close(out.write)
        Glibc.close(err.write)
        if let inp { Glibc.close(inp.read) }
        guard rc == 0 else {
            Glibc.close(out.read)
            Glibc.close(err.read)
            if let inp { Glibc.close(inp.write) }
            throw HarnessError("cannot start \(executable): \(String(cString: strerror(rc)))")
        }
        let childPID = child
        pid = childPID
        stdinFD = inp?.write ?? -1
        stdout = OutputCollector(fd: out.read)
        stderr = OutputCollector(fd: err.read)
        let thread = Thread { [self] in
            var raw: Int32 = 0
            while waitpid(childPID, &raw, 0) < 0 && errno == EINTR {}
            // WIFEXITED / WTERMSIG by hand (the macros are not imported).
            let signalNumber = raw & 0x7F
            let code: Int32 = signalNumber == 0 ? (raw >> 8) & 0xFF : 128 + signalNumber
            condition.lock()
            status = code
            condition.broadcast()
            condition.unlock()
        }
        thread.start()
    }

    /// A child that exits before reading its stdin must not kill the test process.
    private static let ignoreSIGPIPE: Void = { _ = Glibc.signal(SIGPIPE, SIG_IGN) }()

    private static let spawnLock = NSLock()

    /// glibc's `posix_spawn_file_actions_addchdir_np` (2.29+), which Swift does not import
    /// without _GNU_SOURCE.
    private static let addChdir: (@convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, UnsafePointer<CChar>) -> Int32)? = {
        guard let symbol = dlsym(nil, "posix_spawn_file_actions_addchdir_np") else { return nil }
        return unsafeBitCast(symbol, to: (@convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, UnsafePointer<CChar>) -> Int32).self)
    }()

    /// `posix_spawn_file_actions_addclosefrom_np` (glibc 2.34), after the dup2s: the child keeps
    /// descriptors 0, 1 and 2 only. Tests run in parallel in one process, and a socket another test
    /// has open when a child starts (a client of its proxy) would otherwise stay open in that child
    /// after the test closes it: its proxy would never see the end of that connection.
    private static let addCloseFrom: (@convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32)? = {
        guard let symbol = dlsym(nil, "posix_spawn_file_actions_addclosefrom_np") else { return nil }
        return unsafeBitCast(symbol, to: (@convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32).self)
    }()

    /// Writes to the child's stdin (when started `withStdin`).
    public func writeStdin(_ data: [UInt8]) {
        guard stdinFD >= 0 else { return }
        var offset = 0
        while offset < data.count {
            let n = data[offset...].withUnsafeBytes { write(stdinFD, $0.baseAddress, $0.count) }
            if n < 0 {
                if errno == EINTR { continue }
                return
            }
            offset += n
        }
    }

    public func closeStdin() {
        if stdinFD >= 0 {
            Glibc.close(stdinFD)
            stdinFD = -1
        }
    }

    /// The exit status (128 + N after signal N), or nil while it runs.
    public var exitStatus: Int32? {
        condition.lock()
        defer { condition.unlock() }
        return status
    }

    public var isRunning: Bool { exitStatus == nil }

    public func signal(_ signal: Int32) {
        if isRunning { kill(pid, signal) }
    }

    /// Waits for the exit; nil on timeout.
    public func wait(timeout: TimeInterval) -> Int32? {
        let deadline = Date().addingTimeInterval(timeout)
        condition.lock()
        defer { condition.unlock() }
        while status == nil {
            if !condition.wait(until: deadline) { return status }
        }
        return status
    }

    /// SIGTERM, then SIGKILL if it is still there after `grace` seconds.
    public func stop(grace: TimeInterval = 5) {
        guard isRunning else { return }
        kill(pid, SIGTERM)
        if wait(timeout: grace) == nil {
            kill(pid, SIGKILL)
            _ = wait(timeout: 10)
        }
    }

    deinit {
        if isRunning {
            kill(pid, SIGKILL)
            _ = wait(timeout: 10)
        }
        closeStdin()
    }
}

/// Runs `executable` to completion (killing it after `timeout`) and returns its status and output.
public func runCommand(
    _ executable: String,
    arguments: [String],
    environment: [String: String]? = nil,
    stdin: Data? = nil,
    currentDirectory: URL? = nil,
    timeout: TimeInterval = 60
) throws -> CommandResult {
    let child = try ChildProcess(
        executable,
        arguments: arguments,
        environment: environment ?? childEnvironment([:]),
        currentDirectory: currentDirectory?.path,
        withStdin: stdin != nil
    )
    if let stdin {
        child.writeStdin([UInt8](stdin))
        child.closeStdin()
    }
    guard let status = child.wait(timeout: timeout) else {
        kill(child.pid, SIGKILL)
        _ = child.wait(timeout: 10)
        throw HarnessError("\(executable) \(arguments.joined(separator: " ")) did not finish within \(timeout) s; stderr: \(child.stderr.text)")
    }
    let deadline = Date().addingTimeInterval(5)
    child.stdout.waitForEnd(until: deadline)
    child.stderr.waitForEnd(until: deadline)
    return CommandResult(status: status, stdout: child.stdout.text, stderr: child.stderr.text, stdoutData: child.stdout.data)
}

/// The same, for an executable named by URL.
public func runCommand(_ executable: URL, arguments: [String], environment: [String: String]? = nil, timeout: TimeInterval = 60) throws
    -> CommandResult
{
    try runCommand(executable.path, arguments: arguments, environment: environment, timeout: timeout)
}
