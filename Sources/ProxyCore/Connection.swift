import Config
import Credentials
import HTTP1
import Sockets
import TLS
import Upstream

/// One client connection: reads and parses requests, checks them, forwards each one upstream with
/// the token and streams the answer back, one exchange at a time (pipelined requests wait their
/// turn, so answers leave in order, RFC 9112 §9.3.2). After a 101 its socket goes to a `ByteRelay`.
/// Everything here runs on its loop's thread. This class is the client side; the upstream half
/// (the token, sending, the answer, the 101, the upstream connection) is its `UpstreamSide`.
/// This file reads, parses, writes and closes; one exchange's life is in Connection+Exchange.swift,
/// the TLS under it in Connection+TLS.swift, CONNECT and the tunnel's pin in
/// Connection+ForwardProxy.swift.
final class Connection: EventHandler, LoopTask {
    let fd: Int32
    let peer: SocketAddress
    /// The X-Forwarded-For and X-Forwarded-Proto lines for this client, made once (again when a
    /// forward-proxy tunnel turns it to https).
    var forwardedForLines: ByteBuffer
    /// The X-Forwarded-Host line, made again only when the client names another host.
    let forwardedHostLine = RepeatedFieldLine(name: "X-Forwarded-Host")
    /// unowned(unsafe): the loop's context outlives its connections (it holds them), and a checked
    /// unowned load costs two atomic operations per access (slow ones: the context has a side table).
    unowned(unsafe) let ctx: LoopContext
    var parser: RequestParser
    /// The upstream half of its exchanges: the token, the upstream connection and the answer.
    let upstream: UpstreamSide
    /// The buffer each exchange queues its upstream bytes in, lent to one exchange at a time (no
    /// allocation per request).
    let upstreamOut = ByteBuffer()
    /// Client bytes read and not yet parsed (from `inStart`).
    let inBuf = ByteBuffer()
    var inStart = 0
    /// Bytes for the client not yet written (from `outStart`).
    let outBuf = ByteBuffer()
    var outStart = 0
    private(set) var interest: Interest = .read
    /// Where the connection is in its life, its client-side clocks and the exchange in progress
    /// (`machine.exchange`): every decision is its; this class performs them.
    var machine: ConnectionMachine
    /// The bytes and the upstream leg of the exchange in progress; set and cleared with
    /// `machine.exchange`: by `open`, `finish` and `cutShort` (Connection+Exchange.swift), `close`
    /// and `relinquishSocket`.
    var exchange: Exchange?
    var closed: Bool { machine.isClosed }

    // Buffer bounds: FixedLimits.
    static let outHighWater = FixedLimits.answerHighWater
    static let outLowWater = FixedLimits.answerLowWater
    static let bodyHighWater = FixedLimits.bodyHighWater
    static let inHighWater = FixedLimits.unparsedClientHighWater

    /// The route of a route's own listener; nil on the shared listener (the route table decides).
    /// A reload that hands this connection's listener to another route changes it.
    var ownRoute: String?

    /// The TLS session over the socket (on a TLS listener, or in a forward-proxy tunnel), or the one
    /// an answered CONNECT switches to (`ConnectionMachine.WrittenAction.startTunnelTLS`); nil: plain.
    /// Only the I/O handle: whether the bytes go through it, the handshake, and the tunnel's pin
    /// are the machine's (`machine.speaksTLS`, `.handshaking`, `.connectAnswered`, `machine.pin`).
    /// Set here and by `connect` (Connection+ForwardProxy.swift).
    var tls: TLSSession?

    init(fd: Int32, peer: SocketAddress, ctx: LoopContext, ownRoute: String? = nil, tls: TLSSession? = nil) {
        self.fd = fd
        self.ownRoute = ownRoute
        self.peer = peer
        self.tls = tls
        forwardedForLines = Forwarder.forwardedForLines(peerHost: peer.host, https: tls != nil)
        self.ctx = ctx
        // The body limit is checked here, after the access checks (CONTRACT point 10), not by the parser.
        parser = RequestParser(limits: ParserLimits(maxHeaderBytes: ctx.configuration.limits.maxHeaderBytes, maxBodyBytes: 0))
        upstream = UpstreamSide(ctx: ctx)
        machine = ConnectionMachine(now: ctx.loop.now, tls: tls != nil)
        upstream.client = self
    }

