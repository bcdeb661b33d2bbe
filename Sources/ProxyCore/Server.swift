import Config
import Credentials
import Dispatch
import FoundationEssentials
import Logging
import Sockets
import Synchronization
import Upstream

/// A listener that could not be bound or watched. `serve` reports it and exits 1; the contract's
/// `listening on` line is never logged for it.
public struct ListenerError: Error, CustomStringConvertible, Sendable {
    /// The address as configured (`127.0.0.1:8080`, `unix:/run/tokenproxy.sock`).
    public let address: String
    public let isAdmin: Bool
    public let reason: String

    public var description: String { "cannot listen on \(isAdmin ? "the admin address " : "")\(address): \(reason)" }
}

/// One loop's acceptors and context. Touched only on that loop's thread (or before it starts);
/// `@unchecked Sendable` only so that it can travel to its loop through `EventLoop.execute`.
final class LoopAcceptors: @unchecked Sendable {
    let ctx: LoopContext
    var acceptors: [Acceptor] = []
    init(ctx: LoopContext) { self.ctx = ctx }
}

/// The running proxy: one event loop per worker thread, each with its own listener (SO_REUSEPORT)
/// or a share of one (EPOLLEXCLUSIVE for unix sockets), its own libcurl multi handle and its own
/// connections; the admin listener lives on loop 0. `@unchecked Sendable`: its mutable fields
/// (loops, acceptors, listeners, addresses) are written only by `start()`, before any loop thread
/// runs and before the signal thread may call `drain()`; after that they are only read, and what the
/// loops share at run time is Sendable on its own (`SharedProxyState`, `LoopMetrics`, `TokenManager`).
public final class Server: @unchecked Sendable {
    let configuration: Configuration
    let tokens: TokenManager
    let logger: Logger
    let shared = SharedProxyState()
    private var loops: [EventLoop] = []
    private var perLoop: [LoopAcceptors] = []
    private var metrics: [LoopMetrics] = []
    /// The proxy's listening sockets (one per loop, or one shared): closed when the drain starts.
    private var listeners: [ListeningSocket] = []
    private var adminListener: ListeningSocket?
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

    /// Binds every listener, watches each with its loops, and starts the loops. Throws a
    /// `ListenerError` naming the address when one cannot be bound or watched; then nothing is
    /// left listening (and no unix socket file behind).
    public func start() throws {
        do {
            try bindAndWatch()
        } catch {
            closeListeners()
            throw error
        }
        for (i, mine) in perLoop.enumerated() {
            let ctx = mine.ctx
            try OSThread.start(name: "tp-loop-\(i)", stackSize: 1 << 20) { [ctx] in
                ctx.loop.schedule(after: FixedLimits.sweepInterval, Server.sweeper(ctx))
                ctx.loop.run()
            }
        }
        logger.info("\(perLoop.count) event loop(s); upstream \(configuration.upstream) through \(UpstreamConnector.libcurlVersion)")
        if let listenAddress { logger.info("listening on \(listenAddress)") }
        if let adminAddress { logger.info("admin listening on \(adminAddress)") }
    }

    /// Runs before any loop thread exists, so registering on the loops from here is safe.
    private func bindAndWatch() throws {
        let count = Server.workerCount(configuration.workers)
        for i in 0..<count {
            let loop = try EventLoop(index: i)
            let m = LoopMetrics()
            loops.append(loop)
            metrics.append(m)
            perLoop.append(LoopAcceptors(ctx: LoopContext(loop: loop, configuration: configuration, tokens: tokens, metrics: m, shared: shared, logger: logger)))
        }
        let listen = configuration.listen
        func failure(_ error: any Error, admin: Bool, address: ListenAddress) -> ListenerError {
            ListenerError(address: "\(address)", isAdmin: admin, reason: "\(error)")
        }
        // The proxy's listeners: one per loop on a TCP port (SO_REUSEPORT; with port 0 the others
        // bind the port the first one got), one shared by every loop on a unix socket.
        var interest: Interest = .accept
        do {
            switch listen {
            case .tcp(let host, let port):
                let first = try ListeningSocket.tcp(host: host, port: port, reusePort: true, exclusive: true)
                listeners.append(first)
                for _ in 1..<max(count, 1) {
                    listeners.append(try ListeningSocket.tcp(host: host, port: first.address.port ?? port, reusePort: true))
                }
                listenAddress = first.address
            case .unix(let path):
                let socket = try ListeningSocket.unix(path: path, mode: configuration.access.unixMode)
                listeners.append(socket)
                if count > 1 { interest = [.accept, .exclusive] }
                listenAddress = socket.address
            }
        } catch {
            throw failure(error, admin: false, address: listen)
        }
        if let admin = configuration.admin {
            do {
                switch admin.listen {
                case .tcp(let host, let port): adminListener = try ListeningSocket.tcp(host: host, port: port, reusePort: false)
                case .unix(let path): adminListener = try ListeningSocket.unix(path: path, mode: 0o660)
                }
            } catch {
                throw failure(error, admin: true, address: admin.listen)
            }
            adminAddress = adminListener?.address
        }
        for (i, mine) in perLoop.enumerated() {
            let ctx = mine.ctx
            let listener = listeners.count == 1 ? listeners[0] : listeners[i]
            let acceptor = Acceptor(listener: listener, interest: interest, ctx: ctx) { [unowned self, unowned ctx] fd, peer in
                self.accepted(fd: fd, peer: peer, ctx: ctx)
            }
            do {
                try acceptor.watch()
            } catch {
                throw failure(error, admin: false, address: listen)
            }
            mine.acceptors.append(acceptor)
            if i == 0, let adminListener, let admin = configuration.admin {
                let acceptor = Acceptor(listener: adminListener, interest: .accept, ctx: ctx) { [unowned self, unowned ctx] fd, _ in
                    self.acceptedAdmin(fd: fd, ctx: ctx)
                }
                do {
                    try acceptor.watch()
                } catch {
                    throw failure(error, admin: true, address: admin.listen)
                }
                mine.acceptors.append(acceptor)
            }
        }
    }

