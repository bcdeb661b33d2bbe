internal import CCurl

// The `Curl` module is the only Swift module that imports CCurl: what it offers the rest of the
// package (`package` access) is typed Swift, with no libcurl C type in any declaration, so that the
// proxy's transport (`Upstream`) and the identity providers' client (`IdentityHTTP`) share one
// wrapper and neither sees libcurl's C API (docs/ARCHITECTURE.md, "Modules").

/// A failed libcurl call, with curl's own words for it.
package struct CurlError: Error, CustomStringConvertible, Sendable {
    package let code: Int
    package let message: String
    /// CURLE_OPERATION_TIMEDOUT: the transfer (or connect) ran out of time.
    package let timedOut: Bool
    /// CURLE_PEER_FAILED_VERIFICATION: the server's certificate did not verify (chain or host name).
    package var peerUnverified: Bool { code == Int(CURLE_PEER_FAILED_VERIFICATION.rawValue) }
    init(_ code: CURLcode) {
        self.code = Int(code.rawValue)
        self.message = String(cString: curl_easy_strerror(code))
        self.timedOut = code == CURLE_OPERATION_TIMEDOUT
    }
    init(multi code: CURLMcode) {
        self.code = Int(code.rawValue)
        self.message = String(cString: curl_multi_strerror(code))
        self.timedOut = false
    }
    init(share code: CURLSHcode) {
        self.code = Int(code.rawValue)
        self.message = String(cString: curl_share_strerror(code))
        self.timedOut = false
    }
    package var description: String { message }
}

/// What a send or receive on a connect-only connection did (`curl_easy_send`, `curl_easy_recv`).
package enum CurlIOResult {
    /// This many bytes went out or came in (0 on receive: the peer closed the connection).
    case done(Int)
    /// CURLE_AGAIN: nothing can move now.
    case again
    /// Any other CURLcode: the connection is unusable.
    case failed
}

/// What a blocking transfer (`CurlEasy.perform`) does with the bytes: libcurl's header, write and
/// read callbacks, called on the thread that runs `perform`.
package protocol CurlTransferDelegate: AnyObject {
    /// One header line as received, status lines included, with its CRLF.
    func curlReceived(headerLine: UnsafeRawBufferPointer)
    /// Response body bytes; false stops the transfer (`perform` then fails with CURLE_WRITE_ERROR).
    func curlReceived(body: UnsafeRawBufferPointer) -> Bool
    /// Fills `buffer` with the next request body bytes; returns how many (0: the body is complete).
    func curlSend(into buffer: UnsafeMutableRawBufferPointer) -> Int
}