    // MARK: events

    /// Scheduled by `finish` and `upstreamTookBody` (not from inside an upstream event): parse on.
    func runLoopTask() {
        guard !closed else { return }
        if machine.speaksTLS && tls!.hasBufferedInput {
            readAvailable()
            return
        }
        process()
    }

    func handleEvents(_ events: UInt32) {
        if events & ReadyEvents.failed != 0 && events & ReadyEvents.readable == 0 {
            close()
            return
        }
        if machine.isHandshaking {
            continueHandshake()
            return
        }
        if machine.tlsWantsWrite && events & ReadyEvents.writable != 0 {
            machine.onTLSCanWrite()
            readAvailable()
            guard !closed else { return }
        }
        if events & ReadyEvents.readable != 0 {
            readAvailable()
        } else if events & ReadyEvents.peerClosed != 0 {
            clientFinishedSending()
        }
        guard !closed else { return }
        if events & ReadyEvents.writable != 0 {
            flush()
            guard !closed else { return }
        }
        updateInterest()
    }

    var pendingOut: Int { outBuf.count - outStart }

    /// Client bytes: from the socket, or decrypted from the TLS session over it.
    @inline(__always)
    func receive(_ buffer: UnsafeMutableRawBufferPointer) -> IOResult {
        guard machine.speaksTLS else { return Syscall.read(fd, buffer) }
        var wantsWrite = false
        let result = ClientTLSIO.read(tls!, buffer, wantsWrite: &wantsWrite)
        if wantsWrite { machine.onTLSWantsWrite() }
        return result
    }

    /// Bytes to the client: to the socket, or encrypted through the TLS session.
    @inline(__always)
    func send(_ bytes: UnsafeRawBufferPointer) -> IOResult {
        guard machine.speaksTLS else { return Syscall.write(fd, bytes) }
        return ClientTLSIO.write(tls!, bytes)
    }

    func readAvailable() {
        if machine.isLingering {
            discardInput()
            return
        }
        // The client's next bytes after a CONNECT's 200 are TLS: they wait for the session.
        if machine.awaitsTunnel { return }
        while !closed && inBuf.count - inStart < Connection.inHighWater {
            switch receive(ctx.readBuffer) {
            case .done(let n):
                // client_header_timeout runs from the first byte of a head, blank lines included.
                machine.onClientBytes(now: ctx.loop.now)
                if inStart > 0 && inStart == inBuf.count {
                    inBuf.removeAll()
                    inStart = 0
                }
                inBuf.append(UnsafeRawBufferPointer(rebasing: ctx.readBuffer[0..<n]))
                if n < ctx.readBuffer.count {
                    process()
                    return
                }
            case .wouldBlock:
                process()
                return
            case .closed:
                process()
                clientFinishedSending()
                return
            }
        }
        process()
    }

    private func clientFinishedSending() {
        switch machine.onClientFinishedSending(pendingOut: pendingOut) {
        case .none: break
        case .close: close()
        }
    }

    /// The client has shut down its side and every request it sent has been taken.
    var noMoreRequests: Bool { machine.peerHalfClosed && inStart == inBuf.count }

    // MARK: parsing

    /// Feeds buffered client bytes to the parser while the current exchange can take them.
    func process() {
        // The parser wants another call after every event, even with no bytes left (`.end` may be due).
        var more = true
        while more && machine.parsesRequests {
            if let exchange, exchange.bodyBacklogged(waitingForBody: machine.exchange.isWaitingForBody) { break }
            let base = inStart
            let (consumed, event) = inBuf.withUnsafeBytes(from: base) { parser.parse($0) }
            inStart += consumed
            if let event {
                handle(event, base: base)
            } else {
                more = consumed > 0 && inStart < inBuf.count
            }
        }
        if exchange == nil && inStart < inBuf.count { machine.onPipelinedBytesWaiting(now: ctx.loop.now) }
        compactInput()
        updateInterest()
    }

