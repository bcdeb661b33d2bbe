internal import Curl
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
/// are kept as `UpstreamPool` decides (LIFO, bounded, timed out, watched for the upstream closing
/// them); this class does what it says to the sockets.
public final class UpstreamConnector {
    let loop: EventLoop
    let settings: UpstreamSettings
    let multi: CurlMulti
    /// What libcurl connects to: the upstream's origin (the path never matters for CONNECT_ONLY).
    let url: String
    let isTLS: Bool
    /// The idle connections' bookkeeping.
    /// Its idle connections (the pool's operations are in UpstreamPool.swift).
    var pool: UpstreamPool<UpstreamConnection>
    /// Told of every connection that closes, and why (the loop's metrics count them).
    public var retirementObserver: ((UpstreamRetirement) -> Void)?
    /// libcurl's one timeout (CURLMOPT_TIMERFUNCTION), absolute monotonic seconds; nil: none wanted.
    private var curlDeadline: Double?
    private var armedDeadline: Double?
    private var immediatePosted = false
    /// The watcher of each socket libcurl is connecting on.
    var watchers: [Int32: CurlSocketWatcher] = [:]
    /// Inside a libcurl call (which may call back): an attempt cancelled now is released once it returns.
    var callbackDepth = 0
    /// Idle connections in the pool now, for the metrics.
    public var idleCount: Int { pool.idleCount }
    /// Connections open now (idle or in use), for the metrics.
    public private(set) var openCount = 0

    public init(loop: EventLoop, settings: UpstreamSettings, origin: String, maxIdle: Int, idleTimeout: Double) {
        self.loop = loop
        self.settings = settings
        self.url = origin + "/"
        self.isTLS = origin.hasPrefix("https:")
        pool = UpstreamPool(maxIdle: maxIdle, idleTimeout: idleTimeout)
        multi = CurlMulti()
        multi.delegate = self
    }

    deinit {
        for connection in pool.drain() { connection.retire(.drain) }
        multi.close()
    }

    public static var libcurlVersion: String { CurlGlobal.version }

    /// TCP keep-alive probes on an upstream connection after this many idle seconds, then as often.
    public static let keepAliveProbeSeconds = 60

    // MARK: connecting

    /// Starts a new connection; the delegate hears of it on this loop.
    public func connect(_ delegate: UpstreamConnectDelegate) throws -> UpstreamConnectAttempt {
        let easy = CurlEasy()
        try configure(easy)
        let attempt = UpstreamConnectAttempt(easy: easy, connector: self, delegate: delegate)
        attempt.retained = Unmanaged.passRetained(attempt)
        do {
            try multi.add(easy, context: attempt)
        } catch {
            attempt.retained?.release()
            attempt.retained = nil
            throw error
        }
        return attempt
    }

