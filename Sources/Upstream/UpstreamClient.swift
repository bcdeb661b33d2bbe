internal import CCurl
import Glibc
import HTTP1
import Sockets

/// How upstream transfers are made (from `upstream_tls` and `limits`).
public struct UpstreamSettings: Sendable {
    public var caFile: String?
    public var clientCertFile: String?
    public var clientKeyFile: String?
    public var insecureSkipVerify: Bool
    /// Until the response head arrives (connect included).
    public var headTimeout: Double
    public var proxy: ProxyEnvironment

    public init(
        caFile: String? = nil, clientCertFile: String? = nil, clientKeyFile: String? = nil, insecureSkipVerify: Bool = false,
        headTimeout: Double = 60, proxy: ProxyEnvironment = ProxyEnvironment(proxy: "", noProxy: "")
    ) {
        self.caFile = caFile
        self.clientCertFile = clientCertFile
        self.clientKeyFile = clientKeyFile
        self.insecureSkipVerify = insecureSkipVerify
        self.headTimeout = headTimeout
        self.proxy = proxy
    }
}

/// The proxy curl would use for one URL scheme, read from the environment once (CONTRACT: upstream
/// calls honour HTTPS_PROXY / HTTP_PROXY / NO_PROXY as curl does). Given to libcurl explicitly,
/// so that it does not read five environment variables again for every request.
public struct ProxyEnvironment: Sendable, Equatable {
    /// The proxy URL; empty for none.
    public let proxy: String
    /// Where `proxy` came from (a variable's name), nil for none.
    public let source: String?
    /// Hosts that bypass the proxy (curl's NO_PROXY syntax); empty for none.
    public let noProxy: String

    public init(proxy: String, source: String? = nil, noProxy: String) {
        self.proxy = proxy
        self.source = source
        self.noProxy = noProxy
    }

    /// As curl reads them: `http_proxy` in lower case only (the upper-case name can be set by a CGI
    /// request's `Proxy:` header), `https_proxy` or `HTTPS_PROXY`, then `all_proxy` or `ALL_PROXY`.
    public init(scheme: String, environment: (String) -> String? = ProxyEnvironment.processEnvironment) {
        let names = scheme == "https" ? ["https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"] : ["http_proxy", "all_proxy", "ALL_PROXY"]
        var found: (String, String)?
        for name in names {
            if let value = environment(name), !value.isEmpty {
                found = (value, name)
                break
            }
        }
        proxy = found?.0 ?? ""
        source = found?.1
        noProxy = environment("no_proxy") ?? environment("NO_PROXY") ?? ""
    }

    public static func processEnvironment(_ name: String) -> String? {
        getenv(name).map { String(cString: $0) }
    }
}

/// One request as libcurl should send it: nothing is added that is not listed here.
public struct UpstreamRequest {
    public enum Body: Equatable { case none, length(Int), streamed }
    public var url: String
    public var method: String
    /// Complete header lines ("Name: value"), and "Name:" lines that stop libcurl adding its own.
    public var headerLines: HeaderLines
    public var body: Body

    public init(url: String, method: String, headerLines: HeaderLines, body: Body) {
        self.url = url
        self.method = method
        self.headerLines = headerLines
        self.body = body
    }
}

public enum UpstreamBodyRead {
    case bytes(Int)
    /// Nothing buffered now; call `resumeSending()` when there is.
    case pause
    case end
}

public enum UpstreamFailure: Error, Sendable, CustomStringConvertible {
    /// Could not connect, resolve, or complete TLS.
    case unreachable(String)
    /// No response head within `headTimeout`.
    case timedOut
    /// The upstream answered something that is not HTTP, or broke the connection.
    case badResponse(String)

    public var description: String {
        switch self {
        case .unreachable(let m): return "upstream unreachable: \(m)"
        case .timedOut: return "no response head from the upstream in time"
        case .badResponse(let m): return "bad upstream response: \(m)"
        }
    }
}

