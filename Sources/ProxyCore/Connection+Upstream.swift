import Credentials
import HTTP1
import Sockets
import Upstream

/// The upstream half of a client connection's exchange (docs/ENGINE.md): the request goes up as
/// the proxy writes it, the answer is parsed by `HTTP1.ResponseParser` and framed again for the
/// client; a 401 may be held for one retry; a 101 turns both connections into a tunnel. What
/// happens is reported to the exchange's `ExchangeMachine`, and what it decides is done here.
extension Connection {
    // MARK: sending upstream

    /// Sends the request with `token` (nil: the client's own Authorization goes), on an idle pooled
    /// connection when there is one (`fresh`: never), else on a new one.
    func send(_ exchange: Exchange, token: TokenSnapshot?, fresh: Bool = false) {
        let route = exchange.route!
        let forwarder = route.forwarder
        let forwardedHost = exchange.forwardedHost.map { forwardedHostLine.line(for: $0) }
        let wholeBodyLength = exchange.beginTry(machine.exchange)
        forwarder.writeRequestHead(
            into: exchange.upOut, for: exchange.head, path: exchange.path, query: exchange.query,
            authorization: token?.authorizationField, forwardedFor: forwardedForLines, forwardedHost: forwardedHost,
            upgrade: machine.exchange.wantsUpgrade, wholeBodyLength: wholeBodyLength, dpop: route.dpopEnabled ? token?.dpop : nil,
            absoluteAuthority: forwarder.preserveHost && exchange.head.target.utf8.first != UInt8(ascii: "/") ? exchange.forwardedHost : nil)
        exchange.headWritten(token: token, now: ctx.loop.now, &machine.exchange)
        responseParser.reset()
        responseParser.expect(requestMethodIsHEAD: machine.exchange.isHEAD)
        exchange.attach(to: self)
        if !fresh, let idle = route.upstream.takeIdle() {
            ctx.metrics.counters.routes[route.metricsSlot].connectionsReused += 1
            upstreamConnected(exchange, idle)
            return
        }
        do {
            let startedAt = ctx.loop.now
            exchange.connecting(try route.upstream.connect(exchange), startedAt: startedAt)
        } catch {
            ctx.noteUpstreamFailure("the upstream connection could not be started: \(error)")
            respond(.badGateway("the upstream connection could not be started: \(error)"), to: exchange)
        }
    }

    func upstreamConnected(_ exchange: Exchange, _ upstream: UpstreamConnection) {
        if let took = exchange.connected(upstream, now: ctx.loop.now) {
            // A new connection: TCP, TLS and any proxy tunnel (`tokenproxy_upstream_connect_seconds`).
            let route = exchange.route!
            ctx.metrics.counters.routes[route.metricsSlot].connectionsOpened += 1
            ctx.metrics.counters.routes[route.metricsSlot].upstreamConnect[route.tlsIndex].observe(took)
        }
        pumpUpstream(exchange)
        updateUpstreamInterest(exchange)
    }

    func upstreamFailed(_ exchange: Exchange, _ failure: UpstreamFailure) {
        exchange.connectFailed()
        ctx.noteUpstreamFailure("\(failure)")
        switch failure {
        case .timedOut: respond(.upstreamTimeout, to: exchange)
        case .unreachable(let why): respond(.badGateway("the upstream could not be reached: \(why)"), to: exchange)
        }
    }

    /// New body bytes (or the body's end) are queued: send what the upstream takes.
    func sendUpstream(_ exchange: Exchange) {
        guard exchange.upstream != nil else { return }
        pumpUpstream(exchange)
        updateUpstreamInterest(exchange)
    }

    /// Writes what is queued for the upstream until it takes no more.
    func pumpUpstream(_ exchange: Exchange) {
        guard let upstream = exchange.upstream, !machine.exchange.sendStopped else { return }
        let wasFull = exchange.bytesWaitingToGoUp >= Connection.bodyHighWater
        let spooled = exchange.spoolHasMore
        if spooled { exchange.refillFromSpool(&machine.exchange) }
        while exchange.upOutStart < exchange.upOut.count {
            let start = exchange.upOutStart
            let result = exchange.upOut.withUnsafeBytes(from: start) { upstream.send($0) }
            switch result {
            case .done(let n):
                ctx.metrics.counters.routes[exchange.metricsSlot].upstreamSentBytes += n
                exchange.sent(n, now: ctx.loop.now, &machine.exchange)
            case .wouldBlock:
                break
            case .closed:
                // The upstream stopped reading; it may have answered first (epoll reports the hang-up
                // and the answer is read then).
                machine.exchange.onSendFailed()
            }
            if case .done = result {
                if spooled && exchange.spoolHasMore { exchange.refillFromSpool(&machine.exchange) }
                continue
            }
            break
        }
        if wasFull && exchange.bytesWaitingToGoUp < Connection.bodyHighWater {
            ctx.loop.schedule(task: self)  // room again: read the client on the next turn
        }
    }