    private func configure(_ easy: CurlEasy) throws {
        // Out of the multi handle's connection cache, where libcurl would close it under us.
        try easy.keepsConnectionApart()
        try easy.set(.url, url)
        try easy.set(.connectOnly, true)
        // A connection of its own for every attempt: never one libcurl kept from elsewhere.
        try easy.set(.freshConnect, true)
        try easy.set(.noSignal, true)
        try easy.set(.protocols, "http,https")
        try easy.set(.tcpNoDelay, true)
        // Idle in the pool for minutes (`upstream_keepalive_timeout`): probes keep a NAT's or a load
        // balancer's idle timer from forgetting the connection silently (Azure's drops after 4 min
        // without a reset), and tell of a peer that is gone (docs/ENGINE.md, "The pool").
        try easy.set(.tcpKeepAlive, true)
        try easy.setKeepAliveProbes(everySeconds: UpstreamConnector.keepAliveProbeSeconds)
        try easy.set(.connect, milliseconds: Int(settings.headTimeout * 1000))
        try easy.set(.proxy, settings.proxy.proxy)
        try easy.set(.noProxy, settings.proxy.noProxy)
        if !settings.proxy.proxy.isEmpty {
            // A plain-http upstream behind an HTTP proxy gets no CONNECT without this (libcurl 7.88),
            // and the proxy would refuse the origin-form requests we write: tunnel every upstream.
            try easy.set(.httpProxyTunnel, true)
        }
        if let ca = settings.caFile { try easy.set(.caFile, ca) }
        if let cert = settings.clientCertFile { try easy.set(.clientCertFile, cert) }
        if let key = settings.clientKeyFile { try easy.set(.clientKeyFile, key) }
        if settings.insecureSkipVerify {
            try easy.set(.verifyPeer, false)
            try easy.set(.verifyHost, false)
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
        multi.remove(attempt.easy)
        attempt.retained?.release()
        attempt.retained = nil
    }

    private func collectFinished() {
        while let (context, failure) = multi.nextFinished() {
            // Every transfer on this multi was added by `connect` with its attempt as the context.
            finished(unsafeDowncast(context, to: UpstreamConnectAttempt.self), failure)
        }
    }

    private func finished(_ attempt: UpstreamConnectAttempt, _ failure: CurlError?) {
        guard !attempt.done else { return }
        attempt.done = true
        let delegate = attempt.delegate
        attempt.delegate = nil
        defer {
            attempt.retained?.release()
            attempt.retained = nil
        }
        let fd = failure == nil ? attempt.easy.activeSocket() : -1
        guard failure == nil, fd >= 0 else {
            multi.remove(attempt.easy)
            let message = failure?.message ?? "no connection"
            delegate?.upstreamConnectFailed(failure?.timedOut == true ? .timedOut : .unreachable(message))
            return
        }
        // libcurl 7.88: the easy handle stays in the multi for the connection's whole life; removing
        // it detaches the connection (CURLINFO_ACTIVESOCKET turns -1, curl_easy_send fails).
        if let watcher = watchers.removeValue(forKey: fd) { loop.unregister(fd, watcher) }
        let connection = UpstreamConnection(fd: fd, easy: attempt.easy, connector: self, usesCurlIO: isTLS)
        do {
            try loop.register(fd, [], connection)
        } catch {
            multi.remove(attempt.easy)
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
    func retired(_ connection: UpstreamConnection, _ reason: UpstreamRetirement) {
        openCount -= 1
        retirementObserver?(reason)
        loop.unregister(connection.fd, connection)
        multi.remove(connection.easy)
    }

    // MARK: driving libcurl

    func socketAction(_ fd: Int32, _ events: UInt32) {
        callbackDepth += 1
        multi.socketAction(
            fd, readable: events & ReadyEvents.readable != 0, writable: events & ReadyEvents.writable != 0,
            failed: events & ReadyEvents.failed != 0)
        callbackDepth -= 1
        collectFinished()
    }

    func timerFired() {
        callbackDepth += 1
        multi.timeout()
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

// MARK: libcurl's socket and timer callbacks (the C trampolines are in Curl/CurlMulti.swift)

extension UpstreamConnector: CurlMultiDelegate {
    package func curlWatch(_ fd: Int32, read: Bool, write: Bool) -> Bool {
        var interest: Interest = []
        if read { interest.insert(.read) }
        if write { interest.insert(.write) }
        if let watcher = watchers[fd], loop.isRegistered(fd, watcher) {
            if watcher.interest != interest {
                loop.modify(fd, interest)
                watcher.interest = interest
            }
            return true
        }
        let watcher = CurlSocketWatcher(fd: fd, connector: self)
        do {
            try loop.register(fd, interest, watcher)
        } catch {
            watchers[fd] = nil
            return false
        }
        watcher.interest = interest
        watchers[fd] = watcher
        return true
    }

    package func curlUnwatch(_ fd: Int32) {
        if let watcher = watchers.removeValue(forKey: fd) { loop.unregister(fd, watcher) }
    }

    package func curlSetTimer(milliseconds: Int) {
        setTimer(milliseconds)
    }
}
