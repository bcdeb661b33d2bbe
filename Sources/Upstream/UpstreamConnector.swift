internal import CCurl
import Glibc
import Sockets

/// Who asked for a connection: told once, on the loop's thread, unless the attempt was cancelled.
public protocol UpstreamConnectDelegate: AnyObject {
    func upstreamConnected(_ connection: UpstreamConnection)
    func upstreamConnectFailed(_ failure: UpstreamFailure)
}

/// One connection being made (DNS, TCP, proxy tunnel, TLS): libcurl's work, on the loop's multi handle.
public final class UpstreamConnectAttempt {
    let easy: CurlEasy
    /// Strong, cleared when the attempt ends or is cancelled (which breaks the cycle with the delegate).
    var delegate: UpstreamConnectDelegate?
    var retained: Unmanaged<UpstreamConnectAttempt>?
    unowned let connector: UpstreamConnector
    fileprivate(set) var done = false

    init(easy: CurlEasy, connector: UpstreamConnector, delegate: UpstreamConnectDelegate) {
        self.easy = easy
        self.connector = connector
        self.delegate = delegate
    }

    /// Gives up the attempt without telling the delegate.
    public func cancel() {
        guard !done else { return }
        done = true
        delegate = nil
        connector.abandon(self)
    }
}

/// The proxy's upstream transport on one event loop (docs/ENGINE.md): libcurl connects (DNS, TCP,
/// HTTP-proxy tunnel, TLS with the configured CA, client certificate and verification) with
/// `CURLOPT_CONNECT_ONLY`, driven by the loop's epoll through the multi socket API so that connecting
/// never blocks the loop; the proxy then speaks HTTP/1.1 over the connection itself. Idle connections
/// are kept in a LIFO pool, bounded and watched for the upstream closing them.
public final class UpstreamConnector {
    let loop: EventLoop
    let settings: UpstreamSettings
    let multi: UnsafeMutableRawPointer
    /// What libcurl connects to: the upstream's origin (the path never matters for CONNECT_ONLY).
    let url: String
    let isTLS: Bool
    /// The pool's bounds: idle connections kept per loop, and for how long.
    let maxIdle: Int
    let idleTimeout: Double
    /// Idle connections, the most recently used last (LIFO: warm connections are reused first, the
    /// coldest ones time out).
    private var idle: [UpstreamConnection] = []
    /// libcurl's one timeout (CURLMOPT_TIMERFUNCTION), absolute monotonic seconds; nil: none wanted.
    private var curlDeadline: Double?
    private var armedDeadline: Double?
    private var immediatePosted = false
    /// The watcher of each socket libcurl is connecting on.
    var watchers: [Int32: CurlSocketWatcher] = [:]
    /// Attempts that ended inside a libcurl call, reported once it has returned.
    private var running: Int32 = 0
    var callbackDepth = 0
    /// Connections open now (idle or in use), for the metrics.
    public private(set) var openCount = 0

    public init(loop: EventLoop, settings: UpstreamSettings, origin: String, maxIdle: Int, idleTimeout: Double) {
        CurlGlobal.initOnce()
        self.loop = loop
        self.settings = settings
        self.url = origin + "/"
        self.isTLS = origin.hasPrefix("https:")
        self.maxIdle = maxIdle
        self.idleTimeout = idleTimeout
        guard let m = curl_multi_init() else { fatalError("curl_multi_init failed: out of memory") }
        multi = m
        let me = Unmanaged.passUnretained(self).toOpaque()
        _ = tp_multi_setopt_socket_cb(multi, curlSocketCallback)
        _ = tp_multi_setopt_ptr(multi, CURLMOPT_SOCKETDATA, me)
        _ = tp_multi_setopt_timer_cb(multi, curlTimerCallback)
        _ = tp_multi_setopt_ptr(multi, CURLMOPT_TIMERDATA, me)
    }

    deinit {
        for connection in idle { connection.retire() }
        curl_multi_cleanup(multi)
    }

    public static var libcurlVersion: String { CurlGlobal.version }

    // MARK: the pool

    /// The most recently used idle connection still worth using, or nil.
    public func takeIdle() -> UpstreamConnection? {
        let now = loop.now
        while let connection = idle.popLast() {
            if now - connection.idleSince < idleTimeout {
                return connection
            }
            connection.retire()
        }
        return nil
    }

