import Config
import Sockets
import TLS
import Upstream

/// Bytes both ways between a client and what the proxy opened for it, until one side ends: the
/// one relay of the proxy's two tunnels, a 101's (docs/ENGINE.md, "Upgrade and WebSocket") and a
/// CONNECT's to a host no route names (`ByteTunnel`, CONTRACT "HTTPS for clients"). What differs
/// between them is its `Configuration`; what to do is `RelayMachine`'s, and this class performs it.
///
/// It takes over both ends (no connection holds them any more) and the count of an open client
/// connection, which it gives back at its end. The loop's handler table (or the upstream
/// connection, whose owner its side is) holds the sides, and the sides hold the relay, until it
/// ends. Touched only on its loop's thread; never on the plain request path.
final class ByteRelay {
    /// One end of a relay, by what it is.
    enum End {
        /// A socket read and written as it is: a plain client's, or a CONNECT tunnel's upstream.
        case socket(Int32)
        /// A client's socket under its TLS session (a TLS listener, or a forward-proxy tunnel).
        case tls(Int32, TLSSession)
        /// A route's upstream connection, made by libcurl (its TLS, if any, is libcurl's).
        case upstream(UpstreamConnection)
    }

    /// The access-log line at the relay's end (docs/OBSERVABILITY.md "Access log"): event `tunnel_closed`.
    enum AccessLine {
        /// A CONNECT carried byte for byte: its target, the bytes each way, the time since the CONNECT.
        case connect(host: String, port: Int, startedAt: Double)
        /// A 101's tunnel: the upgraded request's own line.
        case upgrade(Exchange)

        /// The line: `status` 200 for a tunnel that was made; `bytesIn`/`bytesOut` from and to the client.
        func record(status: Int, error: String?, bytesIn: Int, bytesOut: Int, now: Double) -> AccessRecord {
            switch self {
            case .connect(let host, let port, let startedAt):
                var line = AccessRecord(event: "tunnel_closed", route: nil, method: "CONNECT", path: "\(host):\(port)", status: status)
                line.seconds = now - startedAt
                line.bytesIn = bytesIn
                line.bytesOut = bytesOut
                line.error = error
                line.tunnel = host
                return line
            case .upgrade(let exchange):
                return exchange.accessRecord(event: "tunnel_closed", seconds: now - exchange.startedAt)
            }
        }
    }

    /// What the relay counts.
    enum Metrics {
        /// Nothing of its own (a CONNECT's outcome is counted when it is answered).
        case none
        /// `tokenproxy_tunnels_total`, `tokenproxy_open_tunnels` and the route's upstream bytes.
        case upgrade(routeSlot: Int)
    }

    struct Configuration {
        var halfClose: RelayMachine.HalfClose
        var timeouts: RelayMachine.Timeouts
        var accessLine: AccessLine
        var metrics: Metrics
    }

    /// One end and the bytes waiting to be written to it.
    final class Side: EventHandler, UpstreamConnectionOwner {
        let name: RelayMachine.Side
        let end: End
        var relay: ByteRelay?
        var out: [UInt8] = []
        var outStart = 0
        /// nil until the relay first sets it (the socket may come with any interest).
        var interest: Interest?
        /// OpenSSL must write before it reads on: the socket's writability is waited for.
        var tlsWantsWrite = false

        init(_ name: RelayMachine.Side, _ end: End) {
            self.name = name
            self.end = end
        }

        var pending: Int { out.count - outStart }
        func handleEvents(_ events: UInt32) { relay?.handle(self, events) }
        func upstreamReady(_ events: UInt32) { relay?.handle(self, events) }

        func receive(_ buffer: UnsafeMutableRawBufferPointer) -> IOResult {
            switch end {
            case .socket(let fd): return Syscall.read(fd, buffer)
            case .tls(_, let session): return ClientTLSIO.read(session, buffer, wantsWrite: &tlsWantsWrite)
            case .upstream(let connection): return connection.receive(into: buffer)
            }
        }

        func send(_ bytes: UnsafeRawBufferPointer) -> IOResult {
            switch end {
            case .socket(let fd): return Syscall.write(fd, bytes)
            case .tls(_, let session): return ClientTLSIO.write(session, bytes)
            case .upstream(let connection): return connection.send(bytes)
            }
        }

