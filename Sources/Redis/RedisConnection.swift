import Basics
internal import CHiredis
internal import Curl
import Sockets

/// TLS settings of a `rediss://` connection: the CA bundle that verifies the server (nil: the
/// system's) and a client certificate; the server's certificate and host name are always verified.
package struct RedisTLS: Sendable, Equatable {
    package var caFile: String?
    package var clientCertFile: String?
    package var clientKeyFile: String?

    package init(caFile: String? = nil, clientCertFile: String? = nil, clientKeyFile: String? = nil) {
        self.caFile = caFile
        self.clientCertFile = clientCertFile
        self.clientKeyFile = clientKeyFile
    }
}

/// One blocking connection to a Redis server. Plain TCP goes through hiredis (`redisConnectWithTimeout`,
/// then `redisSetTimeout` for every command). TLS (`rediss://`) cannot: Debian 12's hiredis 0.14 has
/// no TLS, so libcurl makes the connection and its TLS session (CONNECT_ONLY, as the upstream engine
/// does; it verifies the certificate and the host name, never falls back to plain text) and hiredis's
/// reader parses the RESP that comes through it (docs/ARCHITECTURE.md "The store"). The only file
/// that touches hiredis's C types. Used by one thread at a time: the token thread, or a command.
package final class RedisConnection {
    private enum Transport {
        case plain(UnsafeMutablePointer<redisContext>)
        case tls(CurlEasy, reader: UnsafeMutablePointer<redisReader>)
    }

    private let transport: Transport
    package let endpoint: String
    private let commandTimeout: Double

    /// Connects within `connectTimeout` and sets `commandTimeout` for every later read and write;
    /// with `tls`, over TLS.
    package init(host: String, port: Int, connectTimeout: Double, commandTimeout: Double, tls: RedisTLS? = nil) throws(RedisConnectionError) {
        let endpoint = Authority(host: host, port: port).description
        self.endpoint = endpoint
        self.commandTimeout = commandTimeout
        if let tls {
            transport = try Self.connectTLS(host: host, endpoint: endpoint, tls: tls, timeout: connectTimeout)
            return
        }
        guard let context = tp_redis_connect(host, Int32(port), Self.milliseconds(connectTimeout)) else {
            throw RedisConnectionError(description: "redis \(endpoint): out of memory")
        }
        if tp_redis_failed(context) != 0 {
            let why = String(cString: tp_redis_error_text(context))
            tp_redis_free(context)
            throw RedisConnectionError(description: "redis \(endpoint): cannot connect: \(why)")
        }
        if tp_redis_set_timeout(context, Self.milliseconds(commandTimeout)) != 0 {
            tp_redis_free(context)
            throw RedisConnectionError(description: "redis \(endpoint): cannot set the command timeout")
        }
        // hiredis opens its socket without O_CLOEXEC: keep it out of exec'd children (credentials.command).
        try? Syscall.setCloseOnExec(tp_redis_fd(context))
        transport = .plain(context)
    }

    private static func connectTLS(host: String, endpoint: String, tls: RedisTLS, timeout: Double) throws(RedisConnectionError) -> Transport {
        let easy = CurlEasy()
        do {
            try easy.set(.noSignal, true)
            try easy.set(.connectOnly, true)
            // Redis is never reached through HTTP(S)_PROXY.
            try easy.set(.proxy, "")
            try easy.set(.protocols, "https")
            try easy.set(.url, "https://\(endpoint)/")
            // libcurl's defaults, said here because a rediss:// store must never run without them:
            // the chain and the host name verified (RFC 6125), TLS 1.2 or later (RFC 8996).
            try easy.set(.verifyPeer, true)
            try easy.set(.verifyHost, true)
            try easy.set(.tls12OrLater, true)
            try easy.set(.tcpNoDelay, true)
            try easy.set(.connect, milliseconds: milliseconds(timeout))
            if let caFile = tls.caFile { try easy.set(.caFile, caFile) }
            if let certificate = tls.clientCertFile, let key = tls.clientKeyFile {
                try easy.set(.clientCertFile, certificate)
                try easy.set(.clientKeyFile, key)
            }
            try easy.perform()
        } catch  where error.peerUnverified {
            throw RedisConnectionError(
                description: "redis \(endpoint): cannot connect over TLS: the server's certificate does not verify for the host \(host) "
                    + "(not signed by \(tls.caFile ?? "a system CA") or not naming \(host)); no plain-text fall back")
        } catch {
            throw RedisConnectionError(description: "redis \(endpoint): cannot connect over TLS: \(error.message)")
        }
        guard let reader = tp_redis_reader_create() else { throw RedisConnectionError(description: "redis \(endpoint): out of memory") }
        try? Syscall.setCloseOnExec(easy.activeSocket())
        return .tls(easy, reader: reader)
    }

    deinit {
        switch transport {
        case .plain(let context): tp_redis_free(context)
        case .tls(_, let reader): tp_redis_reader_free(reader)
        }
    }

    /// Sends one command and waits for its reply (at most the command timeout). A Redis error reply
    /// comes back as `.error`; an I/O or protocol failure throws, and the connection is then dead.
    package func command(_ arguments: [String]) throws(RedisConnectionError) -> RedisValue {
        switch transport {
        case .plain(let context):
            let bytes = arguments.map { Array($0.utf8) }
            let reply: UnsafeMutablePointer<redisReply>? = withCStrings(bytes) { pointers, lengths in
                tp_redis_command(context, Int32(pointers.count), pointers.baseAddress, lengths.baseAddress)
            }
            guard let reply else { throw failure("the command failed") }
            defer { tp_redis_reply_free(reply) }
            return Self.value(of: UnsafePointer(reply))
        case .tls(let easy, let reader):
            let deadline = Syscall.wallClock() + commandTimeout
            try sendAll(easy, RESP.command(arguments), deadline: deadline)
            while true {
                if let value = try bufferedReply(reader) { return value }
                try receive(easy, reader, deadline: deadline)
            }
        }
    }

    /// Replies that have arrived without being asked for (pub/sub messages), without waiting: the
    /// socket is read only when poll(2) says it has bytes (over TLS, when libcurl has some).
    /// Throws when the server closed the connection.
    package func pendingReplies() throws(RedisConnectionError) -> [RedisValue] {
        switch transport {
        case .plain(let context):
            return try pendingPlainReplies(context)
        case .tls(let easy, let reader):
            var out: [RedisValue] = []
            while true {
                if let value = try bufferedReply(reader) {
                    out.append(value)
                    continue
                }
                guard try receive(easy, reader, deadline: nil) else { return out }
            }
        }
    }

    // MARK: TLS

    private func sendAll(_ easy: CurlEasy, _ bytes: [UInt8], deadline: Double) throws(RedisConnectionError) {
        var sent = 0
        while sent < bytes.count {
            let result = bytes.withUnsafeBytes { easy.send(UnsafeRawBufferPointer(rebasing: $0[sent...])) }
            switch result {
            case .done(let n): sent += n
            case .again: try wait(easy, readable: false, deadline: deadline)
            case .failed: throw RedisConnectionError(description: "redis \(endpoint): the TLS connection failed while sending")
            }
        }
    }

    /// Reads what libcurl has into the reader: true when bytes came. With a deadline it waits for
    /// some; without one it answers false at once when there are none.
    @discardableResult
    private func receive(_ easy: CurlEasy, _ reader: UnsafeMutablePointer<redisReader>, deadline: Double?) throws(RedisConnectionError) -> Bool {
        // Smaller than a TLS record (16 KiB): what libcurl has decrypted and not handed over yet stays
        // in its TLS session, out of poll(2)'s sight; reading until CURLE_AGAIN, never polling first,
        // is what drains it (RedisTLSConnectionTests).
        var buffer = [UInt8](repeating: 0, count: 4 * 1024)
        while true {
            let result = buffer.withUnsafeMutableBytes { easy.receive(into: $0) }
            switch result {
            case .done(0):
                throw RedisConnectionError(description: "redis \(endpoint): the connection was closed")
            case .done(let n):
                let fed = buffer.withUnsafeBytes { raw in
                    tp_redis_reader_feed(reader, raw.baseAddress!.assumingMemoryBound(to: CChar.self), n)
                }
                if fed != 0 { throw RedisConnectionError(description: "redis \(endpoint): unreadable reply") }
                return true
            case .again:
                guard let deadline else { return false }
                try wait(easy, readable: true, deadline: deadline)
            case .failed:
                throw RedisConnectionError(description: "redis \(endpoint): the TLS connection failed while reading")
            }
        }
    }

    private func bufferedReply(_ reader: UnsafeMutablePointer<redisReader>) throws(RedisConnectionError) -> RedisValue? {
        var reply: UnsafeMutablePointer<redisReply>? = nil
        let found = tp_redis_reader_reply(reader, &reply)
        if found < 0 { throw RedisConnectionError(description: "redis \(endpoint): unreadable reply") }
        guard found == 1, let reply else { return nil }
        defer { tp_redis_reply_free(reply) }
        return Self.value(of: UnsafePointer(reply))
    }

    private func wait(_ easy: CurlEasy, readable: Bool, deadline: Double) throws(RedisConnectionError) {
        let left = deadline - Syscall.wallClock()
        let fd = easy.activeSocket()
        let ready: Bool
        do {
            ready =
                try left > 0
                && (readable
                    ? Syscall.waitReadable(fd, milliseconds: Int32(Self.milliseconds(left)))
                    : Syscall.waitWritable(fd, milliseconds: Int32(Self.milliseconds(left))))
        } catch {
            throw RedisConnectionError(description: "redis \(endpoint): \(error)")
        }
        if !ready { throw RedisConnectionError(description: "redis \(endpoint): no answer within the command timeout") }
    }

    // MARK: plain

    private func pendingPlainReplies(_ context: UnsafeMutablePointer<redisContext>) throws(RedisConnectionError) -> [RedisValue] {
        var out: [RedisValue] = []
        while true {
            var reply: UnsafeMutablePointer<redisReply>? = nil
            let found = tp_redis_buffered_reply(context, &reply)
            if found < 0 { throw failure("unreadable reply") }
            if found == 1, let reply {
                out.append(Self.value(of: UnsafePointer(reply)))
                tp_redis_reply_free(reply)
                continue
            }
            guard (try? Syscall.waitReadable(tp_redis_fd(context), milliseconds: 0)) == true else { return out }
            // Readable: bytes, or the end of the stream (then hiredis reports the error).
            if tp_redis_buffer_read(context) != 0 { throw failure("the connection was closed") }
            var again: UnsafeMutablePointer<redisReply>? = nil
            let more = tp_redis_buffered_reply(context, &again)
            if more < 0 { throw failure("unreadable reply") }
            if more == 1, let again {
                out.append(Self.value(of: UnsafePointer(again)))
                tp_redis_reply_free(again)
                continue
            }
            return out  // a partial reply: the rest comes with the next poll
        }
    }

    private func failure(_ what: String) -> RedisConnectionError {
        guard case .plain(let context) = transport else { return RedisConnectionError(description: "redis \(endpoint): \(what)") }
        let detail = tp_redis_failed(context) != 0 ? String(cString: tp_redis_error_text(context)) : what
        return RedisConnectionError(description: "redis \(endpoint): \(detail.isEmpty ? what : detail)")
    }

    private static func value(of reply: UnsafePointer<redisReply>) -> RedisValue {
        switch tp_redis_reply_kind(reply) {
        case Int32(tp_redis_string.rawValue):
            return .string(bytes(of: reply))
        case Int32(tp_redis_status.rawValue):
            return .status(String(decoding: bytes(of: reply), as: UTF8.self))
        case Int32(tp_redis_error.rawValue):
            return .error(String(decoding: bytes(of: reply), as: UTF8.self))
        case Int32(tp_redis_integer.rawValue):
            return .integer(tp_redis_reply_integer(reply))
        case Int32(tp_redis_array.rawValue):
            let count = tp_redis_reply_count(reply)
            return .array((0..<count).map { value(of: tp_redis_reply_element(reply, $0)!) })
        default:
            return .null
        }
    }

    private static func bytes(of reply: UnsafePointer<redisReply>) -> [UInt8] {
        let length = tp_redis_reply_length(reply)
        guard length > 0, let start = tp_redis_reply_bytes(reply) else { return [] }
        return start.withMemoryRebound(to: UInt8.self, capacity: length) { Array(UnsafeBufferPointer(start: $0, count: length)) }
    }

    private static func milliseconds(_ seconds: Double) -> Int {
        guard seconds.isFinite, seconds > 0 else { return 1 }
        return max(1, Int(min(seconds, 86_400) * 1000))
    }
}

/// Calls `body` with C pointers to each byte array and their lengths (binary-safe: no NUL terminator is relied on).
private func withCStrings<R>(
    _ arrays: [[UInt8]], _ body: (UnsafeBufferPointer<UnsafePointer<CChar>?>, UnsafeBufferPointer<Int>) -> R
) -> R {
    let lengths = arrays.map(\.count)
    // One buffer holding every argument, so each pointer stays valid for the call.
    var joined: [UInt8] = []
    joined.reserveCapacity(lengths.reduce(0, +) + arrays.count)
    var offsets: [Int] = []
    for array in arrays {
        offsets.append(joined.count)
        joined += array
        joined.append(0)
    }
    return joined.withUnsafeBufferPointer { buffer in
        let base = UnsafeRawPointer(buffer.baseAddress!).assumingMemoryBound(to: CChar.self)
        let pointers: [UnsafePointer<CChar>?] = offsets.map { base + $0 }
        return pointers.withUnsafeBufferPointer { p in lengths.withUnsafeBufferPointer { l in body(p, l) } }
    }
}
