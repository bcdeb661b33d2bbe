import Foundation
import Glibc
import Sockets

/// What went wrong on a test's own end of a socket: the proxy did not answer in time, or the
/// socket failed. Tests wait up to `SocketEnd.patience` for every byte, so a busy machine only
/// makes them slower.
struct SocketEndError: Error, CustomStringConvertible {
    let description: String
}

/// The test's end of one socket (a socketpair's client end, or an upstream connection the proxy
/// opened): reads and writes that wait on a thread of their own (`onOwnThread`), each with a
/// generous timeout, and the bytes read past a message kept for the next one. The one file of the
/// harness that calls the C socket functions.
final class SocketEnd {
    /// How long one read waits before the test fails; generous, for a busy parallel run.
    static let patience = 60

    let fd: Int32
    private var buffered: [UInt8] = []
    private(set) var closed = false

    init(fd: Int32) {
        self.fd = fd
        var timeout = timeval(tv_sec: SocketEnd.patience, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    }

    deinit { close() }

    /// A connected pair of unix stream sockets: the test's end (blocking) and the proxy's
    /// (non-blocking, as an accepted client socket is).
    static func pair() throws -> (test: SocketEnd, proxy: Int32) {
        var fds: [Int32] = [0, 0]
        guard socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &fds) == 0 else {
            throw SocketEndError(description: "socketpair: errno \(errno)")
        }
        _ = fcntl(fds[1], F_SETFL, fcntl(fds[1], F_GETFL) | O_NONBLOCK)
        return (SocketEnd(fd: fds[0]), fds[1])
    }

    func write(_ text: String) async throws { try await write(Array(text.utf8)) }

    func write(_ bytes: [UInt8]) async throws { try await onOwnThread { try self.blockingWrite(bytes) } }

    /// Exactly `count` bytes (fewer only when the stream ends first).
    func read(count: Int) async throws -> [UInt8] { try await onOwnThread { try self.blockingRead(count: count) } }

    /// Everything until the peer closes.
    func readToEnd() async throws -> [UInt8] { try await onOwnThread { try self.blockingReadToEnd() } }

    /// One HTTP/1.1 message (a request, or the answer to a request with `method`), framed by its
    /// Content-Length or chunked coding (RFC 9112 §6.3), or by the end of the stream; nil when
    /// the stream ends before a head.
    func readMessage(answering method: String? = nil) async throws -> HTTPMessage? {
        try await onOwnThread { try self.blockingReadMessage(answering: method) }
    }

    /// One message's head, its body left to read; nil when the stream ends before a head.
    func readMessageHead() async throws -> HTTPMessage? { try await onOwnThread { try self.blockingReadMessageHead() } }

    // MARK: the blocking calls, made on a waiting thread (`onOwnThread`), never on a test's