        /// The end may hold bytes epoll does not report (decrypted by OpenSSL or libcurl): read them
        /// when room comes back rather than wait for readiness.
        var mayHoldInput: Bool {
            switch end {
            case .socket: return false
            case .tls(_, let session): return session.hasBufferedInput
            case .upstream(let connection): return connection.buffersInternally
            }
        }

        func shutdownWrite() {
            switch end {
            case .socket(let fd), .tls(let fd, _): Syscall.shutdownWrite(fd)
            case .upstream: break  // `HalfClose.propagate` relays sockets only
            }
        }
    }

    private unowned(unsafe) let ctx: LoopContext
    private let configuration: Configuration
    private var machine: RelayMachine
    private let client: Side
    private let upstream: Side
    private var timer: TimerID?
    /// Bytes carried from the client and to it, for the access log.
    private var bytesFromClient = 0
    private var bytesToClient = 0

    private init(ctx: LoopContext, client: End, upstream: End, _ configuration: Configuration) {
        self.ctx = ctx
        self.configuration = configuration
        self.client = Side(.client, client)
        self.upstream = Side(.upstream, upstream)
        machine = RelayMachine(
            halfClose: configuration.halfClose, timeouts: configuration.timeouts, highWater: FixedLimits.bodyHighWater, now: ctx.loop.now)
    }

    /// Takes over `client` and `upstream` (no longer anyone else's; `client` is counted as an open
    /// connection until the relay ends) and relays, first `toClient` and `toUpstream`.
    static func start(
        ctx: LoopContext, client: End, upstream: End, toClient: [UInt8], toUpstream: [UInt8], tlsWantsWrite: Bool = false,
        _ configuration: Configuration
    ) {
        let relay = ByteRelay(ctx: ctx, client: client, upstream: upstream, configuration)
        relay.client.tlsWantsWrite = tlsWantsWrite
        if case .upgrade = configuration.metrics { ctx.metrics.tunnelOpened() }
        for side in [relay.client, relay.upstream] {
            side.relay = relay
            switch side.end {
            case .socket(let fd), .tls(let fd, _):
                do {
                    try ctx.loop.reregister(fd, [], side)
                    side.interest = []
                } catch {
                    relay.end()
                    return
                }
            case .upstream(let connection):
                connection.owner = side
            }
        }
        relay.queue(toClient, for: relay.client)
        relay.queue(toUpstream, for: relay.upstream)
        relay.flush(relay.client)
        relay.flush(relay.upstream)
        // Bytes may have come (or wait inside a TLS library) since the last read of either end.
        for side in [relay.client, relay.upstream] where !relay.machine.isOver { relay.pump(from: side) }
        guard !relay.machine.isOver else { return }
        relay.timer = ctx.loop.schedule(after: relay.machine.checkInterval) { [weak relay] in relay?.checkTimeouts() }
        relay.updateInterest()
    }

    // MARK: relaying

    private func other(_ side: Side) -> Side { side === client ? upstream : client }

    fileprivate func handle(_ side: Side, _ events: UInt32) {
        guard !machine.isOver else { return }
        if events & ReadyEvents.writable != 0 {
            if side.tlsWantsWrite {
                side.tlsWantsWrite = false
                pump(from: side)
            }
            if !machine.isOver { flush(side) }
            // Room for what the other end sent: read what its TLS library may hold now.
            let from = other(side)
            if !machine.isOver, from.mayHoldInput, machine.reads(from.name) { pump(from: from) }
        }
        if !machine.isOver, events & (ReadyEvents.readable | ReadyEvents.peerClosed | ReadyEvents.failed) != 0 { pump(from: side) }
        // An error or hang-up is reported at every wait whatever the interest: end now rather than spin.
        if !machine.isOver, events & ReadyEvents.failed != 0 {
            machine.onClosed()
            end()
            return
        }
        if !machine.isOver { updateInterest() }
    }