    func updateUpstreamInterest(_ exchange: Exchange) {
        guard let upstream = exchange.upstream else { return }
        let paused = machine.exchange.receivePaused
        var wanted: Interest = []
        if !paused { wanted.insert(.read) }
        if !machine.exchange.sendStopped && exchange.bytesWaitingToGoUp > 0 { wanted.insert(.write) }
        upstream.setInterest(wanted)
    }

    func upstreamReady(_ exchange: Exchange, _ events: UInt32) {
        if events & ReadyEvents.writable != 0 { pumpUpstream(exchange) }
        guard exchange.upstream != nil, self.exchange === exchange else { return }
        // A hang-up is read even while paused: what is left is bounded by the socket's buffer.
        if events & ReadyEvents.failed != 0 || (events & ReadyEvents.readable != 0 && !machine.exchange.receivePaused) {
            readUpstream(exchange)
        }
        updateUpstreamInterest(exchange)
    }

    /// The client took enough of the answer: read the upstream again. With TLS the library may
    /// hold bytes epoll cannot see, so read now rather than wait for readiness.
    func resumeUpstreamIfDrained() {
        guard let exchange, machine.exchange.receivePaused, pendingOut < Connection.outLowWater else { return }
        machine.exchange.onClientCaughtUp()
        readUpstream(exchange)
        updateUpstreamInterest(exchange)
    }

    // MARK: reading the answer

    func readUpstream(_ exchange: Exchange) {
        // One read at a time: the loop's buffer holds the bytes being passed on.
        guard exchange.beginReading() else { return }
        defer { exchange.endReading() }
        let buffer = ctx.upstreamBuffer
        while let upstream = exchange.upstream, self.exchange === exchange, !machine.exchange.receivePaused || machine.exchange.sendStopped {
            switch upstream.receive(into: buffer) {
            case .done(let n):
                ctx.metrics.counters.routes[exchange.metricsSlot].upstreamReceivedBytes += n
                machine.exchange.onAnswerBytes(n, now: ctx.loop.now)
                feedResponse(exchange, UnsafeRawBufferPointer(rebasing: buffer[0..<n]))
                if pendingOut >= Connection.outHighWater, let e = self.exchange, e === exchange { machine.exchange.onClientBacklogged() }
                // Plain TCP: a short read means the socket is empty (epoll tells when there is more).
                if n < buffer.count && !upstream.buffersInternally { return }
            case .wouldBlock:
                return
            case .closed:
                upstreamClosed(exchange)
                return
            }
        }
    }

    private func feedResponse(_ exchange: Exchange, _ bytes: UnsafeRawBufferPointer) {
        var offset = 0
        while self.exchange === exchange, !closed, exchange.upstream != nil {
            if machine.isTunnel {
                if offset < bytes.count { writeRaw(UnsafeRawBufferPointer(rebasing: bytes[offset...])) }
                return
            }
            let base = offset
            let (consumed, event) = responseParser.parse(UnsafeRawBufferPointer(rebasing: bytes[base...]))
            offset += consumed
            guard let event else {
                if consumed == 0 || offset >= bytes.count { return }
                continue
            }
            switch event {
            case .informational(let head):
                relayInformational(exchange, head)
            case .head(let head, let framing):
                upstreamHead(exchange, head, framing)
            case .body(let range):
                upstreamBody(exchange, UnsafeRawBufferPointer(rebasing: bytes[(base + range.lowerBound)..<(base + range.upperBound)]))
            case .end:
                upstreamEnded(exchange, trailingBytes: offset < bytes.count)
                return
            case .error(let error):
                upstreamBroken(exchange, "the upstream's answer is not valid HTTP/1.1: \(error)")
                return
            }
        }
    }

    /// The upstream closed its side (or the connection broke).
    private func upstreamClosed(_ exchange: Exchange) {
        if machine.isTunnel {
            tunnelSideClosed(exchange, upstreamClosed: true)
            return
        }
        switch responseParser.finish() {
        case .end?:
            upstreamEnded(exchange, trailingBytes: false)
        case .error(let error)?:
            upstreamBroken(exchange, "\(error)")
        case nil, .informational?, .head?, .body?:
            // (`finish` answers only nil, `.end` or `.error`.) Nothing of an answer came. On a reused
            // connection that is the upstream closing it as the request arrived (RFC 9112 §9.3.1):
            // send again once on a fresh one when that is safe.
            let upstream = exchange.detachUpstream()
            upstream?.retire(.closedByUpstream)
            let why = "the upstream closed the connection without answering"
            act(on: machine.exchange.onClosedBeforeAnswer(connectionWasReused: upstream?.reused == true), exchange, why)
        }
    }