/// Owns one `CURL*` easy handle, its header lines and its callback box. With CurlMulti.swift the
/// only code that touches libcurl's C API; every CURLcode of a setting is checked.
package final class CurlEasy {
    let handle: UnsafeMutableRawPointer
    /// The request's header lines as libcurl reads them: list nodes and NUL-terminated text that this
    /// handle owns and reuses, so a request costs no malloc per line (curl_slist_append would make two).
    private var nodes: UnsafeMutablePointer<curl_slist>? = nil
    private var nodeCapacity = 0
    private var text: UnsafeMutablePointer<CChar>? = nil
    private var textCapacity = 0
    /// The delegate of a blocking transfer, kept alive as long as libcurl may call it.
    private var transfer: TransferBox?
    /// A connection cache of this handle's own (`keepsConnectionApart`), cleaned up after the handle.
    private var share: UnsafeMutableRawPointer?

    package init() {
        CurlGlobal.initOnce()
        guard let h = curl_easy_init() else { fatalError("curl_easy_init failed: out of memory") }
        handle = h
    }

    deinit {
        curl_easy_cleanup(handle)
        // After the handle: a share still in use cannot be cleaned up. This closes the connection.
        if let share { curl_share_cleanup(share) }
        nodes?.deallocate()
        text?.deallocate()
    }

    /// Puts this handle's connections in a connection cache of their own (a share handle with
    /// CURL_LOCK_DATA_CONNECT) instead of the multi handle's. libcurl 7.88 counts a connect-only
    /// connection as idle in its cache once connected, and whenever a new connection is made on the
    /// multi handle it closes every "idle" one that has unread input or is older than
    /// CURLOPT_MAXAGE_CONN (118 s): connections the proxy is using (docs/ENGINE.md, "Connecting").
    /// Alone in its cache, a connection is closed only by this handle's cleanup.
    package func keepsConnectionApart() throws(CurlError) {
        guard share == nil else { return }
        guard let s = curl_share_init() else { throw CurlError(CURLE_OUT_OF_MEMORY) }
        share = s
        let shared = tp_share_connections(s)
        guard shared == CURLSHE_OK else { throw CurlError(share: shared) }
        let rc = tp_easy_setopt_ptr(handle, CURLOPT_SHARE, s)
        guard rc == CURLE_OK else { throw CurlError(rc) }
    }

    // MARK: options (only those tokenproxy sets)

    /// Options that are on or off.
    package enum Flag: Sendable {
        /// CURLOPT_NOSIGNAL: no signals (SIGALRM for DNS timeouts) in a threaded process.
        case noSignal
        /// CURLOPT_FOLLOWLOCATION.
        case followLocation
        /// CURLOPT_POST: the request has a body, read from the delegate.
        case post
        /// CURLOPT_CONNECT_ONLY: connect (DNS, TCP, proxy tunnel, TLS) and stop (docs/ENGINE.md).
        case connectOnly
        /// CURLOPT_FRESH_CONNECT: a new connection, never one from libcurl's cache.
        case freshConnect
        /// CURLOPT_TCP_NODELAY.
        case tcpNoDelay
        /// CURLOPT_TCP_KEEPALIVE: TCP keep-alive probes on the connection's socket.
        case tcpKeepAlive
        /// CURLOPT_HTTPPROXYTUNNEL: CONNECT through the HTTP proxy, whatever the scheme.
        case httpProxyTunnel
        /// CURLOPT_SSL_VERIFYPEER.
        case verifyPeer
        /// CURLOPT_SSL_VERIFYHOST (on is 2, the only value that checks the name).
        case verifyHost
        /// CURLOPT_SSLVERSION at CURL_SSLVERSION_TLSv1_2: nothing older than TLS 1.2 (RFC 8996
        /// deprecates 1.0 and 1.1); off is libcurl's default.
        case tls12OrLater

        var option: CURLoption {
            switch self {
            case .noSignal: return CURLOPT_NOSIGNAL
            case .followLocation: return CURLOPT_FOLLOWLOCATION
            case .post: return CURLOPT_POST
            case .connectOnly: return CURLOPT_CONNECT_ONLY
            case .freshConnect: return CURLOPT_FRESH_CONNECT
            case .tcpNoDelay: return CURLOPT_TCP_NODELAY
            case .tcpKeepAlive: return CURLOPT_TCP_KEEPALIVE
            case .httpProxyTunnel: return CURLOPT_HTTPPROXYTUNNEL
            case .verifyPeer: return CURLOPT_SSL_VERIFYPEER
            case .verifyHost: return CURLOPT_SSL_VERIFYHOST
            case .tls12OrLater: return CURLOPT_SSLVERSION
            }
        }
        var onValue: Int {
            switch self {
            case .verifyHost: return 2
            case .tls12OrLater: return Int(CURL_SSLVERSION_TLSv1_2)
            case .noSignal, .followLocation, .post, .connectOnly, .freshConnect, .tcpNoDelay, .tcpKeepAlive, .httpProxyTunnel, .verifyPeer:
                return 1
            }
        }
    }

    /// Options whose value is text (libcurl copies it, since 7.17, so it need not outlive the call).
    package enum Text: Sendable {
        /// CURLOPT_URL.
        case url
        /// CURLOPT_PROTOCOLS_STR: the schemes allowed, e.g. "http,https".
        case protocols
        /// CURLOPT_CUSTOMREQUEST: the method, when it is neither GET nor POST.
        case customRequest
        /// CURLOPT_PROXY (empty: no proxy, whatever the environment says).
        case proxy
        /// CURLOPT_NOPROXY.
        case noProxy
        /// CURLOPT_CAINFO.
        case caFile
        /// CURLOPT_SSLCERT.
        case clientCertFile
        /// CURLOPT_SSLKEY.
        case clientKeyFile

        var option: CURLoption {
            switch self {
            case .url: return CURLOPT_URL
            case .protocols: return CURLOPT_PROTOCOLS_STR
            case .customRequest: return CURLOPT_CUSTOMREQUEST
            case .proxy: return CURLOPT_PROXY
            case .noProxy: return CURLOPT_NOPROXY
            case .caFile: return CURLOPT_CAINFO
            case .clientCertFile: return CURLOPT_SSLCERT
            case .clientKeyFile: return CURLOPT_SSLKEY
            }
        }
    }

    /// Time limits, in milliseconds.
    package enum Timeout: Sendable {
        /// CURLOPT_TIMEOUT_MS: the whole transfer.
        case total
        /// CURLOPT_CONNECTTIMEOUT_MS: the connect phase (DNS, TCP, proxy tunnel, TLS).
        case connect

        var option: CURLoption {
            switch self {
            case .total: return CURLOPT_TIMEOUT_MS
            case .connect: return CURLOPT_CONNECTTIMEOUT_MS
            }
        }
    }

    package func set(_ flag: Flag, _ on: Bool) throws(CurlError) {
        try check(tp_easy_setopt_long(handle, flag.option, on ? flag.onValue : 0))
    }

    package func set(_ option: Text, _ value: String) throws(CurlError) {
        try check(value.withCString { tp_easy_setopt_str(handle, option.option, $0) })
    }

    package func set(_ timeout: Timeout, milliseconds: Int) throws(CurlError) {
        try check(tp_easy_setopt_long(handle, timeout.option, milliseconds))
    }

    /// CURLOPT_TCP_KEEPIDLE and CURLOPT_TCP_KEEPINTVL: the first keep-alive probe after this many
    /// idle seconds, then one every as many (with `.tcpKeepAlive` on).
    package func setKeepAliveProbes(everySeconds seconds: Int) throws(CurlError) {
        try check(tp_easy_setopt_long(handle, CURLOPT_TCP_KEEPIDLE, seconds))
        try check(tp_easy_setopt_long(handle, CURLOPT_TCP_KEEPINTVL, seconds))
    }

    /// CURLOPT_POSTFIELDSIZE_LARGE: the request body's length, sent as Content-Length.
    package func setRequestBodySize(_ bytes: Int64) throws(CurlError) {
        try check(tp_easy_setopt_off(handle, CURLOPT_POSTFIELDSIZE_LARGE, curl_off_t(bytes)))
    }

    /// CURLOPT_PRIVATE (for CurlMulti, which finds its transfers' owners by it).
    func setPrivate(_ pointer: UnsafeMutableRawPointer) throws(CurlError) {
        try check(tp_easy_setopt_ptr(handle, CURLOPT_PRIVATE, pointer))
    }

    /// Points CURLOPT_HTTPHEADER at `lines`, copied into storage this handle owns (grown when needed,
    /// never while a transfer uses it: this runs before the transfer starts).
    package func setHeaders(_ lines: HeaderLines) throws(CurlError) {
        let count = lines.count
        if count == 0 {
            try check(tp_easy_setopt_slist(handle, CURLOPT_HTTPHEADER, nil))
            return
        }
        if count > nodeCapacity {
            nodes?.deallocate()
            nodeCapacity = max(count, 2 * nodeCapacity, 16)
            nodes = UnsafeMutablePointer<curl_slist>.allocate(capacity: nodeCapacity)
        }
        let byteCount = lines.bytes.count
        if byteCount > textCapacity {
            text?.deallocate()
            textCapacity = max(byteCount, 2 * textCapacity, 1024)
            text = UnsafeMutablePointer<CChar>.allocate(capacity: textCapacity)
        }
        let nodes = self.nodes!
        let text = self.text!
        lines.bytes.withUnsafeBytes { raw in
            UnsafeMutableRawPointer(text).copyMemory(from: raw.baseAddress!, byteCount: byteCount)
        }
        var offset = 0
        for i in 0..<count {
            let end = lines.ends[i]
            nodes[i] = curl_slist(data: text + offset, next: i + 1 < count ? nodes + i + 1 : nil)
            offset = end + 1  // past the NUL
        }
        try check(tp_easy_setopt_slist(handle, CURLOPT_HTTPHEADER, nodes))
    }

    /// Sends `delegate` libcurl's header, write and read callbacks (CURLOPT_HEADERFUNCTION,
    /// CURLOPT_WRITEFUNCTION, CURLOPT_READFUNCTION); the handle keeps it until it is replaced.
    package func setTransferDelegate(_ delegate: any CurlTransferDelegate) throws(CurlError) {
        let box = TransferBox(delegate)
        transfer = box
        let user = Unmanaged.passUnretained(box).toOpaque()
        try check(tp_easy_setopt_write_cb(handle, CURLOPT_WRITEFUNCTION, transferWriteCallback))
        try check(tp_easy_setopt_write_cb(handle, CURLOPT_HEADERFUNCTION, transferHeaderCallback))
        try check(tp_easy_setopt_ptr(handle, CURLOPT_WRITEDATA, user))
        try check(tp_easy_setopt_ptr(handle, CURLOPT_HEADERDATA, user))
        try check(tp_easy_setopt_write_cb(handle, CURLOPT_READFUNCTION, transferReadCallback))
        try check(tp_easy_setopt_ptr(handle, CURLOPT_READDATA, user))
    }

    private func check(_ rc: CURLcode) throws(CurlError) {
        guard rc == CURLE_OK else { throw CurlError(rc) }
    }

    // MARK: transfers

    /// Every option back to its default (curl_easy_reset), the handle's open connections kept: the
    /// next blocking transfer to the same server reuses one.
    package func reset() {
        curl_easy_reset(handle)
        transfer = nil
    }

    /// The whole transfer, blocking (`curl_easy_perform`): for the identity providers' calls, never
    /// on an event loop.
    package func perform() throws(CurlError) {
        try check(curl_easy_perform(handle))
    }

    /// CURLINFO_RESPONSE_CODE: the last response's status (0 before one arrived).
    package func responseCode() -> Int {
        var code: Int = 0
        _ = tp_easy_getinfo_long(handle, CURLINFO_RESPONSE_CODE, &code)
        return code
    }

    /// CURLINFO_ACTIVESOCKET: the connect-only connection's socket, -1 for none.
    package func activeSocket() -> Int32 {
        var fd: curl_socket_t = -1
        _ = tp_easy_getinfo_socket(handle, CURLINFO_ACTIVESOCKET, &fd)
        return Int32(fd)
    }

    /// `curl_easy_send` on a connect-only connection (libcurl holds its TLS session).
    package func send(_ bytes: UnsafeRawBufferPointer) -> CurlIOResult {
        var n = 0
        switch curl_easy_send(handle, bytes.baseAddress, bytes.count, &n) {
        case CURLE_OK: return .done(n)
        case CURLE_AGAIN: return .again
        default: return .failed
        }
    }

    /// `curl_easy_recv` on a connect-only connection.
    package func receive(into buffer: UnsafeMutableRawBufferPointer) -> CurlIOResult {
        var n = 0
        switch curl_easy_recv(handle, buffer.baseAddress, buffer.count, &n) {
        case CURLE_OK: return .done(n)
        case CURLE_AGAIN: return .again
        default: return .failed
        }
    }
}

