import CSystem
import Glibc

/// A failed system call: which call, and errno.
public struct SocketError: Error, CustomStringConvertible, Sendable {
    public let call: String
    public let errno: Int32
    public init(_ call: String, errno: Int32 = Glibc.errno) {
        self.call = call
        self.errno = errno
    }
    public var description: String { "\(call): \(String(cString: strerror(errno)))" }
}

/// What a non-blocking read or write achieved.
public enum IOResult: Equatable {
    case done(Int)
    case wouldBlock
    /// Peer closed (read returned 0) or the connection broke (EPIPE, ECONNRESET).
    case closed
}

/// Every system call on a file descriptor goes through here: EINTR is retried, EAGAIN becomes
/// `.wouldBlock`, and EBADF/EFAULT stop the process because they mean a bug in the caller.
public enum Syscall {
    @inline(__always)
    static func retrying(_ call: String, _ body: () -> Int) throws -> Int {
        while true {
            let r = body()
            if r >= 0 { return r }
            let e = Glibc.errno
            if e == EINTR { continue }
            precondition(e != EBADF && e != EFAULT, "\(call) on a bad descriptor or address (bug)")
            throw SocketError(call, errno: e)
        }
    }

    public static func read(_ fd: Int32, _ buffer: UnsafeMutableRawBufferPointer) -> IOResult {
        while true {
            let n = Glibc.read(fd, buffer.baseAddress, buffer.count)
            if n > 0 { return .done(n) }
            if n == 0 { return .closed }
            switch Glibc.errno {
            case EINTR: continue
            case EAGAIN, EWOULDBLOCK: return .wouldBlock
            default: return .closed
            }
        }
    }

    /// `send` with MSG_NOSIGNAL: a closed peer is an error, never a SIGPIPE.
    public static func write(_ fd: Int32, _ buffer: UnsafeRawBufferPointer) -> IOResult {
        while true {
            let n = Glibc.send(fd, buffer.baseAddress, buffer.count, Int32(MSG_NOSIGNAL))
            if n >= 0 { return .done(n) }
            switch Glibc.errno {
            case EINTR: continue
            case EAGAIN, EWOULDBLOCK: return .wouldBlock
            default: return .closed
            }
        }
    }

    /// Ends our sending side; the peer reads EOF after the bytes already sent.
    public static func shutdownWrite(_ fd: Int32) {
        _ = Glibc.shutdown(fd, Int32(SHUT_WR))
    }

    public static func close(_ fd: Int32) {
        // After close, the descriptor is gone even on EINTR (Linux); never retry.
        _ = Glibc.close(fd)
    }

    public static func setNonBlocking(_ fd: Int32) throws {
        let flags = fcntl(fd, F_GETFL)
        guard flags >= 0, fcntl(fd, F_SETFL, flags | O_NONBLOCK) >= 0 else { throw SocketError("fcntl") }
    }

    public static func setOption(_ fd: Int32, _ level: Int32, _ name: Int32, _ value: Int32) throws {
        var v = value
        guard setsockopt(fd, level, name, &v, socklen_t(MemoryLayout<Int32>.size)) == 0 else {
            throw SocketError("setsockopt")
        }
    }

    /// Number of CPUs this process may run on: its affinity mask, lowered by a cgroup v2 CPU quota.
    public static func usableCPUCount() -> Int {
        var count = Int(tp_cpu_count())
        if count <= 0 { count = max(1, sysconf(Int32(_SC_NPROCESSORS_ONLN))) }
        if let text = try? readSmallFile("/sys/fs/cgroup/cpu.max") {
            let parts = text.split(separator: " ")
            if parts.count == 2, let quota = Double(parts[0]), let period = Double(String(parts[1].filter { !$0.isNewline })), period > 0 {
                count = min(count, max(1, Int((quota / period).rounded(.up))))
            }
        }
        return count
    }

    static func readSmallFile(_ path: String) throws -> String {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw SocketError("open") }
        defer { Glibc.close(fd) }
        var bytes = [UInt8](repeating: 0, count: 256)
        let n = bytes.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
        guard n > 0 else { throw SocketError("read") }
        return String(decoding: bytes[0..<n], as: UTF8.self)
    }
}

