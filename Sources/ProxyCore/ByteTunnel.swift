import Config
import HTTP1
import Logging
import Sockets

/// `forward_proxy.other_hosts: tunnel`: a CONNECT to a host no route names, carried byte for byte to
/// its port 443 (CONTRACT "HTTPS for clients"; no TLS ends here, nothing is injected). The name is
/// resolved off the loop; any address that is loopback, link-local or a metadata address refuses the
/// tunnel (`ForwardProxyRules.tunnelRefusal`), and the connection goes to an address that was
/// checked, never to the name again (no second lookup a DNS answer could change).
///
/// The client's socket is handed over by its `Connection` after the CONNECT head; this object answers
/// it (200, or 403/502) and then relays. Touched only on its loop's thread.
final class ByteTunnel {
    private unowned(unsafe) let ctx: LoopContext
    private let client: Side
    private var upstream: Side?
    private let host: String
    private let port: Int
    private let startedAt: Double
    private var candidates: [ResolvedAddress] = []
    private var lastActivity: Double
    private var idleTimer: TimerID?
    private var finished = false
    /// Bytes carried each way, for the access log.
    private var bytesUp = 0
    private var bytesDown = 0
    /// Client bytes that came right after the CONNECT head: the first bytes for the upstream.
    private var early: [UInt8]

    /// One end of the tunnel: its socket and the bytes waiting to be written to it. The loop's handler
    /// table holds the sides, and the sides hold the tunnel, until it ends (`closeSockets`, `refuse`).
    final class Side: EventHandler {
        let fd: Int32
        var tunnel: ByteTunnel?
        var out: [UInt8] = []
        var outStart = 0
        /// The peer sent its end (read returned 0).
        var readEnded = false
        var writeShut = false
        var interest: Interest = []
        var connecting = false

        init(fd: Int32) { self.fd = fd }
        var pending: Int { out.count - outStart }
        func handleEvents(_ events: UInt32) { tunnel?.handle(self, events) }
    }

    static let highWater = FixedLimits.bodyHighWater

    private init(ctx: LoopContext, clientFD: Int32, host: String, port: Int, early: [UInt8]) {
        self.ctx = ctx
        client = Side(fd: clientFD)
        self.host = host
        self.port = port
        self.early = early
        startedAt = ctx.loop.now
        lastActivity = ctx.loop.now
        client.tunnel = self
    }

    /// Takes over `clientFD` (no longer any connection's) and resolves `host` on a thread of its own.
    static func start(ctx: LoopContext, clientFD: Int32, host: String, port: Int, early: [UInt8]) {
        let tunnel = ByteTunnel(ctx: ctx, clientFD: clientFD, host: host, port: port, early: early)
        // The loop's handler table holds the tunnel from here on; no interest until it is answered.
        do {
            try ctx.loop.register(clientFD, [], tunnel.client)
        } catch {
            tunnel.closeSockets()
            return
        }
        let bound = LoopBound(tunnel)
        let loop = ctx.loop
        do {
            try OSThread.start(name: "tp-resolve") {
                let addresses = OutboundSocket.resolve(host, port: port)
                loop.execute { bound.object?.resolved(addresses) }
            }
        } catch {
            tunnel.refuse(.badGateway("the proxy could not resolve \(host) now"))
        }
    }

    private func resolved(_ addresses: [ResolvedAddress]) {
        guard !finished else { return }
        if addresses.isEmpty {
            refuse(.badGateway("\(host) does not resolve"))
            return
        }
        if let why = ForwardProxyRules.tunnelRefusal(resolved: addresses.map(\.bytes)) {
            refuse(.refusedConnect(why))
            return
        }
        candidates = addresses
        connectNext()
    }

    private func connectNext() {
        while !candidates.isEmpty {
            let address = candidates.removeFirst()
            do {
                let fd = try OutboundSocket.connect(to: address)
                let side = Side(fd: fd)
                side.tunnel = self
                side.connecting = true
                try ctx.loop.register(fd, .write, side)
                side.interest = .write
                upstream = side
                return
            } catch {
                continue
            }
        }
        refuse(.badGateway("\(host) could not be reached on port \(port)"))
    }

    /// The CONNECT's answer when no tunnel comes of it; the socket lingers as any refused one does.
    private func refuse(_ error: ProxyError) {
        guard !finished else { return }
        finished = true
        ctx.metrics.forwardProxyConnect(route: nil, outcome: .refused)
        log(status: error.status, error: error.code)
        ctx.loop.unregister(client.fd, client)
        client.tunnel = nil
        if let upstream {
            ctx.loop.unregister(upstream.fd, upstream)
            Syscall.close(upstream.fd)
            upstream.tunnel = nil
        }
        let bytes = error.response(keepAlive: false, isHead: false)
        RefusedConnection.start(fd: client.fd, answer: bytes, loop: ctx.loop) { [shared = ctx.shared] in
            shared.openConnections.subtract(1, ordering: .relaxed)
        }
    }