    /// Reads what `side` has and queues it for the other side, while the machine says so.
    private func pump(from side: Side) {
        let to = other(side)
        let buffer = ctx.readBuffer
        while machine.reads(side.name) {
            switch side.receive(buffer) {
            case .done(let n):
                count(n, from: side)
                to.out.append(contentsOf: UnsafeRawBufferPointer(rebasing: buffer[0..<n]))
                machine.onRead(from: side.name, pendingThere: to.pending, now: ctx.loop.now)
                flush(to)
            case .wouldBlock:
                return
            case .closed:
                machine.onReadEnded(side.name)
                flush(to)
                return
            }
        }
    }

    private func queue(_ bytes: [UInt8], for side: Side) {
        guard !bytes.isEmpty else { return }
        side.out.append(contentsOf: bytes)
        machine.onQueued(for: side.name, pending: side.pending, now: ctx.loop.now)
    }

    /// Writes what waits for `side`, then does what the machine says follows.
    private func flush(_ side: Side) {
        var wrote = false
        write: while side.pending > 0 {
            let result = side.out.withUnsafeBytes { side.send(UnsafeRawBufferPointer(rebasing: $0[side.outStart...])) }
            switch result {
            case .done(let n):
                side.outStart += n
                wrote = true
            case .wouldBlock:
                break write
            case .closed:
                machine.onWriteFailed()
                end()
                return
            }
        }
        if side.pending == 0 {
            side.out.removeAll(keepingCapacity: side.out.capacity <= 2 * FixedLimits.bodyHighWater)
            side.outStart = 0
        }
        let next = wrote ? machine.onWritten(to: side.name, pending: side.pending, now: ctx.loop.now) : machine.afterWrite(to: side.name)
        switch next {
        case .none: break
        case .shutdownWrite: side.shutdownWrite()
        case .end: end()
        }
    }

    private func count(_ n: Int, from side: Side) {
        if side === client { bytesFromClient += n } else { bytesToClient += n }
        if case .upgrade(let slot) = configuration.metrics {
            if side === client {
                ctx.metrics.counters.routes[slot].upstreamSentBytes += n
            } else {
                ctx.metrics.counters.routes[slot].upstreamReceivedBytes += n
            }
        }
    }

    private func updateInterest() {
        for side in [client, upstream] {
            var wanted: Interest = []
            if machine.reads(side.name) { wanted.insert(.read) }
            if side.pending > 0 || side.tlsWantsWrite { wanted.insert(.write) }
            guard wanted != side.interest else { continue }
            side.interest = wanted
            switch side.end {
            case .socket(let fd), .tls(let fd, _): ctx.loop.modify(fd, wanted)
            case .upstream(let connection): connection.setInterest(wanted)
            }
        }
    }

    private func checkTimeouts() {
        timer = nil
        guard !machine.isOver else { return }
        if machine.onTick(now: ctx.loop.now) {
            end()
            return
        }
        timer = ctx.loop.schedule(after: machine.checkInterval) { [weak self] in self?.checkTimeouts() }
    }

    // MARK: the end

    /// Logs and counts the relay's end, closes both ends and gives the connection's count back.
    private func end() {
        guard client.relay != nil else { return }
        machine.onClosed()
        if let timer { ctx.loop.cancel(timer) }
        timer = nil
        if case .upgrade = configuration.metrics { ctx.metrics.tunnelClosed() }
        if ctx.configuration.log.accessLog {
            let line = configuration.accessLine.record(status: 200, error: nil, bytesIn: bytesFromClient, bytesOut: bytesToClient, now: ctx.loop.now)
            ctx.logger.info(line.message, metadata: line.metadata)
        }
        for side in [client, upstream] {
            side.relay = nil
            switch side.end {
            case .socket(let fd):
                ctx.loop.unregister(fd, side)
                Syscall.close(fd)
            case .tls(let fd, let session):
                ctx.loop.unregister(fd, side)
                // close_notify (RFC 8446 §6.1), best effort: the socket closes whatever it answers.
                _ = session.shutdown()
                Syscall.close(fd)
            case .upstream(let connection):
                connection.retire(machine[side.name].readEnded ? .closedByUpstream : .broken)
            }
        }
        ctx.shared.openConnections.subtract(1, ordering: .relaxed)
    }
}
