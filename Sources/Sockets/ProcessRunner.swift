import Glibc

/// Runs a command without a shell and collects its standard output (with a size cap), under a
/// deadline. The child gets its own process group, so a timeout kills the command and everything it
/// started: SIGTERM to the group, then SIGKILL after a grace period. stdin and stderr are /dev/null
/// (stderr may carry the token in an error message, so it is never read). Signal mask and the
/// dispositions the proxy changed are reset in the child.
public enum ProcessRunner {
    public enum Termination: Equatable, Sendable {
        case exited(Int32)
        case signaled(Int32)
    }

    public enum Outcome: Equatable, Sendable {
        case finished(Termination, output: [UInt8])
        /// The deadline passed; the process group was killed.
        case timedOut
        /// The output passed the limit; the process group was killed.
        case outputTooLarge
    }

    public struct LaunchError: Error, Sendable, CustomStringConvertible {
        public var description: String
    }

    public static let killGrace: Double = 1

    /// Runs `argv` with the proxy's environment less the variables named in `withholding` (the
    /// ones that hold secrets: a command needs none of them).
    public static func run(_ argv: [String], timeout: Double, outputLimit: Int, withholding: Set<String> = []) throws -> Outcome {
        precondition(!argv.isEmpty)
        var pipeFDs: [Int32] = [-1, -1]
        guard pipe(&pipeFDs) == 0 else {
            throw LaunchError(description: "pipe: \(Syscall.describe(errno: errno))")
        }
        // Only the token thread spawns, so setting close-on-exec after pipe() races with no one.
        _ = fcntl(pipeFDs[0], F_SETFD, FD_CLOEXEC)
        _ = fcntl(pipeFDs[1], F_SETFD, FD_CLOEXEC)
        let readFD = pipeFDs[0]
        let writeFD = pipeFDs[1]
        defer { close(readFD) }

        let spawnResult = spawn(argv, stdout: writeFD, withholding: withholding)
        close(writeFD)
        guard case .success(let pid) = spawnResult else {
            if case .failure(let error) = spawnResult { throw error }
            preconditionFailure()
        }

        let deadline = monotonicNow() + max(0, timeout)
        var output: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 16 << 10)
        reading: while true {
            let remaining = deadline - monotonicNow()
            if remaining <= 0 {
                terminateGroup(pid)
                return .timedOut
            }
            let readable: Bool
            do {
                readable = try Syscall.waitReadable(readFD, milliseconds: Int32(min(remaining * 1000, 60_000).rounded(.up)))
            } catch {
                terminateGroup(pid)
                throw LaunchError(description: "poll: \(Syscall.describe(errno: error.errno))")
            }
            if !readable { continue }
            let (count, failure) = buffer.withUnsafeMutableBytes { raw in
                Syscall.uninterrupted { read(readFD, raw.baseAddress, raw.count) }
            }
            if count < 0 {
                if failure == EAGAIN { continue }
                terminateGroup(pid)
                throw LaunchError(description: "read: \(Syscall.describe(errno: failure))")
            }
            if count == 0 { break reading }
            output.append(contentsOf: buffer[0..<count])
            if output.count > outputLimit {
                terminateGroup(pid)
                return .outputTooLarge
            }
        }

