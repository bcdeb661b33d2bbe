import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// A blocking TCP client for sending exact bytes (malformed requests, pipelining, split writes)
/// and reading exactly what comes back.
// @unchecked: a connection is driven by one thread at a time (the test, or the one thread it hands the
// client to); `fd`, `buffer` and `peerClosed` are never touched from two threads at once.
public final class RawHTTPClient: @unchecked Sendable {
    private var fd: Int32
    /// Bytes received but not yet handed out as a response.
    private var buffer: [UInt8] = []
    /// The peer closed its side (read returned 0) or reset the connection.
    public private(set) var peerClosed = false
    public let defaultTimeout: TimeInterval

    public init(host: String = "127.0.0.1", port: Int, timeout: TimeInterval = 10) throws {
        defaultTimeout = timeout
        var hints = addrinfo()
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        hints.ai_family = AF_UNSPEC
        var result: UnsafeMutablePointer<addrinfo>?
        let rc = getaddrinfo(host, String(port), &hints, &result)
        guard rc == 0, let info = result else {
            throw HarnessError("getaddrinfo(\(host)) failed: \(rc)")
        }
        defer { freeaddrinfo(result) }
        let s = socket(info.pointee.ai_family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard s >= 0 else { throw HarnessError("socket: errno \(errno)") }
        if connect(s, info.pointee.ai_addr, info.pointee.ai_addrlen) != 0 {
            let e = errno
            Glibc.close(s)
            throw HarnessError("connect to \(host):\(port): \(String(cString: strerror(e)))")
        }
        var one: Int32 = 1
        setsockopt(s, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
        fd = s
    }

    /// Connects to a unix socket.
    public init(unixPath: String, timeout: TimeInterval = 10) throws {
        defaultTimeout = timeout
        let s = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard s >= 0 else { throw HarnessError("socket: errno \(errno)") }
        var addr = sockaddr_un()
        addr.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(unixPath.utf8)
        guard bytes.count < MemoryLayout.size(ofValue: addr.sun_path) else { throw HarnessError("unix path too long") }
        withUnsafeMutableBytes(of: &addr.sun_path) { raw in
            raw.copyBytes(from: bytes)
            raw[bytes.count] = 0
        }
        let ok = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(s, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        if ok != 0 {
            let e = errno
            Glibc.close(s)
            throw HarnessError("connect to unix:\(unixPath): \(String(cString: strerror(e)))")
        }
        fd = s
    }

    deinit { close() }

    public func close() {
        if fd >= 0 {
            Glibc.close(fd)
            fd = -1
        }
    }

    /// Half-closes the sending side (the server sees end of input).
    public func shutdownWrite() {
        if fd >= 0 { shutdown(fd, Int32(SHUT_WR)) }
    }

    /// Sends every byte (MSG_NOSIGNAL: a closed peer is an error, not a SIGPIPE).
    public func send(_ bytes: [UInt8]) throws {
        var offset = 0
        while offset < bytes.count {
            let n = bytes[offset...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if n < 0 {
                if errno == EINTR { continue }
                throw HarnessError("send: \(String(cString: strerror(errno)))")
            }
            offset += n
        }
    }

    public func send(_ text: String) throws {
        try send(Array(text.utf8))
    }

    /// Reads what is available, waiting until the deadline. Returns false on timeout.
    @discardableResult
    private func fill(until deadline: Date) throws -> Bool {
        guard !peerClosed else { return true }
        let remaining = deadline.timeIntervalSinceNow
        guard remaining > 0 else { return false }
        var pfd = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        let ready = poll(&pfd, 1, Int32(min(remaining * 1000, Double(Int32.max)).rounded(.up)))
        if ready < 0 {
            if errno == EINTR { return true }
            throw HarnessError("poll: \(String(cString: strerror(errno)))")
        }
        if ready == 0 { return false }
        var chunk = [UInt8](repeating: 0, count: 65536)
        let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
        if n > 0 {
            buffer.append(contentsOf: chunk[0..<n])
        } else if n == 0 {
            peerClosed = true
        } else if errno == ECONNRESET || errno == EPIPE {
            peerClosed = true
        } else if errno != EINTR && errno != EAGAIN {
            throw HarnessError("recv: \(String(cString: strerror(errno)))")
        }
        return true
    }

    /// Reads the next whole response (1xx interim responses included: call again for the final one).
    public func readResponse(method: String = "GET", timeout: TimeInterval? = nil) throws -> HTTPResponse {
        let deadline = Date().addingTimeInterval(timeout ?? defaultTimeout)
        while true {
            switch try HTTPResponseParser.parse(buffer, requestMethod: method, peerClosed: peerClosed) {
            case .complete(let response, let consumed):
                buffer.removeFirst(consumed)
                return response
            case .incomplete:
                if peerClosed {
                    throw HarnessError("connection closed before a response arrived (received: \(String(decoding: buffer, as: UTF8.self).prefix(300)))")
                }
                if try !fill(until: deadline) {
                    throw HarnessError(
                        "no whole response within the timeout (received so far: \(buffer.count) bytes: \(String(decoding: buffer.prefix(300), as: UTF8.self)))")
                }
            }
        }
    }

    /// Reads the next final response, skipping 1xx interim responses.
    public func readFinalResponse(method: String = "GET", timeout: TimeInterval? = nil) throws -> HTTPResponse {
        while true {
            let response = try readResponse(method: method, timeout: timeout)
            if !(100..<200).contains(response.status) || response.status == 101 { return response }
        }
    }

    /// Reads until the peer closes (or the timeout passes: then throws) and returns every byte
    /// received, including any not yet handed out.
    public func readUntilClose(timeout: TimeInterval? = nil) throws -> [UInt8] {
        let deadline = Date().addingTimeInterval(timeout ?? defaultTimeout)
        while !peerClosed {
            if try !fill(until: deadline) {
                throw HarnessError("the connection was still open after the timeout (\(buffer.count) bytes received)")
            }
        }
        defer { buffer.removeAll() }
        return buffer
    }

    /// True when the peer closes the connection within `timeout` (bytes that arrive meanwhile are
    /// kept for later reads).
    public func waitForClose(timeout: TimeInterval = 5) -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        while !peerClosed {
            guard (try? fill(until: deadline)) == true else { return peerClosed }
        }
        return true
    }

    /// Reads exactly `count` bytes (after a 101, the tunnel's bytes); throws when the peer closes
    /// first or the timeout passes.
    public func readBytes(_ count: Int, timeout: TimeInterval? = nil) throws -> [UInt8] {
        let deadline = Date().addingTimeInterval(timeout ?? defaultTimeout)
        while buffer.count < count {
            if peerClosed { throw HarnessError("connection closed after \(buffer.count) of \(count) bytes") }
            if try !fill(until: deadline) { throw HarnessError("only \(buffer.count) of \(count) bytes within the timeout") }
        }
        defer { buffer.removeFirst(count) }
        return Array(buffer[0..<count])
    }

    /// Bytes received and not yet handed out.
    public var pending: [UInt8] { buffer }
}

/// Builds a request's bytes: `request("GET", "/x", host: "127.0.0.1:8080", headers: [...])`.
public func rawRequest(
    _ method: String,
    _ target: String,
    host: String?,
    headers: [(String, String)] = [],
    body: [UInt8] = [],
    contentLength: Bool = true
) -> [UInt8] {
    var head = "\(method) \(target) HTTP/1.1\r\n"
    if let host { head += "Host: \(host)\r\n" }
    for (name, value) in headers { head += "\(name): \(value)\r\n" }
    if contentLength && !body.isEmpty { head += "Content-Length: \(body.count)\r\n" }
    head += "\r\n"
    return Array(head.utf8) + body
}

/// Encodes `body` with chunked transfer coding, in chunks of at most `chunkSize` bytes.
public func chunked(_ body: [UInt8], chunkSize: Int = 4096) -> [UInt8] {
    var out: [UInt8] = []
    var offset = 0
    while offset < body.count {
        let n = min(chunkSize, body.count - offset)
        out += Array((String(n, radix: 16) + "\r\n").utf8)
        out += body[offset..<(offset + n)]
        out += [13, 10]
        offset += n
    }
    out += Array("0\r\n\r\n".utf8)
    return out
}