    // MARK: relaying

    fileprivate func handle(_ side: Side, _ events: UInt32) {
        guard !finished else { return }
        if side.connecting {
            connected(side, events)
            return
        }
        guard let upstream else {
            // The client's socket broke before the tunnel was made (a reset is reported even with
            // no interest, and again at every wait): give up now rather than spin.
            if events & ReadyEvents.failed != 0 { end(status: 499) }
            return
        }
        let other = side === client ? upstream : client
        lastActivity = ctx.loop.now
        if events & ReadyEvents.writable != 0 { flush(side) }
        if !finished, events & (ReadyEvents.readable | ReadyEvents.peerClosed | ReadyEvents.failed) != 0 { pump(from: side, to: other) }
        if !finished { updateInterest() }
    }

    private func connected(_ side: Side, _ events: UInt32) {
        if let why = OutboundSocket.connectError(side.fd) {
            ctx.loop.unregister(side.fd, side)
            Syscall.close(side.fd)
            side.tunnel = nil
            upstream = nil
            ctx.logger.debug("forward proxy tunnel to \(host): \(why); trying the next address")
            connectNext()
            return
        }
        side.connecting = false
        ctx.metrics.forwardProxyConnect(route: nil, outcome: .tunnelled)
        client.out = Forwarder.connectionEstablished
        side.out = early
        early = []
        flush(client)
        flush(side)
        idleTimer = ctx.loop.schedule(after: idleCheckInterval) { [weak self] in self?.checkIdle() }
        updateInterest()
    }

    private var idleCheckInterval: Double { max(1, ctx.configuration.limits.clientIdleTimeout / 4) }

    private func checkIdle() {
        guard !finished else { return }
        if ctx.loop.now - lastActivity >= ctx.configuration.limits.clientIdleTimeout {
            end()
            return
        }
        idleTimer = ctx.loop.schedule(after: idleCheckInterval) { [weak self] in self?.checkIdle() }
    }

    /// Reads what `from` has and writes it on to `to`, keeping what `to` cannot take yet.
    private func pump(from: Side, to: Side) {
        while !finished && !from.readEnded && to.pending < ByteTunnel.highWater {
            switch Syscall.read(from.fd, ctx.readBuffer) {
            case .done(let n):
                if from === client { bytesUp += n } else { bytesDown += n }
                to.out.append(contentsOf: UnsafeRawBufferPointer(rebasing: ctx.readBuffer[0..<n]))
                flush(to)
            case .wouldBlock:
                return
            case .closed:
                from.readEnded = true
                flush(to)
            }
        }
    }

    private func flush(_ side: Side) {
        while side.pending > 0 {
            let result = side.out.withUnsafeBytes { Syscall.write(side.fd, UnsafeRawBufferPointer(rebasing: $0[side.outStart...])) }
            switch result {
            case .done(let n):
                side.outStart += n
            case .wouldBlock:
                return
            case .closed:
                end()
                return
            }
        }
        side.out.removeAll(keepingCapacity: true)
        side.outStart = 0
        // The other side ended and everything it sent is through: end this direction too.
        let other = side === client ? upstream : client
        if let other, other.readEnded, !side.writeShut {
            side.writeShut = true
            Syscall.shutdownWrite(side.fd)
        }
        if client.readEnded && upstream?.readEnded == true && client.pending == 0 && upstream?.pending == 0 { end() }
    }

    private func updateInterest() {
        guard let upstream, !finished else { return }
        for (side, other) in [(client, upstream), (upstream, client)] {
            var wanted: Interest = []
            if !side.readEnded && other.pending < ByteTunnel.highWater { wanted.insert(.read) }
            if side.pending > 0 { wanted.insert(.write) }
            if wanted != side.interest {
                side.interest = wanted
                ctx.loop.modify(side.fd, wanted)
            }
        }
    }

    /// `status` for the access log: 200 for a tunnel that was made, 499 for a client gone before.
    private func end(status: Int = 200) {
        guard !finished else { return }
        finished = true
        log(status: status, error: nil)
        closeSockets()
        ctx.shared.openConnections.subtract(1, ordering: .relaxed)
    }

    private func closeSockets() {
        if let idleTimer { ctx.loop.cancel(idleTimer) }
        for side in [client, upstream].compactMap({ $0 }) {
            ctx.loop.unregister(side.fd, side)
            Syscall.close(side.fd)
            side.tunnel = nil
        }
    }

    /// One access-log line for the CONNECT, at its end (CONTRACT: one per refused CONNECT too).
    private func log(status: Int, error: String?) {
        guard ctx.configuration.log.accessLog else { return }
        var line = AccessRecord(event: "tunnel_closed", route: nil, method: "CONNECT", path: "\(host):\(port)", status: status)
        line.seconds = ctx.loop.now - startedAt
        line.bytesIn = bytesUp
        line.bytesOut = bytesDown
        line.error = error
        line.tunnel = host
        ctx.logger.info(line.message, metadata: line.metadata)
    }
}