        // Output closed: the command is done or about to be; wait for it within the same deadline.
        while true {
            if let termination = reap(pid, blocking: false) {
                return .finished(termination, output: output)
            }
            if monotonicNow() >= deadline {
                terminateGroup(pid)
                return .timedOut
            }
            sleepBriefly()
        }
    }

    /// Starts `argv` without a shell and without waiting for it (a browser for `tokenproxy login`):
    /// stdin, stdout and stderr on /dev/null, no descriptor of ours inherited, default signals. The
    /// child is not reaped: the command that starts it is short-lived.
    public static func launch(_ argv: [String]) throws {
        precondition(!argv.isEmpty)
        if case .failure(let error) = spawn(argv, stdout: nil) { throw error }
    }

    /// Starts `argv` (searched in PATH when it has no "/") in a process group of its own (a Ctrl-C
    /// meant for tokenproxy does not reach it), with stdin and stderr on /dev/null, stdout on
    /// `stdout` (or /dev/null), no descriptor of ours inherited, no signal blocked and the usual ones
    /// at their defaults, and the proxy's environment less the variables named in `withholding`.
    private static func spawn(_ argv: [String], stdout: Int32?, withholding: Set<String> = []) -> Result<pid_t, LaunchError> {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        if let stdout {
            posix_spawn_file_actions_adddup2(&actions, stdout, 1)
        } else {
            posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
        }
        posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)
        // Descriptors the proxy opened without O_CLOEXEC must not leak into the command.
        closeInheritedDescriptors(&actions)

        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var emptyMask = sigset_t()
        sigemptyset(&emptyMask)
        var defaults = sigset_t()
        sigemptyset(&defaults)
        for signal in [SIGPIPE, SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGCHLD, SIGUSR1, SIGUSR2, SIGALRM] {
            sigaddset(&defaults, signal)
        }
        posix_spawnattr_setsigmask(&attributes, &emptyMask)
        posix_spawnattr_setsigdefault(&attributes, &defaults)
        posix_spawnattr_setpgroup(&attributes, 0)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))

        var cArguments: [UnsafeMutablePointer<CChar>?] = argv.map { strdup($0) }
        cArguments.append(nil)
        defer { for pointer in cArguments { free(pointer) } }
        // The environment, without the withheld variables: pointers into `environ`, which the token
        // thread (the only one that spawns or changes it) leaves alone meanwhile.
        var environment: [UnsafeMutablePointer<CChar>?] = []
        var entry = environ
        while let variable = entry.pointee {
            let text = String(cString: variable)
            let name = text.firstIndex(of: "=").map { String(text[..<$0]) } ?? text
            if !withholding.contains(name) { environment.append(variable) }
            entry += 1
        }
        environment.append(nil)

        var pid: pid_t = 0
        let result = cArguments.withUnsafeBufferPointer { arguments -> Int32 in
            environment.withUnsafeBufferPointer { envp -> Int32 in
                argv[0].contains("/")
                    ? posix_spawn(&pid, argv[0], &actions, &attributes, arguments.baseAddress!, envp.baseAddress!)
                    : posix_spawnp(&pid, argv[0], &actions, &attributes, arguments.baseAddress!, envp.baseAddress!)
            }
        }
        guard result == 0 else {
            return .failure(LaunchError(description: "cannot start \(argv[0]): \(Syscall.describe(errno: result))"))
        }
        return .success(pid)
    }

    private typealias AddCloseFrom = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32

    /// `posix_spawn_file_actions_addclosefrom_np(actions, 3)` (glibc 2.34+), which Swift's Glibc
    /// module does not import; looked up at run time and skipped where the C library lacks it.
    private static func closeInheritedDescriptors(_ actions: inout posix_spawn_file_actions_t) {
        guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "posix_spawn_file_actions_addclosefrom_np") else { return }
        let addCloseFrom = unsafeBitCast(symbol, to: AddCloseFrom.self)
        _ = addCloseFrom(&actions, 3)
    }

    /// SIGTERM to the group, SIGKILL after the grace period, and the child reaped.
    private static func terminateGroup(_ pid: pid_t) {
        kill(-pid, SIGTERM)
        let graceEnd = monotonicNow() + killGrace
        while monotonicNow() < graceEnd {
            if reap(pid, blocking: false) != nil {
                // The leader is gone; whatever it started in its group goes too.
                kill(-pid, SIGKILL)
                return
            }
            sleepBriefly()
        }
        kill(-pid, SIGKILL)
        _ = reap(pid, blocking: true)
    }

    private static func reap(_ pid: pid_t, blocking: Bool) -> Termination? {
        var status: Int32 = 0
        let (result, _) = Syscall.uninterrupted { Int(waitpid(pid, &status, blocking ? 0 : WNOHANG)) }
        if result == 0 { return nil }
        // ECHILD: someone else reaped it (SIGCHLD ignored); its status is lost.
        guard result == Int(pid) else { return .exited(-1) }
        // <sys/wait.h> macros, which Swift does not import.
        let signal = status & 0x7F
        if signal == 0 { return .exited((status >> 8) & 0xFF) }
        return .signaled(signal)
    }

    private static func sleepBriefly() {
        Syscall.sleep(0.005)
    }

    static func monotonicNow() -> Double { EventLoop.monotonicNow() }
}
