import Config
import Credentials
import Dispatch
import FoundationEssentials
import Glibc
import Logging
import Sockets
import Synchronization
import Upstream

/// The running proxy: one event loop per worker thread, each with its own listener (SO_REUSEPORT)
/// or a share of one (EPOLLEXCLUSIVE for unix sockets), its own libcurl multi handle and its own
/// connections; the admin listener lives on loop 0.
public final class Server: @unchecked Sendable {
    let configuration: Configuration
    let tokens: TokenManager
    let logger: Logger
    let shared = SharedProxyState()
    private var loops: [EventLoop] = []
    private var contexts: [LoopContext] = []
    private var acceptors: [[Acceptor]] = []
    private var metrics: [LoopMetrics] = []
    public private(set) var listenAddress: SocketAddress?
    public private(set) var adminAddress: SocketAddress?

    public init(configuration: Configuration, tokens: TokenManager, logger: Logger) {
        self.configuration = configuration
        self.tokens = tokens
        self.logger = logger
    }

    public static func workerCount(_ configured: Int) -> Int {
        configured > 0 ? configured : Syscall.usableCPUCount()
    }

    /// Binds every listener and starts the loops. Throws when an address cannot be bound.
    public func start() throws {
        let count = Server.workerCount(configuration.workers)
        for i in 0..<count {
            let loop = try EventLoop(index: i)
            let m = LoopMetrics()
            loops.append(loop)
            metrics.append(m)
            contexts.append(LoopContext(loop: loop, configuration: configuration, tokens: tokens, metrics: m, shared: shared, logger: logger))
        }
        // Listeners. Registration happens on each loop's own thread below.
        var listeners: [[ListeningSocket]] = Array(repeating: [], count: count)
        var sharedInterest: Interest = .read
        switch configuration.listen {
        case .tcp(let host, let port):
            let first = try ListeningSocket.tcp(host: host, port: port, reusePort: true)
            listeners[0].append(first)
            // With port 0, the other loops bind the port the first one got.
            for i in 1..<max(count, 1) where i < count {
                listeners[i].append(try ListeningSocket.tcp(host: host, port: first.address.port ?? port, reusePort: true))
            }
            listenAddress = first.address
        case .unix(let path):
            let socket = try ListeningSocket.unix(path: path, mode: configuration.access.unixMode)
            for i in 0..<count { listeners[i].append(socket) }
            sharedInterest = count > 1 ? [.read, .exclusive] : .read
            listenAddress = socket.address
        }
        var adminListener: ListeningSocket?
        if let admin = configuration.admin {
            switch admin.listen {
            case .tcp(let host, let port): adminListener = try ListeningSocket.tcp(host: host, port: port, reusePort: false)
            case .unix(let path): adminListener = try ListeningSocket.unix(path: path, mode: 0o660)
            }
            adminAddress = adminListener?.address
        }
        for (i, ctx) in contexts.enumerated() {
            var mine: [Acceptor] = []
            for listener in listeners[i] {
                mine.append(Acceptor(listener: listener, ctx: ctx) { [unowned self, unowned ctx] fd, peer in self.accepted(fd: fd, peer: peer, ctx: ctx) })
            }
            if i == 0, let adminListener {
                mine.append(Acceptor(listener: adminListener, ctx: ctx) { [unowned self, unowned ctx] fd, peer in self.acceptedAdmin(fd: fd, ctx: ctx) })
            }
            acceptors.append(mine)
            let watched = mine
            let interest = sharedInterest
            let isAdmin = { (a: Acceptor) in a.listener === adminListener }
            try OSThread.start(name: "tp-loop-\(i)", stackSize: 1 << 20) { [ctx] in
                for acceptor in watched {
                    do {
                        try ctx.loop.register(acceptor.listener.fd, isAdmin(acceptor) ? .read : interest, acceptor)
                    } catch {
                        ctx.logger.error("cannot watch a listener: \(error)")
                    }
                }
                ctx.loop.schedule(after: 0.2, Server.sweeper(ctx))
                ctx.loop.run()
            }
        }
        logger.info("\(count) event loop(s); upstream \(configuration.upstream) through \(UpstreamClient.libcurlVersion)")
        if let listenAddress { logger.info("listening on \(listenAddress)") }
        if let adminAddress { logger.info("admin listening on \(adminAddress)") }
    }