    func compactInput() {
        if inStart == inBuf.count && inStart > 0 {
            inBuf.removeAll(keepingCapacity: inBuf.capacity <= 2 * Connection.inHighWater)
            inStart = 0
        } else if inStart > Connection.inHighWater {
            inBuf.removeFirst(inStart)
            inStart = 0
        }
    }

    private func handle(_ event: consuming ParseEvent, base: Int) {
        switch consume event {
        case .head(let head):
            begin(head)
        case .body(let range):
            guard let exchange else { return }
            let buffering = inBuf.withUnsafeBytes(from: base) { raw in
                takeBody(UnsafeRawBufferPointer(rebasing: raw[range]), into: exchange)
            }
            if exchange.overBodyLimit {
                fail(.bodyTooLarge)
                return
            }
            if let why = exchange.spoolFailure {
                ctx.logger.error("\(why)")
                fail(.overloaded)
                return
            }
            if case .send = buffering {
                upstream.forward(exchange, self)
            } else {
                upstream.sendUpstream(exchange, self)
            }
        case .end:
            guard let exchange else { return }
            let buffering = bodyEnded(exchange)
            let over = machine.onRequestEnded()
            if case .send = buffering {
                upstream.forward(exchange, self)
            } else {
                upstream.sendUpstream(exchange, self)
            }
            if over { finish(exchange) }
        case .error(let error):
            fail(ProxyError(error))
        }
    }

    // MARK: writing and closing

    /// Queues bytes for the client; the send timeout counts from when bytes start to wait.
    func appendOut(_ bytes: [UInt8]) {
        if pendingOut == 0 { machine.onOutputWaiting(now: ctx.loop.now) }
        outBuf.append(bytes)
    }

    func flush() {
        // Audit lines wait for the turn's end: the client's bytes go after them (`AuditBatch`).
        if ctx.auditing && ctx.auditBatch.holds(self) { return }
        if outStart < outBuf.count {
            while outStart < outBuf.count {
                let result = outBuf.withUnsafeBytes(from: outStart) { send($0) }
                switch result {
                case .done(let n):
                    outStart += n
                    machine.onClientTook(now: ctx.loop.now)
                case .wouldBlock:
                    updateInterest()
                    upstream.resumeIfDrained(self)
                    return
                case .closed:
                    close()
                    return
                }
            }
            outBuf.removeAll(keepingCapacity: outBuf.capacity <= 2 * Connection.outHighWater)
            outStart = 0
        }
        switch machine.onOutputWritten(now: ctx.loop.now, unparsedInput: inStart < inBuf.count) {
        case .none: break
        case .close:
            close()
            return
        case .linger:
            startLingering()
            return
        case .startTunnelTLS:
            startTunnelTLS()
            return
        }
        upstream.resumeIfDrained(self)
        updateInterest()
    }

    func updateInterest() {
        guard !closed, !machine.isLingering else { return }
        var wanted: Interest = []
        if machine.readsRequests && inBuf.count - inStart < Connection.inHighWater {
            wanted.insert(.read)
        }
        if pendingOut > 0 { wanted.insert(.write) }
        if machine.speaksTLS || machine.awaitsTunnel { wanted = adjustedForTLS(wanted) }
        if wanted != interest {
            interest = wanted
            ctx.loop.modify(fd, wanted)
        }
    }

    /// Closing with unread client bytes makes the kernel send a reset that can destroy the answer
    /// still in flight (a 413 or 400 the client never reads). So: stop sending, read and drop what
    /// the client still sends for a moment (`ConnectionMachine`: the sweep's tick ends it, no timer
    /// per connection), then close (nginx's lingering close).
    private func startLingering() {
        if machine.tlsEstablished { _ = tls!.shutdown() }
        Syscall.shutdownWrite(fd)
        interest = .read
        ctx.loop.modify(fd, .read)
        discardInput()
    }

    private func discardInput() {
        while !closed {
            switch Syscall.read(fd, ctx.readBuffer) {
            case .done: continue
            case .wouldBlock: return
            case .closed:
                close()
                return
            }
        }
    }