    /// Takes back a connection whose last exchange ended cleanly (a whole response read, the whole
    /// request written). Beyond the bound, the oldest idle connection is closed.
    public func putIdle(_ connection: UpstreamConnection) {
        connection.owner = nil
        connection.idleSince = loop.now
        connection.reused = true
        // Watched while idle: any readiness means the upstream closed it (or sent something unasked).
        connection.setInterest(.read)
        idle.append(connection)
        if idle.count > maxIdle {
            idle.removeFirst().retire()
        }
    }

    /// An idle connection stirred: the upstream closed it, or talks out of turn. Either way it is done.
    func idleStirred(_ connection: UpstreamConnection) {
        if let i = idle.lastIndex(where: { $0 === connection }) { idle.remove(at: i) }
        connection.retire()
    }

    /// Closes idle connections past the idle timeout; runs a few times a second.
    public func sweepIdle() {
        let now = loop.now
        while let oldest = idle.first, now - oldest.idleSince >= idleTimeout {
            idle.removeFirst()
            oldest.retire()
        }
    }

    /// Closes every idle connection (drain).
    public func closeIdle() {
        let all = idle
        idle.removeAll()
        for connection in all { connection.retire() }
    }

    // MARK: connecting

    /// Starts a new connection; the delegate hears of it on this loop.
    public func connect(_ delegate: UpstreamConnectDelegate) throws -> UpstreamConnectAttempt {
        let easy = CurlEasy()
        try configure(easy)
        let attempt = UpstreamConnectAttempt(easy: easy, connector: self, delegate: delegate)
        try easy.set(CURLOPT_PRIVATE, pointer: Unmanaged.passUnretained(attempt).toOpaque())
        attempt.retained = Unmanaged.passRetained(attempt)
        let rc = curl_multi_add_handle(multi, easy.handle)
        guard rc == CURLM_OK else {
            attempt.retained?.release()
            attempt.retained = nil
            throw CurlError(multi: rc)
        }
        return attempt
    }

    private func configure(_ easy: CurlEasy) throws {
        try easy.set(CURLOPT_URL, url)
        try easy.set(CURLOPT_CONNECT_ONLY, 1)
        // A connection of its own for every attempt: never one libcurl kept from elsewhere.
        try easy.set(CURLOPT_FRESH_CONNECT, 1)
        try easy.set(CURLOPT_NOSIGNAL, 1)
        try easy.set(CURLOPT_PROTOCOLS_STR, "http,https")
        try easy.set(CURLOPT_TCP_NODELAY, 1)
        try easy.set(CURLOPT_CONNECTTIMEOUT_MS, Int(settings.headTimeout * 1000))
        try easy.set(CURLOPT_PROXY, settings.proxy.proxy)
        try easy.set(CURLOPT_NOPROXY, settings.proxy.noProxy)
        if !settings.proxy.proxy.isEmpty {
            // A plain-http upstream behind an HTTP proxy gets no CONNECT without this (libcurl 7.88),
            // and the proxy would refuse the origin-form requests we write: tunnel every upstream.
            try easy.set(CURLOPT_HTTPPROXYTUNNEL, 1)
        }
        if let ca = settings.caFile { try easy.set(CURLOPT_CAINFO, ca) }
        if let cert = settings.clientCertFile { try easy.set(CURLOPT_SSLCERT, cert) }
        if let key = settings.clientKeyFile { try easy.set(CURLOPT_SSLKEY, key) }
        if settings.insecureSkipVerify {
            try easy.set(CURLOPT_SSL_VERIFYPEER, 0)
            try easy.set(CURLOPT_SSL_VERIFYHOST, 0)
        }
    }

    /// A cancelled attempt: out of the multi (which closes its half-made connection) and released.
    func abandon(_ attempt: UpstreamConnectAttempt) {
        if callbackDepth > 0 {
            loop.schedule(after: 0) { [self] in self.release(attempt) }
        } else {
            release(attempt)
        }
    }

    private func release(_ attempt: UpstreamConnectAttempt) {
        _ = curl_multi_remove_handle(multi, attempt.easy.handle)
        attempt.retained?.release()
        attempt.retained = nil
    }

    private func collectFinished() {
        var left: Int32 = 0
        while let msg = curl_multi_info_read(multi, &left) {
            guard msg.pointee.msg == CURLMSG_DONE else { continue }
            var raw: UnsafeMutableRawPointer? = nil
            _ = tp_easy_getinfo_ptr(msg.pointee.easy_handle, CURLINFO_PRIVATE, &raw)
            let result = tp_msg_result(msg)
            guard let raw else { continue }
            let attempt = Unmanaged<UpstreamConnectAttempt>.fromOpaque(raw).takeUnretainedValue()
            finished(attempt, result)
        }
    }