/// What a transfer tells its owner. All calls happen on the event loop's thread.
public protocol UpstreamDelegate: AnyObject {
    /// The final response head (1xx interim heads are dropped). Its storage is the transfer's: keep a
    /// copy (a value copy, which shares the bytes until either side changes) to use it later.
    func upstreamDidReceiveHead(_ head: ResponseHead)
    /// Response body bytes (decoded from chunked). Return false to pause: the same bytes come
    /// again after `resumeReceiving()`.
    func upstreamDidReceiveBody(_ bytes: UnsafeRawBufferPointer) -> Bool
    /// libcurl has returned after delivering this transfer's response head: what the head callback
    /// buffered can go out now (together with any body bytes that came in the same call).
    func upstreamCallbacksEnded()
    /// Fills `buffer` with request body bytes.
    func upstreamReadBody(into buffer: UnsafeMutableRawBufferPointer) -> UpstreamBodyRead
    /// The transfer ended: nil on success. Not called after `cancel()`.
    func upstreamDidComplete(_ failure: UpstreamFailure?)
}

/// One libcurl multi handle driven by one event loop through the multi socket API: curl's
/// sockets sit in the loop's epoll beside the client sockets, and its timer is a loop timer.
public final class UpstreamClient {
    let loop: EventLoop
    let settings: UpstreamSettings
    let multi: UnsafeMutableRawPointer
    /// libcurl's one timeout (CURLMOPT_TIMERFUNCTION), absolute monotonic seconds; nil: none wanted.
    private var curlDeadline: Double?
    /// The deadline of the loop timer armed for libcurl, if any. A later libcurl deadline does not
    /// move it: it fires, sees the new deadline and re-arms, so the loop's heap holds no cancelled entries.
    private var armedDeadline: Double?
    private var immediatePosted = false
    private var idleHandles: [CurlEasy] = []
    /// The watcher of each libcurl socket, watched now or parked (see `CurlSocketWatcher`).
    var watchers: [Int32: CurlSocketWatcher] = [:]
    /// Transfers that delivered a response head during the current call into libcurl.
    var headsDelivered: [UpstreamTransfer] = []
    private var headsDeliveredSpare: [UpstreamTransfer] = []
    /// Depth of calls into libcurl; a transfer cancelled inside a callback is removed afterwards.
    var callbackDepth = 0
    private var running: Int32 = 0

    public init(loop: EventLoop, settings: UpstreamSettings) {
        CurlGlobal.initOnce()
        self.loop = loop
        self.settings = settings
        guard let m = curl_multi_init() else { fatalError("curl_multi_init failed: out of memory") }
        multi = m
        let me = Unmanaged.passUnretained(self).toOpaque()
        _ = tp_multi_setopt_socket_cb(multi, curlSocketCallback)
        _ = tp_multi_setopt_ptr(multi, CURLMOPT_SOCKETDATA, me)
        _ = tp_multi_setopt_timer_cb(multi, curlTimerCallback)
        _ = tp_multi_setopt_ptr(multi, CURLMOPT_TIMERDATA, me)
        // Idle upstream connections kept for reuse per loop.
        _ = tp_multi_setopt_long(multi, CURLMOPT_MAXCONNECTS, 512)
    }

    deinit {
        curl_multi_cleanup(multi)
    }

    public static var libcurlVersion: String { CurlGlobal.version }

    /// Starts a transfer. Its callbacks reach `delegate` on this loop.
    public func start(_ request: UpstreamRequest, delegate: UpstreamDelegate) throws -> UpstreamTransfer {
        let easy = idleHandles.popLast() ?? CurlEasy()
        easy.responseHead.status = 0
        easy.responseHead.removeFields()
        let transfer = UpstreamTransfer(client: self, easy: easy, delegate: delegate)
        do {
            try configure(easy, for: request, transfer: transfer)
        } catch {
            idleHandles.append(easy)
            throw error
        }
        transfer.retained = Unmanaged.passRetained(transfer)
        let rc = curl_multi_add_handle(multi, easy.handle)
        guard rc == CURLM_OK else {
            transfer.retained?.release()
            transfer.retained = nil
            idleHandles.append(easy)
            throw CurlError(multi: rc)
        }
        transfer.startedAt = loop.now
        return transfer
    }