    /// The upstream's answer cannot be used: a 502 when nothing went to the client yet, else a cut.
    private func upstreamBroken(_ exchange: Exchange, _ why: String) {
        exchange.detachUpstream()?.retire()
        act(on: machine.exchange.onBroken(), exchange, why)
    }

    private func act(on failure: ExchangeMachine.Failure, _ exchange: Exchange, _ why: String) {
        switch failure {
        case .retryOnFreshConnection:
            ctx.metrics.retriedOnFreshConnection()
            send(exchange, token: exchange.sentToken, fresh: true)
        case .badGateway:
            let held = exchange.takeHeld401() != nil
            respond(.badGateway(held ? "the upstream answered badly: \(why)" : why), to: exchange)
        case .cut:
            // Once a response has started, a failure can only end the connection (CONTRACT): what was
            // sent goes out, then the connection closes short of the announced end.
            ctx.logger.warning("upstream failed mid-response: \(why)")
            cutShort(exchange)
        }
    }

    /// RFC 9110 §15.2: 1xx answers are relayed to HTTP/1.1 clients (never to 1.0 ones).
    private func relayInformational(_ exchange: Exchange, _ head: ResponseHead) {
        guard machine.exchange.clientVersion == .http1_1 else { return }
        let bytes = ByteBuffer()
        Forwarder.writeInformationalHead(into: bytes, head)
        appendOut(bytes.bytes)
        flush()
    }

    /// RFC 9449 §9: the upstream's newest `DPoP-Nonce` goes into later proofs; true for a 401 with
    /// `error="use_dpop_nonce"`, retried once with it (the request's one retry).
    private func noteDPoPNonce(_ head: ResponseHead, _ dpop: DPoPBinding, origin: String) -> Bool {
        guard let nonce = head.fields.first("dpop-nonce") else { return false }
        dpop.prover.upstreamGave(nonce: nonce, origin: origin)
        guard head.status == 401, let challenge = head.fields.first("www-authenticate") else { return false }
        return challenge.contains("use_dpop_nonce")
    }

    private func upstreamHead(_ exchange: Exchange, _ head: ResponseHead, _ framing: ResponseBodyFraming) {
        ctx.metrics.upstreamLatency(ctx.loop.now - machine.exchange.tryStartedAt)
        // From the request's last byte written (its head, for most) to the answer's head.
        let upstreamSeconds = ctx.loop.now - machine.exchange.lastUpstreamWrite
        ctx.metrics.counters.routes[exchange.metricsSlot].upstreamResponse.observe(upstreamSeconds)
        exchange.record.upstreamAnswered(status: head.status, seconds: upstreamSeconds)
        // Without `credentials.dpop`, one test of a constant (docs/ARCHITECTURE.md: DPoP costs nothing when off).
        var nonceDemanded = false
        if exchange.route!.dpopEnabled, let dpop = exchange.sentToken?.dpop { nonceDemanded = noteDPoPNonce(head, dpop, origin: exchange.route!.forwarder.upstream.origin) }
        let action = machine.exchange.onFinalHead(
            status: head.status, upstreamFraming: framing, tokenCanChange: exchange.route!.tokenCanChange,
            refusingGoodTokens: head.status == 401 && exchange.route!.state.refusingGoodTokens(now: ctx.loop.now))
        switch action {
        case .broken(let why):
            upstreamBroken(exchange, why)
        case .startTunnel:
            startTunnel(exchange, head)
        case .hold401:
            exchange.hold401(head, framing, dpopNonceDemanded: nonceDemanded)
        case .relay(let clientFraming, let startStormGuard):
            // A freshly refreshed token was refused too (CONTRACT point 3): no refresh storm.
            if startStormGuard {
                exchange.route!.state.upstreamRefusedFreshToken(now: ctx.loop.now)
                ctx.metrics.counters.routes[exchange.metricsSlot].stormGuardActivations += 1
            }
            // A 401 to a token that goes to the client as it came: a static token, the storm guard,
            // or the retry's own 401 (each upstream 401 counts once).
            if head.status == 401 && exchange.sentToken != nil { count401(exchange, .passedThrough) }
            writeHead(exchange, head, framing: clientFraming)
        }
    }