    /// Closes every listening socket (removing a unix socket's file). Only once no loop watches them.
    private func closeListeners() {
        for listener in listeners { listener.close() }
        adminListener?.close()
    }

    private static func sweeper(_ ctx: LoopContext) -> () -> Void {
        return { [weak ctx] in
            guard let ctx else { return }
            ctx.sweepTimeouts()
            ctx.loop.schedule(after: FixedLimits.sweepInterval, Server.sweeper(ctx))
        }
    }

    private func accepted(fd: Int32, peer: SocketAddress, ctx: LoopContext) -> Admission {
        let open = shared.openConnections.add(1, ordering: .relaxed).newValue
        if open > configuration.limits.maxConnections || shared.draining.load(ordering: .relaxed) {
            shared.openConnections.subtract(1, ordering: .relaxed)
            // Refused promptly with a 503 (CONTRACT: overloaded), closed without a reset (Acceptor).
            let bytes = ProxyError.overloaded.response(keepAlive: false, isHead: false)
            ctx.metrics.requestFinished(status: 503, bytesIn: 0, bytesOut: bytes.count)
            return .refused(answer: bytes)
        }
        let connection = Connection(fd: fd, peer: peer, ctx: ctx)
        do {
            try ctx.loop.register(fd, .read, connection)
        } catch {
            shared.openConnections.subtract(1, ordering: .relaxed)
            return .dropped
        }
        ctx.connections[fd] = connection
        return .served
    }

    private func acceptedAdmin(fd: Int32, ctx: LoopContext) -> Admission {
        let connection = AdminConnection(fd: fd, ctx: ctx, server: self)
        do {
            try ctx.loop.register(fd, .read, connection)
        } catch {
            return .dropped
        }
        return .served
    }

    // MARK: drain and stop

    /// SIGTERM: stop accepting, close idle connections, let the others finish up to `drain_timeout`.
    /// The proxy's listening sockets are closed at once, so that a new client is refused instead of
    /// waiting in the backlog for an accept that never comes; the admin listener stays (`/readyz`
    /// says 503). Returns when every connection is closed or the time is up.
    public func drain() {
        shared.draining.store(true, ordering: .relaxed)
        let unwatched = DispatchGroup()
        let admin = adminListener
        for mine in perLoop {
            unwatched.enter()
            mine.ctx.loop.execute {
                for acceptor in mine.acceptors where acceptor.listener !== admin { acceptor.stop() }
                for connection in Array(mine.ctx.connections.values) { connection.beginDrain() }
                mine.ctx.upstream.closeIdle()
                unwatched.leave()
            }
        }
        if unwatched.wait(timeout: .now() + 2) == .timedOut {
            logger.warning("draining: an event loop did not answer within 2 s")
        }
        for listener in listeners { listener.close() }
        logger.info("draining: no new connections; waiting up to \(configuration.drainTimeout)s for \(shared.openConnections.load(ordering: .relaxed)) open")
        let deadline = Date().addingTimeInterval(configuration.drainTimeout)
        while shared.openConnections.load(ordering: .relaxed) > 0 && Date() < deadline {
            Syscall.sleep(0.02)
        }
        let left = shared.openConnections.load(ordering: .relaxed)
        if left > 0 { logger.warning("drain timeout: closing \(left) connection(s) still open") }
        stopLoops()
    }

    private func stopLoops() {
        let done = DispatchGroup()
        for mine in perLoop {
            done.enter()
            mine.ctx.loop.execute {
                for acceptor in mine.acceptors { acceptor.stop() }
                for connection in Array(mine.ctx.connections.values) { connection.close() }
                done.leave()
            }
        }
        _ = done.wait(timeout: .now() + 2)
        for loop in loops { loop.stop() }
        closeListeners()
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
            total.add(m.counters.withLock { $0 })
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