    private func configure(_ easy: CurlEasy, for request: UpstreamRequest, transfer: UpstreamTransfer) throws {
        if !easy.configured {
            // Options that never change for this handle: set once (ARCHITECTURE.md speed budget).
            try easy.set(CURLOPT_NOSIGNAL, 1)
            try easy.set(CURLOPT_PROTOCOLS_STR, "http,https")
            try easy.set(CURLOPT_FOLLOWLOCATION, 0)  // redirects go back to the client (CONTRACT point 7)
            try easy.set(CURLOPT_PATH_AS_IS, 1)  // the proxy already removed dot-segments
            try easy.set(CURLOPT_HTTP_VERSION, Int(CURL_HTTP_VERSION_1_1))
            try easy.set(CURLOPT_HTTP_TRANSFER_DECODING, 1)
            try easy.set(CURLOPT_HTTP_CONTENT_DECODING, 0)
            try easy.set(CURLOPT_BUFFERSIZE, 64 * 1024)
            try easy.set(CURLOPT_UPLOAD_BUFFERSIZE, 64 * 1024)
            try easy.set(CURLOPT_TCP_NODELAY, 1)
            try easy.set(CURLOPT_CONNECTTIMEOUT_MS, Int(settings.headTimeout * 1000))
            try easy.set(CURLOPT_SUPPRESS_CONNECT_HEADERS, 1)
            try easy.set(CURLOPT_PROXY, settings.proxy.proxy)
            try easy.set(CURLOPT_NOPROXY, settings.proxy.noProxy)
            if let ca = settings.caFile { try easy.set(CURLOPT_CAINFO, ca) }
            if let cert = settings.clientCertFile { try easy.set(CURLOPT_SSLCERT, cert) }
            if let key = settings.clientKeyFile { try easy.set(CURLOPT_SSLKEY, key) }
            if settings.insecureSkipVerify {
                try easy.set(CURLOPT_SSL_VERIFYPEER, 0)
                try easy.set(CURLOPT_SSL_VERIFYHOST, 0)
            }
            try easy.setDataCallback(CURLOPT_WRITEFUNCTION, curlWriteCallback)
            try easy.setDataCallback(CURLOPT_HEADERFUNCTION, curlHeaderCallback)
            try easy.setDataCallback(CURLOPT_READFUNCTION, curlReadCallback)
            easy.configured = true
        }
        let me = Unmanaged.passUnretained(transfer).toOpaque()
        try easy.set(CURLOPT_WRITEDATA, pointer: me)
        try easy.set(CURLOPT_HEADERDATA, pointer: me)
        try easy.set(CURLOPT_READDATA, pointer: me)
        try easy.set(CURLOPT_PRIVATE, pointer: me)
        try easy.set(CURLOPT_URL, request.url)
        // Method and body: reset to GET, then say exactly what this request is.
        try easy.set(CURLOPT_HTTPGET, 1)
        switch request.body {
        case .none:
            break
        case .length(let n):
            try easy.set(CURLOPT_UPLOAD, 1)
            try easy.set(CURLOPT_INFILESIZE_LARGE, int64: Int64(n))
        case .streamed:
            try easy.set(CURLOPT_UPLOAD, 1)
            try easy.set(CURLOPT_INFILESIZE_LARGE, int64: -1)  // chunked to the upstream
        }
        if request.method == "HEAD" {
            try easy.set(CURLOPT_NOBODY, 1)
            try easy.set(CURLOPT_CUSTOMREQUEST, nil as String?)
        } else if request.method == "GET" && request.body == .none {
            try easy.set(CURLOPT_CUSTOMREQUEST, nil as String?)
        } else {
            try easy.set(CURLOPT_CUSTOMREQUEST, request.method)
        }
        try easy.setHeaders(request.headerLines)
    }

    // MARK: driving libcurl

    func socketAction(_ fd: Int32, _ events: UInt32) {
        var flags: Int32 = 0
        if events & ReadyEvents.readable != 0 { flags |= CURL_CSELECT_IN }
        if events & ReadyEvents.writable != 0 { flags |= CURL_CSELECT_OUT }
        if events & ReadyEvents.failed != 0 { flags |= CURL_CSELECT_ERR }
        callbackDepth += 1
        _ = curl_multi_socket_action(multi, fd, flags, &running)
        callbackDepth -= 1
        collectFinished()
        callbacksEnded()
    }

    func timerFired() {
        callbackDepth += 1
        _ = curl_multi_socket_action(multi, tp_socket_timeout(), 0, &running)
        callbackDepth -= 1
        collectFinished()
        callbacksEnded()
    }

