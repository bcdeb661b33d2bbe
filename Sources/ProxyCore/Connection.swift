import Config
import Credentials
import HTTP1
import Sockets
import TLS
import Upstream

/// One client connection: reads and parses requests, checks them, forwards each one upstream with
/// the token and streams the answer back, one exchange at a time (pipelined requests wait their
/// turn, so answers leave in order, RFC 9112 §9.3.2). After a 101 the connection is a byte tunnel.
/// Everything here runs on its loop's thread. This class is the client side; the upstream half
/// (sending, the answer, the tunnel) is its `UpstreamLeg`, the token side its `ExchangeTokens`.
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
    /// Parses the current exchange's answer (`UpstreamLeg`); one per client connection, reset for every try.
    var responseParser: ResponseParser
    /// The upstream half of its exchanges.
    let leg: UpstreamLeg
    /// The token side of its exchanges.
    let tokens: ExchangeTokens
    /// The buffer each exchange queues its upstream bytes in, lent to one exchange at a time (no
    /// allocation per request).
    let upstreamOut = ByteBuffer()
    /// Client bytes read and not yet parsed (from `inStart`).
    let inBuf = ByteBuffer()
    var inStart = 0
    /// Bytes for the client not yet written (from `outStart`).
    let outBuf = ByteBuffer()
    var outStart = 0
    private var interest: Interest = .read
    /// Where the connection is in its life, its client-side clocks and the exchange in progress
    /// (`machine.exchange`): every decision is its; this class performs them.
    var machine: ConnectionMachine
    /// The bytes and the upstream leg of the exchange in progress; set and cleared with `machine.exchange`.
    private(set) var exchange: Exchange?
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
    private var tls: TLSSession?

    init(fd: Int32, peer: SocketAddress, ctx: LoopContext, ownRoute: String? = nil, tls: TLSSession? = nil) {
        self.fd = fd
        self.ownRoute = ownRoute
        self.peer = peer
        self.tls = tls
        forwardedForLines = Forwarder.forwardedForLines(peerHost: peer.host, https: tls != nil)
        self.ctx = ctx
        // The body limit is checked here, after the access checks (CONTRACT point 10), not by the parser.
        parser = RequestParser(limits: ParserLimits(maxHeaderBytes: ctx.configuration.limits.maxHeaderBytes, maxBodyBytes: 0))
        responseParser = ResponseParser(limits: ResponseParserLimits(maxHeadBytes: ctx.configuration.limits.maxHeaderBytes))
        leg = UpstreamLeg(ctx: ctx)
        tokens = ExchangeTokens(ctx: ctx)
        machine = ConnectionMachine(now: ctx.loop.now, tls: tls != nil)
    }

    // MARK: events

    /// Scheduled by `finish` and `upstreamTookBody` (not from inside an upstream event): parse on.
    func runLoopTask() {
        guard !closed else { return }
        if machine.isTunnel || (machine.speaksTLS && tls!.hasBufferedInput) {
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

    private func readAvailable() {
        if machine.isLingering {
            discardInput()
            return
        }
        // The client's next bytes after a CONNECT's 200 are TLS: they wait for the session.
        if machine.awaitsTunnel { return }
        if machine.isTunnel, let exchange {
            leg.readIntoTunnel(exchange, self)
            return
        }
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
        case .closeTunnel: if let exchange { leg.tunnelSideClosed(exchange, upstreamClosed: false, self) }
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
                leg.forward(exchange, self)
            } else {
                leg.sendUpstream(exchange, self)
            }
        case .end:
            guard let exchange else { return }
            let buffering = bodyEnded(exchange)
            let over = machine.onRequestEnded()
            if case .send = buffering {
                leg.forward(exchange, self)
            } else {
                leg.sendUpstream(exchange, self)
            }
            if over { finish(exchange) }
        case .error(let error):
            fail(ProxyError(error))
        }
    }

    // MARK: one exchange

    private func begin(_ head: consuming RequestHead) {
        // CONNECT, when the forward proxy serves it (CONTRACT "HTTPS for clients"); inside a tunnel,
        // the pin first: a request for another host gets 421 and nothing goes upstream.
        if ctx.servesConnect || machine.speaksTLS {
            if AccessPolicy.isConnect(head.method) {
                connect(head)
                return
            }
            if let pin = machine.pin {
                beginInTunnel(head, pin)
                return
            }
        }
        // A file without routes has one route, taken without a lookup.
        if let single = ctx.routes.single {
            let checked = single.policy.check(head)
            proceed(open(head, route: single), route: single, checked: checked)
            return
        }
        // The route first (CONTRACT point 10: no_route comes before the access checks).
        switch ctx.routes.select(head, ownRoute: ownRoute) {
        case .failure(let error):
            respond(error, to: open(head, route: nil))
        case .success(let selection):
            let route = selection.route
            let checked = route.policy.check(head, selection.target, strip: selection.strip)
            proceed(open(head, route: route), route: route, checked: checked)
        }
    }

    /// A request inside a forward-proxy tunnel: the pin, then the route table with the tunnel's host.
    private func beginInTunnel(_ head: consuming RequestHead, _ pin: TunnelPin) {
        let target: AccessPolicy.ParsedTarget
        do {
            target = try AccessPolicy.parse(head)
        } catch {
            respond(error, to: openInTunnel(head, route: nil))
            return
        }
        let absolute = target.absolute.map { (host: $0.host, port: $0.port, scheme: $0.scheme) }
        guard ForwardProxyRules.pin(hostField: head.first("host"), absolute: absolute, tunnelHost: pin.host, tunnelPort: pin.port) else {
            respond(.misdirectedRequest, to: openInTunnel(head, route: nil))
            return
        }
        switch ctx.routes.select(head, ownRoute: nil, tunnelHost: pin.host) {
        case .failure(let error):
            respond(error, to: openInTunnel(head, route: nil))
        case .success(let selection):
            let route = selection.route
            let checked = route.policy.check(head, selection.target, strip: selection.strip, inTunnel: true)
            proceed(openInTunnel(head, route: route), route: route, checked: checked)
        }
    }

    private func openInTunnel(_ head: consuming RequestHead, route: LoopRoute?) -> Exchange {
        let exchange = open(head, route: route)
        exchange.tunnelHost = machine.pin?.host
        return exchange
    }

    @inline(__always)
    private func open(_ head: consuming RequestHead, route: LoopRoute?) -> Exchange {
        let dropped = head.droppedFieldCount
        machine.onRequestHead(
            ExchangeMachine(
                head: head, draining: ctx.shared.draining.load(ordering: .relaxed), requestBuffering: route?.requestBuffering ?? 0,
                spoolLimit: route?.requestBufferingDisk ?? 0, signingBodyLimit: route?.signingBodyLimit,
                signingMayStreamUnsigned: route?.sigv4?.mayStreamUnsigned ?? false))
        let exchange = Exchange(head: head, route: route, startedAt: ctx.loop.now, upOut: upstreamOut)
        self.exchange = exchange
        if dropped > 0 { ctx.metrics.droppedUnderscoreFields(dropped) }
        return exchange
    }

    @inline(__always)
    private func proceed(_ exchange: Exchange, route: LoopRoute, checked: Result<AccessPolicy.CheckedTarget, ProxyError>) {
        switch checked {
        case .failure(let error):
            respond(error, to: exchange)
        case .success(let target):
            exchange.accept(target, route: route, maxBodyBytes: ctx.configuration.limits.maxBodyBytes, shared: ctx.shared)
            if exchange.keepsReplay { machine.exchange.onReplayKept(true) }
            // A chunked body within `forward.request_buffering` is read first (`forward` once it ends);
            // a client that waits for `100 Continue` before sending it gets the proxy's own.
            if !machine.exchange.isWaitingForBody {
                leg.forward(exchange, self)
            } else if machine.exchange.answersContinue {
                appendOut(Forwarder.continueHead)
                flush()
            }
        }
    }

    // MARK: ending an exchange

    /// Answers with one of the proxy's own errors.
    func respond(_ error: ProxyError, to exchange: Exchange) {
        exchange.detachUpstream()?.retire()
        exchange.takeHeld401()
        machine.exchange.onProxyAnswer(closesConnection: error.closesConnection)
        exchange.record.answered(status: error.status, refusal: error.code)
        let fromTokenState: Bool
        switch error {
        case .loginRequired, .tokenUnavailable: fromTokenState = true
        default: fromTokenState = false
        }
        let bytes = error.response(
            keepAlive: machine.exchange.keepAlive && !noMoreRequests, isHead: machine.exchange.isHEAD,
            route: fromTokenState ? exchange.route?.errorName : nil)
        exchange.record.wroteOut(bytes.count)
        appendOut(bytes)
        responseDone(exchange)
    }

    /// A request that could not even be parsed (or a timeout): answer, then close.
    func fail(_ error: ProxyError) {
        switch machine.onRequestFailed() {
        case .close:
            close()
        case .answerInExchange:
            if let exchange { respond(error, to: exchange) }
        case .answerAlone:
            let bytes = error.response(keepAlive: false, isHead: false)
            appendOut(bytes)
            ctx.metrics.requestFinished(status: error.status, bytesIn: 0, bytesOut: bytes.count)
            flush()
        }
    }

    func responseDone(_ exchange: Exchange) {
        let over = machine.onResponseDone(noMoreRequests: noMoreRequests)
        recordFinished(exchange)
        if over { finish(exchange) }
        flush()
    }

    func recordFinished(_ exchange: Exchange) {
        guard exchange.record.markRecorded() else { return }
        exchange.releaseReplay()
        machine.exchange.onReplayKept(false)
        ctx.metrics.requestFinished(status: exchange.record.status, bytesIn: exchange.bodyBytesSeen, bytesOut: exchange.record.bytesOut)
        let seconds = ctx.loop.now - exchange.startedAt
        if exchange.metricsSlot >= 0 {
            ctx.metrics.counters.routes[exchange.metricsSlot].requestFinished(status: exchange.record.status, seconds: seconds)
        }
        if ctx.configuration.log.accessLog { logAccess(exchange, event: "request", seconds: seconds) }
    }

    /// One access-log line (docs/OBSERVABILITY.md "Access log").
    func logAccess(_ exchange: Exchange, event: String, seconds: Double) {
        let record = exchange.accessRecord(event: event, seconds: seconds)
        ctx.logger.info(record.message, metadata: record.metadata)
    }

    /// Both halves of the exchange are over: go on with the next pipelined request.
    func finish(_ exchange: Exchange) {
        guard self.exchange === exchange else { return }
        // A token that arrives late finds the exchange over and leaves the buffer to the next one.
        exchange.detach()
        self.exchange = nil
        upstreamOut.removeAll(keepingCapacity: upstreamOut.capacity <= 4 * Connection.bodyHighWater)
        switch machine.onExchangeFinished(now: ctx.loop.now, noMoreRequests: noMoreRequests) {
        case .readNext: ctx.loop.schedule(task: self)  // runLoopTask: process() on the next turn
        case .closeAfterWrite, .awaitTunnelTLS: break  // `flush` goes on when the answer is written
        }
    }

    /// The answer had started when the upstream failed: the exchange ends here, what was sent goes
    /// out, then the connection closes short of the announced end.
    func cutShort(_ exchange: Exchange) {
        exchange.record.endedShort(status: 502)
        recordFinished(exchange)
        exchange.detach()
        self.exchange = nil
        machine.onAnswerCut()
        flush()
    }

    // MARK: writing and closing

    /// Queues bytes for the client; the send timeout counts from when bytes start to wait.
    func appendOut(_ bytes: [UInt8]) {
        if pendingOut == 0 { machine.onOutputWaiting(now: ctx.loop.now) }
        outBuf.append(bytes)
    }

    func flush() {
        if outStart < outBuf.count {
            while outStart < outBuf.count {
                let result = outBuf.withUnsafeBytes(from: outStart) { send($0) }
                switch result {
                case .done(let n):
                    outStart += n
                    machine.onClientTook(now: ctx.loop.now)
                case .wouldBlock:
                    updateInterest()
                    leg.resumeIfDrained(self)
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
        leg.resumeIfDrained(self)
        updateInterest()
    }

    func updateInterest() {
        guard !closed, !machine.isLingering else { return }
        var wanted: Interest = []
        if machine.isTunnel, let exchange {
            if exchange.pendingUpstreamCount < Connection.bodyHighWater && !machine.peerHalfClosed { wanted.insert(.read) }
        } else if machine.readsRequests && inBuf.count - inStart < Connection.inHighWater {
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
            exchange.detachUpstream()?.retire()
            exchange.detach()
            if ending.responseStarted && !ending.responseDone { exchange.record.endedShort(status: 499) }
            if ending.isTunnel { ctx.metrics.tunnelClosed() }
            // Every request has its access-log line: a tunnel's end, or a client gone (or cut by
            // `client_send_timeout`) before its answer's end, which `recordFinished` never saw.
            if ctx.configuration.log.accessLog {
                if ending.isTunnel {
                    logAccess(exchange, event: "tunnel_closed", seconds: ctx.loop.now - exchange.startedAt)
                } else if !exchange.record.recorded {
                    exchange.record.endedShort(status: 499)
                    logAccess(exchange, event: "client_gone", seconds: ctx.loop.now - exchange.startedAt)
                }
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

    // MARK: TLS

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

    /// One step of the handshake; when it is done, requests are read as on a plain connection.
    private func continueHandshake() {
        guard let tls else { return }
        switch tls.handshake() {
        case .done:
            machine.onHandshakeDone()
            // A client may send its request with its Finished: read it now, not at the next event.
            readAvailable()
            guard !closed else { return }
            updateInterest()
        case .wantRead:
            setInterest(.read)
        case .wantWrite:
            setInterest(.write)
        case .closed:
            // Closed before or during the ClientHello: no failed handshake (CONTRACT "HTTPS for clients").
            close()
        case .failed(let failure):
            ctx.metrics.tlsHandshakeFailed()
            if ctx.shared.handshakeFailureLog.shouldLog(address: peer.host, now: ctx.loop.now) {
                ctx.logger.warning("TLS handshake with \(peer.host) failed: \(failure) (logged once a minute per client address)")
            }
            // Plain HTTP on a TLS port: say so in plain HTTP, as nginx does, rather than just closing.
            if machine.onHandshakeFailed(notTLS: failure == .notTLS) == .answerPlainlyThenClose {
                let answer = ProxyError.badRequest("this port speaks TLS: use https://").response(keepAlive: false, isHead: false)
                answer.withUnsafeBytes { _ = Syscall.write(fd, $0) }
            }
            close()
        }
    }

    /// What TLS changes in the interest: OpenSSL's own wish to write, no reading while a CONNECT's 200
    /// waits to go out, and decrypted bytes OpenSSL holds, which wake no epoll: they are read on the
    /// next turn (a record larger than the room that was left in the input buffer).
    @inline(never)
    private func adjustedForTLS(_ interest: Interest) -> Interest {
        // During the handshake its own step says what to wait for (`continueHandshake`).
        if machine.isHandshaking { return self.interest }
        var wanted = interest
        if machine.tlsWantsWrite { wanted.insert(.write) }
        if machine.awaitsTunnel { wanted.remove(.read) }
        if machine.speaksTLS, wanted.contains(.read), tls!.hasBufferedInput { ctx.loop.schedule(task: self) }
        return wanted
    }

    private func setInterest(_ wanted: Interest) {
        guard wanted != interest else { return }
        interest = wanted
        ctx.loop.modify(fd, wanted)
    }

    // MARK: the forward proxy (CONTRACT "HTTPS for clients")

    /// CONNECT: a `host` route's name opens a tunnel the proxy ends TLS in; anything else is 403
    /// (or 405 without `forward_proxy`, on a route's own listener, or on a TLS listener, where the
    /// tunnel's TLS would run inside the listener's).
    private func connect(_ head: consuming RequestHead) {
        guard let forward = ctx.forwardProxy, ownRoute == nil, !machine.speaksTLS else {
            let error: ProxyError = machine.pin != nil ? .refusedConnect("a CONNECT inside a tunnel is not served") : .methodNotAllowed
            respond(error, to: open(head, route: nil))
            return
        }
        let target = head.target
        // The tunnel outlives this exchange whatever the CONNECT's HTTP version said.
        head.keepAlive = true
        switch ForwardProxyRules.decide(connectTarget: target, table: ctx.routes.table, otherHosts: forward.settings.otherHosts) {
        case .refuse(let why):
            ctx.metrics.forwardProxyConnect(route: nil, outcome: .refused)
            let exchange = open(head, route: nil)
            exchange.tunnelHost = TunnelPin.loggable(target)
            respond(.refusedConnect(why), to: exchange)
        case .tunnel(let host, let port):
            // Bytes both ways to a host no route names: the socket is the tunnel's from here on.
            // The key of any route that requires one opens it (no route's own rules apply).
            let keys = ctx.routes.routes.filter { $0.policy.requiredHeader != nil }
            guard keys.isEmpty || keys.contains(where: { $0.policy.admitsConnect(head) }) else {
                ctx.metrics.forwardProxyConnect(route: nil, outcome: .refused)
                let exchange = open(head, route: nil)
                exchange.tunnelHost = host
                respond(.forbiddenClient, to: exchange)
                return
            }
            ByteTunnel.start(ctx: ctx, clientFD: fd, host: host, port: port, early: relinquishSocket())
        case .intercept(let index, let host, let port):
            let route = ctx.routes.routes[index]
            let admitted = route.policy.admitsConnect(head)
            let exchange = open(head, route: route)
            exchange.tunnelHost = host
            guard admitted else {
                ctx.metrics.forwardProxyConnect(route: route, outcome: .refused)
                respond(.forbiddenClient, to: exchange)
                return
            }
            let session: TLSSession
            do {
                session = try forward.session(fd: fd, host: host)
            } catch {
                ctx.logger.error("forward proxy: no certificate for \(host): \(error)")
                ctx.metrics.forwardProxyConnect(route: route, outcome: .refused)
                respond(.badGateway("the proxy could not make a certificate for this host"), to: exchange)
                return
            }
            ctx.metrics.forwardProxyConnect(route: route, outcome: .intercepted)
            // The session waits for the 200 to be written; the machine says when it takes the socket.
            tls = session
            machine.onConnectAnswered(TunnelPin(host: host, port: port))
            machine.exchange.onProxyAnswer(closesConnection: false)
            exchange.record.answered(status: 200, refusal: nil)
            let bytes = Forwarder.connectionEstablished
            exchange.record.wroteOut(bytes.count)
            appendOut(bytes)
            responseDone(exchange)
        }
    }

    /// The socket leaves this connection (for a `ByteTunnel`), open and still counted as a
    /// connection; returns the bytes that came after the CONNECT head.
    private func relinquishSocket() -> [UInt8] {
        let early = inBuf.withUnsafeBytes(from: inStart) { Array($0) }
        inStart = inBuf.count
        machine.onClosed()
        ctx.loop.unregister(fd, self)
        ctx.connections[fd] = nil
        return early
    }

    /// A CONNECT's 200 has gone out and its exchange is over (`WrittenAction.startTunnelTLS`): the
    /// TLS session takes the socket, and requests in it are this tunnel's (X-Forwarded-Proto https).
    private func startTunnelTLS() {
        forwardedForLines = Forwarder.forwardedForLines(peerHost: peer.host, https: true)
        continueHandshake()
    }

    // MARK: timeouts and drain

    func checkTimeouts(now: Double) {
        let limits = ctx.configuration.limits
        var surroundings = ConnectionMachine.ExchangeSurroundings()
        if let exchange {
            let waitingForBody = machine.exchange.isWaitingForBody
            surroundings = .init(
                upstreamActive: exchange.upstreamActive, bodyBacklogged: exchange.bodyBacklogged(waitingForBody: waitingForBody),
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
            if let exchange { leg.timedOut(exchange, timeout, self) }
        }
    }

    /// Drain: idle connections close now; busy ones close after their current answer.
    func beginDrain() {
        if machine.onDrain(parserIdle: parser.isIdle, unparsedInput: inStart < inBuf.count) { close() }
    }
}

/// A loop-owned object carried through a closure that another thread hands back to its loop
/// (`EventLoop.execute`, from the token thread). @unchecked Sendable is safe: the reference is
/// weak, and it is read only inside that closure, on the owning loop's thread, where the object lives.
struct LoopBound<Object: AnyObject>: @unchecked Sendable {
    weak var object: Object?
    init(_ object: Object) { self.object = object }
}

func wallClock() -> Double { Syscall.wallClock() }