/// The delegate as libcurl's user pointer sees it: a class of known type, so the callbacks need no cast.
private final class TransferBox {
    let delegate: any CurlTransferDelegate
    init(_ delegate: any CurlTransferDelegate) { self.delegate = delegate }
}

// C callbacks (no captures: the delegate travels through the user pointer).

private let transferWriteCallback: @convention(c) (UnsafeMutablePointer<CChar>?, Int, Int, UnsafeMutableRawPointer?) -> Int = { ptr, size, count, user in
    let box = Unmanaged<TransferBox>.fromOpaque(user!).takeUnretainedValue()
    let n = size * count
    return box.delegate.curlReceived(body: UnsafeRawBufferPointer(start: ptr, count: n)) ? n : 0
}

private let transferHeaderCallback: @convention(c) (UnsafeMutablePointer<CChar>?, Int, Int, UnsafeMutableRawPointer?) -> Int = { ptr, size, count, user in
    let box = Unmanaged<TransferBox>.fromOpaque(user!).takeUnretainedValue()
    let n = size * count
    box.delegate.curlReceived(headerLine: UnsafeRawBufferPointer(start: ptr, count: n))
    return n
}

private let transferReadCallback: @convention(c) (UnsafeMutablePointer<CChar>?, Int, Int, UnsafeMutableRawPointer?) -> Int = { ptr, size, count, user in
    let box = Unmanaged<TransferBox>.fromOpaque(user!).takeUnretainedValue()
    guard let ptr else { return 0 }
    return box.delegate.curlSend(into: UnsafeMutableRawBufferPointer(start: ptr, count: size * count))
}

/// glibc's mallopt (malloc.h is not in the Glibc module).
@_silgen_name("mallopt")
private func glibcMallopt(_ param: Int32, _ value: Int32) -> Int32

package enum CurlGlobal {
    private static let initialized: Bool = {
        let rc = curl_global_init(Int(CURL_GLOBAL_ALL))
        precondition(rc == CURLE_OK, "curl_global_init failed")
        // glibc gives the top of a thread's malloc arena back to the kernel (madvise) whenever more
        // than 128 KiB is free there: with an HTTPS upstream, libcurl and OpenSSL free their record
        // buffers after each response, so that was one madvise (and a malloc_consolidate) per request
        // on every event loop. Keep up to 4 MiB per arena instead.
        _ = glibcMallopt(-1, 4 * 1024 * 1024)  // -1: M_TRIM_THRESHOLD
        return true
    }()
    package static func initOnce() { _ = initialized }

    /// "libcurl/7.88.1 OpenSSL/3.0.x ..." for the start-up log.
    package static var version: String { String(cString: curl_version()) }
}