    /// Tells the transfers that delivered a head in the call that just returned.
    func callbacksEnded() {
        guard !headsDelivered.isEmpty, callbackDepth == 0 else { return }
        swap(&headsDelivered, &headsDeliveredSpare)
        for transfer in headsDeliveredSpare where !transfer.done {
            transfer.delegate?.upstreamCallbacksEnded()
        }
        headsDeliveredSpare.removeAll(keepingCapacity: true)
    }

    /// CURLMOPT_TIMERFUNCTION: each call replaces the previous timeout; -1 removes it.
    func setTimer(_ ms: Int) {
        guard ms >= 0 else {
            curlDeadline = nil
            return
        }
        if ms == 0 {
            // "Call me at once" (after every curl_multi_add_handle): the loop's immediate queue.
            curlDeadline = 0
            if !immediatePosted {
                immediatePosted = true
                loop.schedule(after: 0) { [self] in
                    self.immediatePosted = false
                    self.timerDue()
                }
            }
            return
        }
        let deadline = EventLoop.monotonicNow() + Double(ms) / 1000
        curlDeadline = deadline
        if let armed = armedDeadline, armed <= deadline { return }
        arm(deadline)
    }

    private func arm(_ deadline: Double) {
        armedDeadline = deadline
        loop.schedule(after: max(0.000_001, deadline - EventLoop.monotonicNow())) { [self] in
            guard self.armedDeadline == deadline else { return }
            self.armedDeadline = nil
            self.timerDue()
        }
    }

    private func timerDue() {
        guard let deadline = curlDeadline else { return }
        if deadline > EventLoop.monotonicNow() + 0.000_5 {
            // libcurl moved its timeout later since this timer was armed.
            if armedDeadline == nil || armedDeadline! > deadline { arm(deadline) }
            return
        }
        curlDeadline = nil
        timerFired()
    }

    private func collectFinished() {
        var left: Int32 = 0
        while let msg = curl_multi_info_read(multi, &left) {
            guard msg.pointee.msg == CURLMSG_DONE else { continue }
            var raw: UnsafeMutableRawPointer? = nil
            _ = tp_easy_getinfo_ptr(msg.pointee.easy_handle, CURLINFO_PRIVATE, &raw)
            let result = tp_msg_result(msg)
            guard let raw else { continue }
            let transfer = Unmanaged<UpstreamTransfer>.fromOpaque(raw).takeUnretainedValue()
            transfer.finished(result)
        }
    }

    /// Takes the handle out of the multi and keeps it for the next transfer.
    func detach(_ transfer: UpstreamTransfer) {
        _ = curl_multi_remove_handle(multi, transfer.easy.handle)
        idleHandles.append(transfer.easy)
        transfer.retained?.release()
        transfer.retained = nil
    }
}

/// One request in flight upstream.
public final class UpstreamTransfer {
    unowned let client: UpstreamClient
    let easy: CurlEasy
    /// Strong, not weak (a weak reference costs a side table per request); cleared when the transfer
    /// ends or is cancelled, which breaks the cycle with the delegate.
    var delegate: UpstreamDelegate?
    var retained: Unmanaged<UpstreamTransfer>?
    /// When the transfer started (loop time), for the head timeout.
    var startedAt = 0.0
    private var pauseMask: Int32 = 0
    public private(set) var headDelivered = false
    fileprivate(set) var done = false
    private var badHead: String?

    init(client: UpstreamClient, easy: CurlEasy, delegate: UpstreamDelegate) {
        self.client = client
        self.easy = easy
        self.delegate = delegate
    }

    /// True while libcurl holds response bytes for the client (it is not reading the upstream).
    public var isReceivePaused: Bool { pauseMask & CURLPAUSE_RECV != 0 }

    public func resumeReceiving() { unpause(CURLPAUSE_RECV) }
    public func resumeSending() { unpause(CURLPAUSE_SEND) }

    private func unpause(_ bit: Int32) {
        guard !done, pauseMask & bit != 0 else { return }
        pauseMask &= ~bit
        client.callbackDepth += 1
        // May call the write or read callback right away (libcurl delivers what it held).
        _ = easy.pause(pauseMask)
        client.callbackDepth -= 1
        client.callbacksEnded()
    }