    private static func sweeper(_ ctx: LoopContext) -> () -> Void {
        return { [weak ctx] in
            guard let ctx else { return }
            ctx.sweepTimeouts()
            ctx.loop.schedule(after: 0.2, Server.sweeper(ctx))
        }
    }

    private func accepted(fd: Int32, peer: SocketAddress, ctx: LoopContext) -> EventHandler? {
        let open = shared.openConnections.add(1, ordering: .relaxed).newValue
        if open > configuration.limits.maxConnections || shared.draining.load(ordering: .relaxed) {
            shared.openConnections.subtract(1, ordering: .relaxed)
            // Refused promptly: a best-effort 503 on the new socket, then close (CONTRACT: overloaded).
            let bytes = ProxyError.overloaded.response(keepAlive: false, isHead: false)
            bytes.withUnsafeBytes { _ = Syscall.write(fd, $0) }
            ctx.metrics.requestFinished(status: 503, bytesIn: 0, bytesOut: bytes.count)
            return nil
        }
        let connection = Connection(fd: fd, peer: peer, ctx: ctx)
        do {
            try ctx.loop.register(fd, .read, connection)
        } catch {
            shared.openConnections.subtract(1, ordering: .relaxed)
            return nil
        }
        ctx.connections[fd] = connection
        return connection
    }

    private func acceptedAdmin(fd: Int32, ctx: LoopContext) -> EventHandler? {
        let connection = AdminConnection(fd: fd, ctx: ctx, server: self)
        do {
            try ctx.loop.register(fd, .read, connection)
        } catch {
            return nil
        }
        return connection
    }

    // MARK: drain and stop

    /// SIGTERM: stop accepting, close idle connections, let the others finish up to `drain_timeout`.
    /// Returns when every connection is closed or the time is up.
    public func drain() {
        shared.draining.store(true, ordering: .relaxed)
        logger.info("draining: no new connections; waiting up to \(configuration.drainTimeout)s for \(shared.openConnections.load(ordering: .relaxed)) open")
        for (i, ctx) in contexts.enumerated() {
            let mine = acceptors[i]
            ctx.loop.execute { [ctx] in
                for acceptor in mine where acceptor.listener.address != self.adminAddress {
                    ctx.loop.unregister(acceptor.listener.fd, acceptor)
                }
                for connection in Array(ctx.connections.values) { connection.beginDrain() }
            }
        }
        let deadline = Date().addingTimeInterval(configuration.drainTimeout)
        while shared.openConnections.load(ordering: .relaxed) > 0 && Date() < deadline {
            usleep(20_000)
        }
        let left = shared.openConnections.load(ordering: .relaxed)
        if left > 0 { logger.warning("drain timeout: closing \(left) connection(s) still open") }
        stopLoops()
    }

    private func stopLoops() {
        let done = DispatchGroup()
        for ctx in contexts {
            done.enter()
            ctx.loop.execute { [ctx] in
                for connection in Array(ctx.connections.values) { connection.close() }
                done.leave()
            }
        }
        _ = done.wait(timeout: .now() + 2)
        for loop in loops { loop.stop() }
        if case .unix(let path) = configuration.listen { unlink(path) }
    }

    /// Whether the proxy could serve a request now: a usable token and not draining.
    var isReady: Bool {
        if shared.draining.load(ordering: .relaxed) { return false }
        let view = tokens.current()
        return view.session == .active && view.usableSnapshot(at: Date().timeIntervalSince1970) != nil
    }

    func metricsText() -> String {
        var total = LoopMetrics.Counters()
        for m in metrics {
            let c = m.counters.withLock { $0 }
            for (code, n) in c.requestsByCode { total.requestsByCode[code, default: 0] += n }
            total.upstream401Retries += c.upstream401Retries
            total.requestsWaitedForToken += c.requestsWaitedForToken
            total.bytesFromClients += c.bytesFromClients
            total.bytesToClients += c.bytesToClients
            for i in 0..<total.latencyBuckets.count { total.latencyBuckets[i] += c.latencyBuckets[i] }
            total.latencyCount += c.latencyCount
            total.latencySum += c.latencySum
        }
        return MetricsRenderer.render(total, tokens: tokens, openConnections: shared.openConnections.load(ordering: .relaxed), ready: isReady)
    }

    /// SIGHUP and admin POST /refresh: one forced refresh (single-flight rules apply).
    public func forceRefresh() -> Bool {
        let view = tokens.current()
        guard view.session == .active else { return false }
        tokens.refresh(staleGeneration: nil, reason: .forced) { _ in }
        return true
    }
}
