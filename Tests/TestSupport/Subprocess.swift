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
public final class OutputCollector: @unchecked Sendable {
    private let condition = NSCondition()
    private var bytes: [UInt8] = []
    private var finished = false
    private let handle: FileHandle

    public init(_ handle: FileHandle) {
        self.handle = handle
        let fd = handle.fileDescriptor
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
    for key in ["TOKENPROXY_CONFIG", "TOKENPROXY_LISTEN", "TOKENPROXY_UPSTREAM", "HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "ALL_PROXY", "all_proxy"] {
        env[key] = nil
    }
    env.merge(overrides) { _, new in new }
    return env
}

/// Status of a finished `Process` the way a shell reports it: the exit code, or 128 + signal.
func shellStatus(_ process: Process) -> Int32 {
    process.terminationReason == .uncaughtSignal ? 128 + process.terminationStatus : process.terminationStatus
}

/// Runs `executable` to completion (killing it after `timeout`) and returns its status and output.
public func runCommand(
    _ executable: URL,
    arguments: [String],
    environment: [String: String]? = nil,
    stdin: Data? = nil,
    currentDirectory: URL? = nil,
    timeout: TimeInterval = 60
) throws -> CommandResult {
    let process = Process()
    process.executableURL = executable
    process.arguments = arguments
    process.environment = environment ?? childEnvironment([:])
    if let currentDirectory { process.currentDirectoryURL = currentDirectory }
    let outPipe = Pipe()
    let errPipe = Pipe()
    let inPipe = Pipe()
    process.standardOutput = outPipe
    process.standardError = errPipe
    process.standardInput = inPipe
    let exited = DispatchSemaphore(value: 0)
    process.terminationHandler = { _ in exited.signal() }
    try process.run()
    let out = OutputCollector(outPipe.fileHandleForReading)
    let err = OutputCollector(errPipe.fileHandleForReading)
    if let stdin, !stdin.isEmpty {
        try? inPipe.fileHandleForWriting.write(contentsOf: stdin)
    }
    try? inPipe.fileHandleForWriting.close()
    if exited.wait(timeout: .now() + timeout) == .timedOut {
        kill(process.processIdentifier, SIGKILL)
        exited.wait()
        throw HarnessError("\(executable.lastPathComponent) \(arguments.joined(separator: " ")) did not finish within \(timeout) s; stderr: \(err.text)")
    }
    let deadline = Date().addingTimeInterval(5)
    out.waitForEnd(until: deadline)
    err.waitForEnd(until: deadline)
    return CommandResult(status: shellStatus(process), stdout: out.text, stderr: err.text, stdoutData: out.data)
}
