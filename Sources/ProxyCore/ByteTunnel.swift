import Basics
import Config
import HTTP1
import Logging
import Sockets

/// `forward_proxy.other_hosts: tunnel`: a CONNECT to a host no route names, carried byte for byte to
/// its port 443 (CONTRACT "HTTPS for clients"; no TLS ends here, nothing is injected). The name is
/// resolved off the loop; any address in `deny_addresses` refuses the tunnel
/// (`ForwardProxyRules.tunnelRefusal`), and the connection goes to an address that was checked,
/// never to the name again (no second lookup a DNS answer could change).
///
/// The client's socket is handed over by its `Connection` after the CONNECT head; this object answers
/// it (403/502 here, or 200 with both sockets handed to a `ByteRelay`, which relays until the end).
/// Touched only on its loop's thread.
final class ByteTunnel {
    private unowned(unsafe) let ctx: LoopContext
    private let client: Side
    private var upstream: Side?
    private let host: String
    private let port: Int
    private let startedAt: Double
    private let egress: EgressPolicy
    private var candidates: [ResolvedAddress] = []
    /// The checked address being connected to (the audit line's `address` once connected).
    private var connectingTo: ResolvedAddress?
    private var finished = false
    /// Client bytes that came right after the CONNECT head: the first bytes for the upstream.
    private var early: [UInt8]
    /// The client as the audit log names it; nil without `audit:`.
    private let auditClient: String?

    /// A socket of the tunnel while it is made. The loop's handler table holds the sides, and the
    /// sides hold the tunnel, until it is answered.
    final class Side: EventHandler {
        let fd: Int32
        var tunnel: ByteTunnel?
        var connecting = false

        init(fd: Int32) { self.fd = fd }
        func handleEvents(_ events: UInt32) { tunnel?.handle(self, events) }
    }

    private init(ctx: LoopContext, clientFD: Int32, host: String, port: Int, egress: EgressPolicy, early: [UInt8], auditClient: String?) {
        self.ctx = ctx
        self.egress = egress
        self.auditClient = auditClient
        client = Side(fd: clientFD)
        self.host = host
        self.port = port
        self.early = early
        startedAt = ctx.loop.now
        client.tunnel = self
    }

    /// Takes over `clientFD` (no longer any connection's) and resolves `host` on a thread of its own.
    static func start(ctx: LoopContext, clientFD: Int32, host: String, port: Int, egress: EgressPolicy, early: [UInt8], auditClient: String? = nil) {
        let tunnel = ByteTunnel(ctx: ctx, clientFD: clientFD, host: host, port: port, egress: egress, early: early, auditClient: auditClient)
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
        if let refusal = ForwardProxyRules.tunnelRefusal(resolved: addresses.map(\.bytes), egress: egress) {
            if case .deniedAddress(let address, let block) = refusal {
                ctx.logger.info("forward proxy: no tunnel to \(host): it resolves to \(IPAddressText.format(address)), in deny_addresses (\(block))")
            }
            refuse(refusal.error, auditReason: refusal.auditReason)
            return
        }
        candidates = addresses
        connectNext()
    }

    private func connectNext() {
        while !candidates.isEmpty {
            let address = candidates.removeFirst()
            connectingTo = address
            do {
                let fd = try OutboundSocket.connect(to: address)
                let side = Side(fd: fd)
                side.tunnel = self
                side.connecting = true
                try ctx.loop.register(fd, .write, side)
                upstream = side
                return
            } catch {
                continue
            }
        }
        refuse(.badGateway("\(host) could not be reached on port \(port)"))
    }

    /// The CONNECT's answer when no tunnel comes of it; the socket lingers as any refused one does.
    /// `auditReason`: the audit line's reason when it is not the error's code (`deny_address`).
    private func refuse(_ error: ProxyError, auditReason: String? = nil) {
        guard !finished else { return }
        finished = true
        ctx.metrics.forwardProxyConnect(route: nil, outcome: .refused)
        log(status: error.status, error: error.code)
        ByteTunnel.audit(ctx, client: auditClient, host: host, port: port, status: error.status, reason: auditReason ?? error.code, address: nil)
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

    // MARK: connecting

    fileprivate func handle(_ side: Side, _ events: UInt32) {
        guard !finished else { return }
        if side.connecting {
            connected(side, events)
            return
        }
        // The client's socket broke before the tunnel was made (a reset is reported even with no
        // interest, and again at every wait): give up now rather than spin.
        if events & ReadyEvents.failed != 0 {
            finished = true
            log(status: 499, error: nil)
            closeSockets()
            ctx.shared.openConnections.subtract(1, ordering: .relaxed)
        }
    }

    /// The connection is made: the 200 and the early bytes go, and a `ByteRelay` takes both sockets.
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
        finished = true
        client.tunnel = nil
        side.tunnel = nil
        ctx.metrics.forwardProxyConnect(route: nil, outcome: .tunnelled)
        ByteTunnel.audit(
            ctx, client: auditClient, host: host, port: port, status: 200, reason: nil, address: connectingTo.map { IPAddressText.format($0.bytes) })
        // TCP's half-close carried through, no timeout but the idle one (CONTRACT "HTTPS for clients").
        let configuration = ByteRelay.Configuration(
            halfClose: .propagate, timeouts: .init(idle: ctx.configuration.limits.clientIdleTimeout, clientSend: nil),
            accessLine: accessLine, metrics: .none)
        ByteRelay.start(
            ctx: ctx, client: .socket(client.fd), upstream: .socket(side.fd), toClient: Forwarder.connectionEstablished, toUpstream: early,
            configuration)
    }

    private var accessLine: ByteRelay.AccessLine { .connect(host: host, port: port, startedAt: startedAt) }

    private func closeSockets() {
        for side in [client, upstream].compactMap({ $0 }) {
            ctx.loop.unregister(side.fd, side)
            Syscall.close(side.fd)
            side.tunnel = nil
        }
    }

    /// The CONNECT's access-log line when no tunnel came of it (CONTRACT: one per refused CONNECT
    /// too); a tunnel's is its relay's, at its end.
    private func log(status: Int, error: String?) {
        guard ctx.configuration.log.accessLog else { return }
        let line = accessLine.record(status: status, error: error, bytesIn: 0, bytesOut: 0, now: ctx.loop.now)
        ctx.logger.info(line.message, metadata: line.metadata)
    }
}