    /// Stops the transfer without telling the delegate. Safe inside delegate callbacks.
    public func cancel() {
        guard !done else { return }
        done = true
        delegate = nil
        if client.callbackDepth > 0 {
            // Not from inside libcurl: remove on the next loop turn; callbacks return abort until then.
            client.loop.schedule(after: 0) { [self] in client.detach(self) }
        } else {
            client.detach(self)
        }
    }

    /// Ends the transfer with `.timedOut` when no response head came within `headTimeout` of its
    /// start. The owner calls this from its periodic sweep (no per-request loop timer). Returns
    /// true when it ended the transfer.
    @discardableResult
    public func checkHeadTimeout(now: Double) -> Bool {
        guard !done, !headDelivered, now - startedAt > client.settings.headTimeout else { return false }
        headTimedOut()
        return true
    }

    func headTimedOut() {
        guard !done, !headDelivered else { return }
        let delegate = self.delegate
        cancel()
        delegate?.upstreamDidComplete(.timedOut)
    }

    func finished(_ result: CURLcode) {
        guard !done else { return }
        done = true
        let delegate = self.delegate
        self.delegate = nil
        client.detach(self)
        guard let delegate else { return }
        if result == CURLE_OK {
            if !headDelivered {
                delegate.upstreamDidComplete(.badResponse(badHead ?? "no response head"))
            } else {
                delegate.upstreamDidComplete(nil)
            }
            return
        }
        let message = String(cString: curl_easy_strerror(result))
        switch result {
        case CURLE_COULDNT_CONNECT, CURLE_COULDNT_RESOLVE_HOST, CURLE_COULDNT_RESOLVE_PROXY, CURLE_SSL_CONNECT_ERROR,
            CURLE_PEER_FAILED_VERIFICATION, CURLE_SSL_CERTPROBLEM, CURLE_SSL_CIPHER, CURLE_SSL_CACERT_BADFILE,
            CURLE_SEND_ERROR where !headDelivered:
            delegate.upstreamDidComplete(.unreachable(message))
        case CURLE_OPERATION_TIMEDOUT where !headDelivered:
            delegate.upstreamDidComplete(.timedOut)
        default:
            delegate.upstreamDidComplete(.badResponse(badHead ?? message))
        }
    }

    // MARK: callbacks from libcurl

    func header(_ line: UnsafeRawBufferPointer) -> Int {
        guard !done else { return 0 }
        let bytes = ResponseHeadLine.withoutLineEnd(line)
        if bytes.isEmpty {
            // 1xx heads are interim (RFC 9110 §15.2): wait for the final one.
            if easy.responseHead.status >= 200 && !headDelivered {
                headDelivered = true
                client.headsDelivered.append(self)
                delegate?.upstreamDidReceiveHead(easy.responseHead)
                if done { return 0 }
            }
        } else if ResponseHeadLine.isStatusLine(bytes) {
            // The start of a (possibly interim) response head.
            guard case .status(_, let code, let reason) = ResponseHeadLine.parse(bytes) else {
                badHead = "malformed status line"
                return 0
            }
            easy.responseHead.removeFields()
            easy.responseHead.status = code
            easy.responseHead.reason = reason
        } else if !easy.responseHead.append(fieldLine: bytes) {
            // Not forwarded as it is (RFC 9112 §5.2 obs-fold, control characters): a bad response.
            badHead = easy.responseHead.status == 0 ? "malformed status line" : "malformed header line"
            return 0
        }
        return line.count
    }

    func write(_ bytes: UnsafeRawBufferPointer) -> Int {
        guard !done, let delegate else { return 0 }
        if delegate.upstreamDidReceiveBody(bytes) { return bytes.count }
        pauseMask |= CURLPAUSE_RECV
        return tp_writefunc_pause()
    }

    func read(_ buffer: UnsafeMutableRawBufferPointer) -> Int {
        guard !done, let delegate else { return tp_readfunc_abort() }
        switch delegate.upstreamReadBody(into: buffer) {
        case .bytes(let n): return n
        case .end: return 0
        case .pause:
            pauseMask |= CURLPAUSE_SEND
            return tp_readfunc_pause()
        }
    }
}

// MARK: C callbacks (no captures: state travels through the user pointers)