    /// Writes the answer's head for the client, framed as the machine decided.
    func writeHead(_ exchange: Exchange, _ response: ResponseHead, framing: ExchangeRules.ClientFraming) {
        exchange.record.answered(status: response.status)
        if pendingOut == 0 { machine.onOutputWaiting(now: ctx.loop.now) }
        let before = outBuf.count
        exchange.route!.forwarder.writeResponseHead(
            into: outBuf, response, framing: framing, closing: !machine.exchange.keepAlive || noMoreRequests,
            clientVersion: exchange.head.version, clientHost: exchange.head.first("host"))
        exchange.record.wroteOut(outBuf.count - before)
        // Not flushed here: the body usually follows in the same read, and head and body then leave
        // in one write; the body, the end, or `readUpstream`'s caller flushes.
        if machine.exchange.bodyRefused { exchange.dropQueuedBody() }
    }

    private func upstreamBody(_ exchange: Exchange, _ bytes: UnsafeRawBufferPointer) {
        switch machine.exchange.onAnswerBody(count: bytes.count) {
        case .relay:
            break
        case .hold:
            exchange.holdMore(bytes)
            return
        case .releaseHeldThenRelay:
            // Too big to hold for a retry: give up the retry and pass the answer on as it came.
            if let held = exchange.takeHeld401() {
                count401(exchange, .passedThrough)
                let framing = machine.exchange.startAnswering(status: held.head.status, upstreamFraming: held.framing)
                writeHead(exchange, held.head, framing: framing)
                held.body.withUnsafeBytes { writeBody(exchange, $0) }
            }
        }
        writeBody(exchange, bytes)
    }

    func writeBody(_ exchange: Exchange, _ bytes: UnsafeRawBufferPointer) {
        guard bytes.count > 0, !closed else { return }
        switch machine.exchange.framing {
        case .none:
            return
        case .chunked:
            exchange.record.wroteOut(bytes.count)
            if pendingOut == 0 { machine.onOutputWaiting(now: ctx.loop.now) }
            ResponseWriter.appendChunk(outBuf, bytes)
            flush()
        case .length, .close:
            exchange.record.wroteOut(bytes.count)
            writeRaw(bytes)
        }
    }

    /// Straight from the read buffer to the socket when nothing waits before it; keeps what did not fit.
    func writeRaw(_ bytes: UnsafeRawBufferPointer) {
        guard !closed else { return }
        if pendingOut == 0 {
            switch Syscall.write(fd, bytes) {
            case .done(let n):
                machine.onClientTook(now: ctx.loop.now)
                if n < bytes.count { outBuf.append(UnsafeRawBufferPointer(rebasing: bytes[n...])) }
            case .wouldBlock:
                machine.onOutputWaiting(now: ctx.loop.now)
                outBuf.append(bytes)
            case .closed:
                close()
                return
            }
            updateInterest()
            return
        }
        outBuf.append(bytes)
        flush()
    }

    /// The answer is complete. The upstream connection goes back to the pool when the exchange left
    /// it clean: the whole request written, the whole answer read, nothing after it, no `close`.
    private func upstreamEnded(_ exchange: Exchange, trailingBytes: Bool) {
        let upstreamCloses = responseParser.connectionMustClose
        let (reuse, next) = machine.exchange.onAnswerEnded(
            trailingBytes: trailingBytes, parserSaysClose: upstreamCloses, bytesWaitingToGoUp: exchange.bytesWaitingToGoUp)
        if let upstream = exchange.detachUpstream() {
            if reuse {
                exchange.route!.upstream.putIdle(upstream)
            } else {
                upstream.retire(.afterResponse(unreadBytes: trailingBytes, upstreamCloses: upstreamCloses))
            }
        }
        switch next {
        case .releaseHeld401:
            releaseHeld401(exchange)
        case .retryWithNewToken(let stale):
            if exchange.held401?.dpopNonceDemanded == true {
                // A DPoP nonce demand is retried with the same token and a proof that carries the nonce.
                ctx.metrics.retriedAfter401()
                acquireToken(for: exchange, staleGeneration: nil)
            } else {
                acquireToken(for: exchange, staleGeneration: stale)
            }
        case .complete(let refusedBody):
            if case .chunked = machine.exchange.framing { ResponseWriter.appendLastChunk(outBuf) }
            // The client is still sending a body the upstream did not wait for: answer, then close.
            if refusedBody { exchange.dropQueuedBody() }
            responseDone(exchange)
        }
    }

    // MARK: timeouts

    /// `upstream_idle_timeout` ran out mid-body (`ExchangeMachine.onTick`).
    func upstreamWentSilent(_ exchange: Exchange, seconds: Double) {
        upstreamBroken(exchange, "the upstream went silent mid-body for \(Int(seconds))s")
    }
}