    func blockingWrite(_ bytes: [UInt8]) throws {
        var sent = 0
        while sent < bytes.count {
            let n = bytes.withUnsafeBytes { send(fd, $0.baseAddress! + sent, bytes.count - sent, Int32(MSG_NOSIGNAL)) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { throw SocketEndError(description: "send: errno \(errno)") }
            sent += n
        }
    }

    /// No more bytes from this end (the peer reads end of stream); reading goes on.
    func shutdownWrite() { _ = shutdown(fd, Int32(SHUT_WR)) }

    func close() {
        guard !closed else { return }
        closed = true
        _ = Glibc.close(fd)
    }

    /// Whether bytes (or the end of the stream) are waiting to be read: only for a socket the
    /// test knows the state of, never to wait.
    var hasInput: Bool {
        if !buffered.isEmpty { return true }
        var entry = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        return poll(&entry, 1, 0) == 1
    }

    /// Reads more bytes into the buffer; false at the end of the stream (or a reset).
    @discardableResult
    private func fill() throws -> Bool {
        var chunk = [UInt8](repeating: 0, count: 64 * 1024)
        while true {
            let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n > 0 {
                buffered.append(contentsOf: chunk[0..<n])
                return true
            }
            if n == 0 || errno == ECONNRESET { return false }
            if errno == EINTR { continue }
            if errno == EAGAIN || errno == EWOULDBLOCK {
                throw SocketEndError(description: "nothing came within \(SocketEnd.patience) s")
            }
            throw SocketEndError(description: "recv: errno \(errno)")
        }
    }

    func blockingRead(count: Int) throws -> [UInt8] {
        while buffered.count < count {
            guard try fill() else { break }
        }
        let taken = Array(buffered.prefix(count))
        buffered.removeFirst(taken.count)
        return taken
    }

    func blockingReadToEnd() throws -> [UInt8] {
        while try fill() {}
        defer { buffered = [] }
        return buffered
    }

    func blockingReadMessage(answering method: String? = nil) throws -> HTTPMessage? {
        guard var message = try blockingReadMessageHead() else { return nil }
        let bodiless = method == "HEAD" || [101, 204, 304].contains(message.status ?? 0) || (message.status ?? 200) < 200
        if bodiless { return message }
        if message.field("transfer-encoding")?.lowercased() == "chunked" {
            message.body = try readChunkedBody()
        } else if let length = message.field("content-length").flatMap({ Int($0) }) {
            message.body = try blockingRead(count: length)
        } else if message.status != nil {
            message.body = try blockingReadToEnd()
        }
        return message
    }

    func blockingReadMessageHead() throws -> HTTPMessage? {
        var headEnd = HTTPMessage.headEnd(in: buffered)
        while headEnd == nil {
            guard try fill() else { return nil }
            headEnd = HTTPMessage.headEnd(in: buffered)
        }
        let head = Array(buffered[0..<headEnd!])
        buffered.removeFirst(head.count)
        return HTTPMessage(head: String(decoding: head, as: UTF8.self))
    }

    private func readLine() throws -> String {
        while true {
            if let lf = buffered.firstIndex(of: 10) {
                let line = String(decoding: buffered[0..<lf], as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
                buffered.removeFirst(lf + 1)
                return line
            }
            guard try fill() else { throw SocketEndError(description: "the stream ended inside a chunked body") }
        }
    }

    private func readChunkedBody() throws -> [UInt8] {
        var body: [UInt8] = []
        while true {
            let sizeLine = try readLine()
            guard let size = Int(sizeLine.split(separator: ";")[0], radix: 16) else {
                throw SocketEndError(description: "not a chunk size: \(sizeLine)")
            }
            if size == 0 {
                while try !readLine().isEmpty {}  // trailer fields, then the empty line
                return body
            }
            body += try blockingRead(count: size)
            _ = try readLine()
        }
    }
}

/// One HTTP/1.1 message as a test end read it: the head's lines, the body without its framing.
struct HTTPMessage {
    /// The start line, then one entry per field line.
    let lines: [String]
    var body: [UInt8] = []

    init(head: String) {
        lines = head.split(separator: "\r\n", omittingEmptySubsequences: true).map(String.init)
    }

    /// The status of a response; nil for a request.
    var status: Int? {
        let parts = lines[0].split(separator: " ")
        guard parts.count >= 2, parts[0].hasPrefix("HTTP/") else { return nil }
        return Int(parts[1])
    }

    /// A request's method and target.
    var requestLine: String { lines[0] }

    var bodyText: String { String(decoding: body, as: UTF8.self) }

    /// The value of the first field named `name` (any case).
    func field(_ name: String) -> String? {
        for line in lines.dropFirst() {
            guard let colon = line.firstIndex(of: ":") else { continue }
            if line[..<colon].lowercased() == name.lowercased() {
                return line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
            }
        }
        return nil
    }

    /// Where the head ends (after its empty line) in `bytes`, if it does.
    static func headEnd(in bytes: [UInt8]) -> Int? {
        guard bytes.count >= 4 else { return nil }
        for i in 3..<bytes.count where bytes[i] == 10 && bytes[i - 1] == 13 && bytes[i - 2] == 10 && bytes[i - 3] == 13 {
            return i + 1
        }
        return nil
    }
}

/// The C calls of the fake upstream's listening socket.
enum LoopbackListener {
    /// A TCP socket listening on 127.0.0.1, on a port the system picks: the socket and its port.
    static func open() throws -> (fd: Int32, port: Int) {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw SocketEndError(description: "socket: errno \(errno)") }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0 }
        }
        guard bound, listen(fd, 16) == 0 else {
            _ = Glibc.close(fd)
            throw SocketEndError(description: "bind or listen: errno \(errno)")
        }
        return (fd, Int(UInt16(bigEndian: address.sin_port)))
    }

    static func accept(_ listener: Int32) throws -> SocketEnd {
        let fd = Glibc.accept(listener, nil, nil)
        guard fd >= 0 else { throw SocketEndError(description: "accept: errno \(errno)") }
        return SocketEnd(fd: fd)
    }

    /// The first of `fds` with input (or a connection to accept), waiting up to `SocketEnd.patience`.
    static func firstReadable(_ fds: [Int32]) throws -> Int32 {
        var entries = fds.map { pollfd(fd: $0, events: Int16(POLLIN), revents: 0) }
        while true {
            let n = poll(&entries, nfds_t(entries.count), Int32(SocketEnd.patience * 1000))
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { throw SocketEndError(description: "the proxy sent nothing upstream within \(SocketEnd.patience) s") }
            return entries.first { $0.revents != 0 }!.fd
        }
    }

    static func close(_ fd: Int32) { _ = Glibc.close(fd) }
}

extension SocketEnd {
    /// `count` bytes that repeat with a period no buffer size divides, so a lost, doubled or
    /// reordered piece shows.
    static func pattern(_ count: Int) -> [UInt8] { (0..<count).map { UInt8($0 % 251) } }

    /// Writes `bytes` on another thread, for a transfer larger than the sockets and the proxy hold:
    /// the test reads the other end meanwhile, then `wait()`s for the writer.
    func writeInBackground(_ bytes: [UInt8]) -> BackgroundWrite {
        let write = BackgroundWrite()
        let me = UncheckedEnd(end: self)
        do {
            // A thread of its own, not Dispatch's pool, which may be the one Swift concurrency uses.
            try OSThread.start(name: "tp-test-write") { write.finish(Result { try me.end.blockingWrite(bytes) }) }
        } catch {
            write.finish(.failure(error))
        }
        return write
    }
}

/// A `SocketEnd` handed to the one writer thread of `writeInBackground`; @unchecked Sendable: the
/// test's thread only reads the other end of the connection until `BackgroundWrite.wait()` returns.
private struct UncheckedEnd: @unchecked Sendable {
    let end: SocketEnd
}

/// A write running on another thread, and how it ended.
final class BackgroundWrite: @unchecked Sendable {
    // @unchecked: `outcome` is written once before `done` is signalled and read only after.
    private let done = DispatchSemaphore(value: 0)
    private var outcome: Result<Void, any Error>?

    fileprivate func finish(_ outcome: Result<Void, any Error>) {
        self.outcome = outcome
        done.signal()
    }

    /// Returns when the write ended; throws what it threw.
    func wait() async throws { try await onOwnThread { try self.blockingWait() } }

    private func blockingWait() throws {
        guard done.wait(timeout: .now() + .seconds(SocketEnd.patience)) == .success else {
            throw SocketEndError(description: "the background write did not end within \(SocketEnd.patience) s")
        }
        try outcome!.get()
    }
}