    private func finished(_ attempt: UpstreamConnectAttempt, _ result: CURLcode) {
        guard !attempt.done else { return }
        attempt.done = true
        let delegate = attempt.delegate
        attempt.delegate = nil
        defer {
            attempt.retained?.release()
            attempt.retained = nil
        }
        var fd: curl_socket_t = -1
        if result == CURLE_OK {
            _ = tp_easy_getinfo_socket(attempt.easy.handle, CURLINFO_ACTIVESOCKET, &fd)
        }
        guard result == CURLE_OK, fd >= 0 else {
            _ = curl_multi_remove_handle(multi, attempt.easy.handle)
            let message = result == CURLE_OK ? "no connection" : String(cString: curl_easy_strerror(result))
            delegate?.upstreamConnectFailed(result == CURLE_OPERATION_TIMEDOUT ? .timedOut : .unreachable(message))
            return
        }
        // libcurl 7.88: the easy handle stays in the multi for the connection's whole life; removing
        // it detaches the connection (CURLINFO_ACTIVESOCKET turns -1, curl_easy_send fails).
        if let watcher = watchers.removeValue(forKey: fd) { loop.unregister(fd, watcher) }
        let connection = UpstreamConnection(fd: fd, easy: attempt.easy, connector: self, usesCurlIO: isTLS)
        do {
            try loop.register(fd, [], connection)
        } catch {
            _ = curl_multi_remove_handle(multi, attempt.easy.handle)
            delegate?.upstreamConnectFailed(.unreachable("\(error)"))
            return
        }
        openCount += 1
        guard let delegate else {
            putIdle(connection)
            return
        }
        delegate.upstreamConnected(connection)
    }

    /// The connection is done for: out of epoll, then out of the multi; the handle's cleanup closes it.
    func retired(_ connection: UpstreamConnection) {
        openCount -= 1
        loop.unregister(connection.fd, connection)
        _ = curl_multi_remove_handle(multi, connection.easy.handle)
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
    }

    func timerFired() {
        callbackDepth += 1
        _ = curl_multi_socket_action(multi, tp_socket_timeout(), 0, &running)
        callbackDepth -= 1
        collectFinished()
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

    /// A later libcurl deadline does not move an armed timer: it fires, sees the new deadline and
    /// re-arms, so the loop's heap holds no cancelled entries.
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
            if armedDeadline == nil || armedDeadline! > deadline { arm(deadline) }
            return
        }
        curlDeadline = nil
        timerFired()
    }
}

/// Watches one socket libcurl is connecting on.
final class CurlSocketWatcher: EventHandler {
    let fd: Int32
    unowned let connector: UpstreamConnector
    var interest: Interest = []
    init(fd: Int32, connector: UpstreamConnector) {
        self.fd = fd
        self.connector = connector
    }
    func handleEvents(_ events: UInt32) {
        connector.socketAction(fd, events)
    }
}

// MARK: C callbacks (no captures: state travels through the user pointers)

private let curlSocketCallback: @convention(c) (UnsafeMutableRawPointer?, curl_socket_t, Int32, UnsafeMutableRawPointer?, UnsafeMutableRawPointer?) -> Int32 = { _, fd, what, user, _ in
    let connector = Unmanaged<UpstreamConnector>.fromOpaque(user!).takeUnretainedValue()
    if what == CURL_POLL_REMOVE {
        if let watcher = connector.watchers.removeValue(forKey: fd) { connector.loop.unregister(fd, watcher) }
        return 0
    }
    var interest: Interest = []
    if what & CURL_POLL_IN != 0 { interest.insert(.read) }
    if what & CURL_POLL_OUT != 0 { interest.insert(.write) }
    if let watcher = connector.watchers[fd], connector.loop.isRegistered(fd, watcher) {
        if watcher.interest != interest {
            connector.loop.modify(fd, interest)
            watcher.interest = interest
        }
        return 0
    }
    let watcher = CurlSocketWatcher(fd: fd, connector: connector)
    do {
        try connector.loop.register(fd, interest, watcher)
    } catch {
        connector.watchers[fd] = nil
        return -1
    }
    watcher.interest = interest
    connector.watchers[fd] = watcher
    return 0
}

private let curlTimerCallback: @convention(c) (UnsafeMutableRawPointer?, Int, UnsafeMutableRawPointer?) -> Int32 = { _, ms, user in
    let connector = Unmanaged<UpstreamConnector>.fromOpaque(user!).takeUnretainedValue()
    connector.setTimer(ms)
    return 0
}