private let curlWriteCallback: @convention(c) (UnsafeMutablePointer<CChar>?, Int, Int, UnsafeMutableRawPointer?) -> Int = { ptr, size, count, user in
    let transfer = Unmanaged<UpstreamTransfer>.fromOpaque(user!).takeUnretainedValue()
    return transfer.write(UnsafeRawBufferPointer(start: ptr, count: size * count))
}

private let curlHeaderCallback: @convention(c) (UnsafeMutablePointer<CChar>?, Int, Int, UnsafeMutableRawPointer?) -> Int = { ptr, size, count, user in
    let transfer = Unmanaged<UpstreamTransfer>.fromOpaque(user!).takeUnretainedValue()
    return transfer.header(UnsafeRawBufferPointer(start: ptr, count: size * count))
}

private let curlReadCallback: @convention(c) (UnsafeMutablePointer<CChar>?, Int, Int, UnsafeMutableRawPointer?) -> Int = { ptr, size, count, user in
    let transfer = Unmanaged<UpstreamTransfer>.fromOpaque(user!).takeUnretainedValue()
    return transfer.read(UnsafeMutableRawBufferPointer(start: ptr, count: size * count))
}

/// Watches one of libcurl's sockets in the loop's epoll. When libcurl stops watching a socket (a
/// kept-alive upstream connection between two requests: CURL_POLL_REMOVE after every transfer), the
/// watcher is parked instead of removed: it stays in epoll and in `UpstreamClient.watchers`, so the
/// next request on that connection costs one epoll_ctl(MOD) rather than an allocation, a DEL and an ADD.
final class CurlSocketWatcher: EventHandler {
    let fd: Int32
    unowned let client: UpstreamClient
    var parked = false
    var interest: Interest = []
    init(fd: Int32, client: UpstreamClient) {
        self.fd = fd
        self.client = client
    }
    func handleEvents(_ events: UInt32) {
        if parked {
            // The idle connection stirred (the upstream closed it, or sent something unasked): stop
            // watching; libcurl checks the connection itself before it reuses it.
            client.forget(self)
            return
        }
        client.socketAction(fd, events)
    }
}

extension UpstreamClient {
    func forget(_ watcher: CurlSocketWatcher) {
        if watchers[watcher.fd] === watcher { watchers[watcher.fd] = nil }
        loop.unregister(watcher.fd, watcher)
    }
}

private let curlSocketCallback: @convention(c) (UnsafeMutableRawPointer?, curl_socket_t, Int32, UnsafeMutableRawPointer?, UnsafeMutableRawPointer?) -> Int32 = { _, fd, what, user, _ in
    let client = Unmanaged<UpstreamClient>.fromOpaque(user!).takeUnretainedValue()
    if what == CURL_POLL_REMOVE {
        if let watcher = client.watchers[fd] {
            if client.loop.isRegistered(fd, watcher) {
                watcher.parked = true
            } else {
                client.watchers[fd] = nil
            }
        }
        return 0
    }
    var interest: Interest = []
    if what & CURL_POLL_IN != 0 { interest.insert(.read) }
    if what & CURL_POLL_OUT != 0 { interest.insert(.write) }
    if let watcher = client.watchers[fd], client.loop.isRegistered(fd, watcher) {
        // Known: either watched now (interest changes) or parked (the fd may have been closed and
        // its number reused since, so MOD falls back to ADD).
        if watcher.parked || watcher.interest != interest {
            do {
                try client.loop.reregister(fd, interest, watcher)
            } catch {
                client.watchers[fd] = nil
                return -1
            }
            watcher.parked = false
            watcher.interest = interest
        }
        return 0
    }
    let watcher = CurlSocketWatcher(fd: fd, client: client)
    do {
        try client.loop.register(fd, interest, watcher)
    } catch {
        client.watchers[fd] = nil
        return -1
    }
    watcher.interest = interest
    client.watchers[fd] = watcher
    return 0
}

private let curlTimerCallback: @convention(c) (UnsafeMutableRawPointer?, Int, UnsafeMutableRawPointer?) -> Int32 = { _, ms, user in
    let client = Unmanaged<UpstreamClient>.fromOpaque(user!).takeUnretainedValue()
    client.setTimer(ms)
    return 0
}
