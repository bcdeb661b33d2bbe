import Basics
import Config
import Credentials
import Dispatch
import FoundationEssentials
import Logging
import Logs
import Sockets
import Synchronization
import TLS
import Telemetry
import Upstream

/// Something the server needs besides its listeners could not be set up (the forward proxy's CA).
public struct ServerSetupError: Error, CustomStringConvertible, Sendable {
    public let description: String
}

/// One loop's acceptors and context. Touched only on that loop's thread (or before it starts);
/// `@unchecked Sendable` only so that it can travel to its loop through `EventLoop.execute`.
final class LoopAcceptors: @unchecked Sendable {
    let ctx: LoopContext
    var acceptors: [Acceptor] = []
    init(ctx: LoopContext) { self.ctx = ctx }
}

/// The running proxy: one event loop per worker thread, each with its own listener (SO_REUSEPORT)
/// or a share of one (EPOLLEXCLUSIVE for unix sockets), its own libcurl multi handles and its own
/// connections; the admin listener lives on loop 0. `@unchecked Sendable`: its mutable fields
/// (loops, acceptors, listeners, addresses) are written by `start()` before any loop thread runs,
/// and later only by `reload` under `reloading`; what the loops share at run time is Sendable on
/// its own (`SharedProxyState`, `LoopMetrics`, `RouteState`). This file starts and stops the loops and
/// listeners; `Server+Admin.swift` answers the admin listener, `Reload/Server+Reload.swift` reloads.
public final class Server: @unchecked Sendable {
    let logger: Logger
    let shared = SharedProxyState()
    /// The configuration in effect and each route's shared state (same order as its routes).
    let current: Mutex<(configuration: Configuration, states: [RouteState])>
    /// `tokenproxy_config_reloads_total{outcome}`: reloads put in effect, and refused.
    let reloads = Mutex<(success: Int, failed: Int)>((0, 0))
    /// One reload at a time (SIGUSR2, POST /reload and the file watcher may ask together).
    let reloading = Mutex<Void>(())
    private var loops: [EventLoop] = []
    var perLoop: [LoopAcceptors] = []
    /// The proxy's listeners: the shared one first, then the routes' own.
    var groups: [ListenerGroup] = []
    private var adminListener: ListeningSocket?
    /// `forward_proxy`'s CA and tunnel context, kept across reloads that leave it unchanged.
    var forwardProxy: ForwardProxyTLS?
    /// The listeners' TLS the certificate watch looks at (loop 0 reads it; start and reload set it).
    let watchedTLS = Mutex<[ListenerTLS]>([])
    public internal(set) var listenAddress: SocketAddress?
    public private(set) var adminAddress: SocketAddress?
    /// Reads the configuration file again and puts it in effect (`POST /reload`); set before `start`.
    public var reloadHandler: (@Sendable () -> ReloadOutcome)? {
        didSet { reloadWorker = reloadHandler.map { ReloadWorker($0) } }
    }
    /// OpenTelemetry's exporter, started with the server, and how a reload makes another
    /// (`setUpTelemetry`, Server+Telemetry.swift).
    var telemetry: TelemetryExporter?
    var makeTelemetry: (@Sendable (TelemetryConfiguration?) -> TelemetryExporter?)?
    /// Runs `reloadHandler` for `POST /reload`, one at a time.
    private(set) var reloadWorker: ReloadWorker?

    public init(configuration: Configuration, states: [RouteState], logger: Logger) {
        precondition(states.count == configuration.routes.count)
        current = Mutex((configuration, states))
        self.logger = logger
    }

