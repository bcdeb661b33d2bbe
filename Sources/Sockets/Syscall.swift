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

/// The errno values that callers outside this module tell apart (they do not import Glibc).
public enum SocketErrno {
    public static let addressInUse = EADDRINUSE
    public static let addressNotAvailable = EADDRNOTAVAIL
    public static let familyUnsupported = EAFNOSUPPORT
}

/// What a non-blocking read or write achieved.
public enum IOResult: Equatable {
    case done(Int)
    case wouldBlock
    /// Peer closed (read returned 0) or the connection broke (EPIPE, ECONNRESET).
    case closed
}

/// Every system call goes through here: EINTR is retried in one place (`uninterrupted`), EAGAIN on
/// a socket becomes `.wouldBlock`, and EBADF/EFAULT stop the process in `retrying` because they mean
/// a bug in the caller. The other modules never import Glibc (docs/ARCHITECTURE.md, "Modules").
public enum Syscall {
    /// Runs `body`, a C call that answers -1 and sets errno on failure, again while it is interrupted
    /// by a signal (EINTR); returns its non-negative answer or throws the failure with its errno.
    @inline(__always)
    public static func retrying(_ call: String, _ body: () -> Int) throws(SocketError) -> Int {
        let (r, e) = uninterrupted(body)
        if r >= 0 { return r }
        precondition(e != EBADF && e != EFAULT, "\(call) on a bad descriptor or address (bug)")
        throw SocketError(call, errno: e)
    }

    /// The one EINTR loop: `body` again while a signal interrupts it; its answer, and the errno
    /// when it failed (0 otherwise).
    @inline(__always)
    static func uninterrupted(_ body: () -> Int) -> (result: Int, errno: Int32) {
        while true {
            let r = body()
            if r >= 0 { return (r, 0) }
            let e = Glibc.errno
            if e != EINTR { return (r, e) }
        }
    }

    /// The text of an errno value (strerror), for messages.
    public static func describe(errno code: Int32) -> String {
        guard let text = strerror(code) else { return "errno \(code)" }
        return String(cString: text)
    }

    /// Seconds since the epoch (CLOCK_REALTIME), without Foundation.
    public static func wallClock() -> Double {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
    }

    /// The calendar time of the wall clock, UTC, for log lines: whole seconds and milliseconds.
    public static func wallClockParts() -> (seconds: Int, milliseconds: Int) {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        return (Int(ts.tv_sec), Int(ts.tv_nsec) / 1_000_000)
    }

    /// Sleeps the calling thread for `seconds`, the whole time even when signals interrupt it.
    public static func sleep(_ seconds: Double) {
        guard seconds > 0 else { return }
        var request = timespec(tv_sec: Int(seconds), tv_nsec: Int((seconds - Double(Int(seconds))) * 1e9))
        var remaining = timespec()
        _ = uninterrupted {
            let r = nanosleep(&request, &remaining)
            if r != 0 { request = remaining }  // interrupted: sleep what is left
            return Int(r)
        }
    }

    /// An environment variable of this process (getenv), without Foundation.
    public static func environment(_ name: String) -> String? {
        getenv(name).map { String(cString: $0) }
    }

    /// write(2) of all of `bytes` to a file or pipe (not a socket: `write` sends with MSG_NOSIGNAL),
    /// across short writes and interruptions.
    public static func writeAll(_ fd: Int32, _ bytes: UnsafeRawBufferPointer, call: String = "write") throws(SocketError) {
        guard let base = bytes.baseAddress else { return }
        var offset = 0
        while offset < bytes.count {
            offset += try retrying(call) { Glibc.write(fd, base + offset, bytes.count - offset) }
        }
    }

    /// Keeps `fd` out of exec'd children (FD_CLOEXEC), for a descriptor a library opened without it.
    public static func setCloseOnExec(_ fd: Int32) throws(SocketError) {
        let flags = try retrying("fcntl") { Int(fcntl(fd, F_GETFD)) }
        _ = try retrying("fcntl") { Int(fcntl(fd, F_SETFD, Int32(flags) | FD_CLOEXEC)) }
    }

    /// Waits up to `milliseconds` (-1: no limit) for `fd` to become readable; false on the timeout.
    public static func waitReadable(_ fd: Int32, milliseconds: Int32) throws(SocketError) -> Bool {
        var descriptor = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        return try retrying("poll") { Int(poll(&descriptor, 1, milliseconds)) } > 0
    }

    /// Waits up to `milliseconds` for `fd` to take more bytes; false on the timeout.
    public static func waitWritable(_ fd: Int32, milliseconds: Int32) throws(SocketError) -> Bool {
        var descriptor = pollfd(fd: fd, events: Int16(POLLOUT), revents: 0)
        return try retrying("poll") { Int(poll(&descriptor, 1, milliseconds)) } > 0
    }

    /// A socket read: any failure but EAGAIN ends the connection (ECONNRESET and the like).
    public static func read(_ fd: Int32, _ buffer: UnsafeMutableRawBufferPointer) -> IOResult {
        let (n, e) = uninterrupted { Glibc.read(fd, buffer.baseAddress, buffer.count) }
        if n > 0 { return .done(n) }
        if n == 0 { return .closed }
        return e == EAGAIN || e == EWOULDBLOCK ? .wouldBlock : .closed
    }

    /// `send` with MSG_NOSIGNAL: a closed peer is an error, never a SIGPIPE.
    public static func write(_ fd: Int32, _ buffer: UnsafeRawBufferPointer) -> IOResult {
        let (n, e) = uninterrupted { Glibc.send(fd, buffer.baseAddress, buffer.count, Int32(MSG_NOSIGNAL)) }
        if n >= 0 { return .done(n) }
        return e == EAGAIN || e == EWOULDBLOCK ? .wouldBlock : .closed
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
        let flags = try retrying("fcntl") { Int(fcntl(fd, F_GETFL)) }
        _ = try retrying("fcntl") { Int(fcntl(fd, F_SETFL, Int32(flags) | O_NONBLOCK)) }
    }

    public static func setOption(_ fd: Int32, _ level: Int32, _ name: Int32, _ value: Int32) throws {
        var v = value
        _ = try retrying("setsockopt") { Int(setsockopt(fd, level, name, &v, socklen_t(MemoryLayout<Int32>.size))) }
    }

    /// Number of CPUs this process may run on: its affinity mask, lowered by a cgroup v2 CPU quota.
    public static func usableCPUCount() -> Int {
        var count = Int(tp_cpu_count())
        if count <= 0 { count = max(1, sysconf(Int32(_SC_NPROCESSORS_ONLN))) }
        if case .success(let bytes) = SmallFile.read("/sys/fs/cgroup/cpu.max", limit: 256) {
            let parts = String(decoding: bytes, as: UTF8.self).split(separator: " ")
            if parts.count == 2, let quota = Double(parts[0]), let period = Double(String(parts[1].filter { !$0.isNewline })), period > 0 {
                count = min(count, max(1, Int((quota / period).rounded(.up))))
            }
        }
        return count
    }
}