    func close() {
        guard !closed else { return }
        let ending = machine.exchange
        let sendsCloseNotify = machine.tlsEstablished
        machine.onClosed()
        // `ending` is this exchange's machine while `exchange` is set (they begin and end together).
        if let exchange {
            // An upstream connection in the middle of an exchange cannot be reused.
            exchange.detach()
            upstream.detach()
            if ending.responseStarted && !ending.responseDone { exchange.record.endedShort(status: 499) }
            // Every request has its access-log line: a client gone (or cut by `client_send_timeout`)
            // before its answer's end is one `recordFinished` never saw.
            if ctx.configuration.log.accessLog && !exchange.record.recorded {
                exchange.record.endedShort(status: 499)
                logAccess(exchange, event: "client_gone", seconds: ctx.loop.now - exchange.startedAt)
            }
            if ctx.auditing { audit(exchange) }
            if exchange.record.trace != nil && !exchange.record.recorded {
                exchange.record.endedShort(status: 499)
                exchange.record.trace?.tracer.finish(exchange)
            }
            exchange.releaseReplay()
        }
        exchange = nil
        ctx.loop.unregister(fd, self)
        // close_notify (RFC 8446 §6.1), best effort: the socket closes whatever it answers.
        if sendsCloseNotify { _ = tls!.shutdown() }
        Syscall.close(fd)
        ctx.connections[fd] = nil
        ctx.shared.openConnections.subtract(1, ordering: .relaxed)
    }

    /// The socket leaves this connection for a tunnel (`ByteTunnel`, `ByteRelay`), open and still
    /// counted as a connection: it (under its TLS session, if it speaks TLS), the client bytes not
    /// parsed, and the bytes not yet written to it.
    func relinquishSocket() -> (end: ByteRelay.End, unread: [UInt8], unwritten: [UInt8], tlsWantsWrite: Bool) {
        // The bytes not written leave with the socket: the audit lines that must precede them go now.
        if ctx.auditing { ctx.auditBatch.writeWaiting() }
        let unread = inBuf.withUnsafeBytes(from: inStart) { Array($0) }
        inStart = inBuf.count
        let unwritten = outBuf.withUnsafeBytes(from: outStart) { Array($0) }
        outStart = outBuf.count
        let end: ByteRelay.End = machine.speaksTLS ? .tls(fd, tls!) : .socket(fd)
        let tlsWantsWrite = machine.tlsWantsWrite
        exchange?.detach()
        upstream.detach()
        exchange = nil
        machine.onClosed()
        ctx.loop.unregister(fd, self)
        ctx.connections[fd] = nil
        return (end, unread, unwritten, tlsWantsWrite)
    }

    func setInterest(_ wanted: Interest) {
        guard wanted != interest else { return }
        interest = wanted
        ctx.loop.modify(fd, wanted)
    }

    // MARK: timeouts and drain

    func checkTimeouts(now: Double) {
        let limits = ctx.configuration.limits
        var surroundings = ConnectionMachine.ExchangeSurroundings()
        if let exchange {
            let waitingForBody = machine.exchange.isWaitingForBody
            surroundings = .init(
                upstreamActive: upstream.isActive, bodyBacklogged: exchange.bodyBacklogged(waitingForBody: waitingForBody),
                waitingForToken: exchange.waitingForToken)
        }
        let action = machine.onTick(
            now: now, pendingOut: pendingOut, surroundings,
            ConnectionMachine.Timeouts(
                clientHeaderTimeout: limits.clientHeaderTimeout, clientIdleTimeout: limits.clientIdleTimeout,
                clientSendTimeout: limits.clientSendTimeout), ctx.timeouts)
        switch action {
        case .none:
            break
        case .sendTimedOut:
            ctx.logger.info("client took no byte of the answer for \(Int(limits.clientSendTimeout))s: closing")
            close()
        case .requestTimeout:
            fail(.requestTimeout)
        case .close:
            close()
        case .exchange(let timeout):
            if let exchange { upstream.timedOut(exchange, timeout, self) }
        }
    }

    /// Drain: idle connections close now; busy ones close after their current answer.
    func beginDrain() {
        if machine.onDrain(parserIdle: parser.isIdle, unparsedInput: inStart < inBuf.count) { close() }
    }
}