    public var configuration: Configuration { current.withLock { $0.configuration } }
    public var routeStates: [RouteState] { current.withLock { $0.states } }

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
            try OSThread.start(name: "tp-loop-\(i)", stackSize: 1 << 20) { [ctx, weak self] in
                ctx.loop.schedule(after: FixedLimits.sweepInterval, Server.sweeper(ctx))
                if i == 0 { ctx.loop.schedule(after: 1) { self?.watchCertificates(ctx.loop) } }
                ctx.loop.run()
            }
        }
        let configuration = self.configuration
        logProxyEnvironment(configuration)
        let upstreams = configuration.hasRoutes ? "\(configuration.routes.count) routes" : "upstream \(configuration.upstream)"
        logger.info("\(perLoop.count) event loop(s); \(upstreams) through \(UpstreamConnector.libcurlVersion)")
        if let listenAddress { logger.info("listening on \(listenAddress)") }
        for group in groups.dropFirst() { logger.info("route \(group.ownRoute ?? "") listening on \(group.address)") }
        if let adminAddress { logger.info("admin listening on \(adminAddress)") }
    }

    /// Runs before any loop thread exists, so registering on the loops from here is safe.
    private func bindAndWatch() throws {
        let configuration = self.configuration
        let states = routeStates
        let count = Server.workerCount(configuration.workers)
        forwardProxy = try Server.forwardProxy(configuration, keeping: nil)
        groups = try Server.bindGroups(configuration, loops: count, keeping: [])
        let listenerTLS = try Server.listenerTLS(configuration, for: groups)
        for (group, tls) in zip(groups, listenerTLS) { group.tls = tls }
        watchedTLS.withLock { $0 = listenerTLS.compactMap { $0 } }
        listenAddress = groups[0].address
        if let admin = configuration.admin {
            do {
                switch admin.listen {
                case .tcp(let host, let port): adminListener = try ListeningSocket.tcp(host: host, port: port, reusePort: false)
                case .unix(let path): adminListener = try ListeningSocket.unix(path: path, mode: 0o660)
                }
            } catch {
                throw ListenerError(address: "\(admin.listen)", isAdmin: true, reason: "\(error)")
            }
            adminAddress = adminListener?.address
        }
        // The routes' upstream settings read the proxy variables against the addresses as bound
        // (a port 0 is known only now), so the loops are made after the binds.
        publishOwnAddresses(groups)
        for i in 0..<count {
            let loop = try EventLoop(index: i)
            let m = LoopMetrics(shared: shared)
            loops.append(loop)
            perLoop.append(
                LoopAcceptors(
                    ctx: LoopContext(
                        loop: loop, configuration: configuration, states: states, forwardProxy: forwardProxy, metrics: m, shared: shared,
                        logger: logger)))
            if let telemetry {
                perLoop[i].ctx.tracer = RequestTracer(exporter: telemetry, sampler: Self.sampler(configuration), loop: loop)
            }
        }
        try telemetry?.start()
        for (i, mine) in perLoop.enumerated() {
            for group in groups { try watch(group, loop: i) }
            if i == 0, let adminListener, let admin = configuration.admin {
                let ctx = mine.ctx
                let acceptor = Acceptor(listener: adminListener, interest: .accept, ctx: ctx) { [unowned self, unowned ctx] fd, _ in
                    self.acceptedAdmin(fd: fd, ctx: ctx)
                }
                do {
                    try acceptor.watch()
                } catch {
                    throw ListenerError(address: "\(admin.listen)", isAdmin: true, reason: "\(error)")
                }
                mine.acceptors.append(acceptor)
            }
        }
    }

    /// Makes the listeners as bound the process's own listen addresses, which proxy variables may
    /// not name (`OwnListenAddresses`, CONTRACT.md "Signals, admin, logs").
    func publishOwnAddresses(_ groups: [ListenerGroup]) {
        let addresses = groups.map(\.address) + (adminListener.map { [$0.address] } ?? [])
        OwnListenAddresses.current = OwnListenAddresses(
            listeners: addresses.compactMap { address in address.port.map { (host: address.host, port: $0) } },
            localAddresses: SocketAddress.localInterfaceAddresses())
    }

    /// The listener groups `configuration` needs: the shared one, then one per route with its own
    /// `listen`. A group of `keeping` with the same address is reused, not bound again, whatever
    /// route now owns the address (a renamed route, two routes that swapped addresses).
    static func bindGroups(_ configuration: Configuration, loops: Int, keeping: [ListenerGroup]) throws -> [ListenerGroup] {
        var wanted: [(ListenAddress, String?, unixMode: UInt32)] = [(configuration.listen, nil, configuration.access.unixMode)]
        for route in configuration.routes {
            if let listen = route.match?.listen { wanted.append((listen, route.name, route.access.unixMode)) }
        }
        var groups: [ListenerGroup] = []
        do {
            for (listen, route, unixMode) in wanted {
                if let kept = keeping.first(where: { $0.configured == listen && $0.ownRoute == route }) {
                    groups.append(kept)
                } else if !listen.isEphemeral, let kept = keeping.first(where: { $0.configured == listen }) {
                    // (Port 0 names no address: each such listener is its route's.)
                    groups.append(kept.handed(to: route))
                } else {
                    groups.append(try ListenerGroup(listen, ownRoute: route, loops: loops, unixMode: unixMode))
                }
            }
        } catch {
            for group in groups where !keeping.contains(where: { $0.sharesSockets(with: group) }) { group.close() }
            throw error
        }
        return groups
    }

    /// Each group's TLS under `configuration`: the one it has when its settings did not change (its
    /// watch goes on), else read anew; a pair that does not load throws, naming the listener.
    static func listenerTLS(_ configuration: Configuration, for groups: [ListenerGroup]) throws -> [ListenerTLS?] {
        try groups.map { group throws -> ListenerTLS? in
            let settings: ListenerTLSConfiguration?
            if let name = group.ownRoute {
                settings = configuration.routes.first { $0.name == name }?.ownListenerTLS
            } else {
                settings = configuration.listenTLS
            }
            guard let settings else { return nil }
            if let current = group.tls, current.settings == settings { return current }
            do {
                return try ListenerTLS(settings)
            } catch {
                throw ListenerError(address: "\(group.configured)", isAdmin: false, reason: "tls: \(error)")
            }
        }
    }

    /// `forward_proxy`'s CA (made at the first start when the file names none) and tunnel context;
    /// the current one when its settings did not change.
    static func forwardProxy(_ configuration: Configuration, keeping current: ForwardProxyTLS?) throws -> ForwardProxyTLS? {
        guard let settings = configuration.forwardProxy else { return nil }
        if let current, current.settings == settings { return current }
        do {
            let authority = try ForwardProxyAuthority.prepare(certificateFile: settings.caCertFile, keyFile: settings.caKeyFile)
            return try ForwardProxyTLS(settings, authority: authority)
        } catch {
            throw ServerSetupError(description: "forward_proxy: \(error)")
        }
    }

    /// Every listener's certificate pair is read again when its files change (CONTRACT "HTTPS for
    /// clients"); checked once a second on loop 0.
    private func watchCertificates(_ loop: EventLoop) {
        for tls in watchedTLS.withLock({ $0 }) { tls.reloadIfChanged(logger: logger) }
        loop.schedule(after: 1) { [weak self, loop] in self?.watchCertificates(loop) }
    }

    /// Adds an acceptor for `group` on loop `i`: before the loops run, or on the loop's own thread.
    func watch(_ group: ListenerGroup, loop i: Int) throws {
        let mine = perLoop[i]
        let ctx = mine.ctx
        let route = group.ownRoute
        let acceptor = Acceptor(listener: group.socket(forLoop: i), interest: group.interest, ctx: ctx) { [unowned self, unowned ctx] fd, peer in
            self.accepted(fd: fd, peer: peer, ctx: ctx, ownRoute: route, tls: group.tls)
        }
        do {
            try acceptor.watch()
        } catch {
            throw ListenerError(address: "\(group.configured)", isAdmin: false, reason: "\(error)")
        }
        mine.acceptors.append(acceptor)
    }

    /// Closes every listening socket (removing a unix socket's file). Only once no loop watches them.
    private func closeListeners() {
        for group in groups { group.close() }
        adminListener?.close()
    }

    private static func sweeper(_ ctx: LoopContext) -> () -> Void {
        return { [weak ctx] in
            guard let ctx else { return }
            ctx.sweepTimeouts()
            ctx.loop.schedule(after: FixedLimits.sweepInterval, Server.sweeper(ctx))
        }
    }

    private func accepted(fd: Int32, peer: SocketAddress, ctx: LoopContext, ownRoute: String?, tls: ListenerTLS?) -> Admission {
        let open = shared.openConnections.add(1, ordering: .relaxed).newValue
        if open > ctx.configuration.limits.maxConnections || shared.draining.load(ordering: .relaxed) {
            shared.openConnections.subtract(1, ordering: .relaxed)
            // Refused promptly with a 503 (CONTRACT: overloaded), closed without a reset (Acceptor).
            let bytes = ProxyError.overloaded.response(keepAlive: false, isHead: false)
            ctx.metrics.requestFinished(status: 503, bytesIn: 0, bytesOut: bytes.count)
            return .refused(answer: bytes)
        }
        var session: TLSSession?
        if let tls {
            do {
                session = try tls.context.makeSession(fd: fd)
            } catch {
                shared.openConnections.subtract(1, ordering: .relaxed)
                ctx.logger.error("tls: \(error)")
                return .dropped
            }
        }
        let connection = Connection(fd: fd, peer: peer, ctx: ctx, ownRoute: ownRoute, tls: session)
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
        let connection = AdminConnection(fd: fd, ctx: ctx, service: self)
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
                for route in mine.ctx.routes.withConnections { route.upstream.closeIdle() }
                unwatched.leave()
            }
        }
        if unwatched.wait(timeout: .now() + 2) == .timedOut {
            logger.warning("draining: an event loop did not answer within 2 s")
        }
        for group in groups { group.close() }
        let configuration = self.configuration
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
}
