import Credentials
import HTTP1
import Sockets
import Upstream

/// The response side of `UpstreamLeg` (docs/ENGINE.md): the upstream's bytes are read, parsed by
/// `HTTP1.ResponseParser` and framed again for the client as the exchange's machine decides (relay,
/// hold a 401 for a retry, a tunnel on 101, 502 or a cut on a broken answer); at its end the
/// upstream connection goes back to the pool or is retired.
extension UpstreamLeg {
    func readUpstream(_ exchange: Exchange, _ connection: Connection) {
        // One read at a time: the loop's buffer holds the bytes being passed on.
        guard exchange.beginReading() else { return }
        defer { exchange.endReading() }
        let buffer = ctx.upstreamBuffer
        while let upstream = exchange.upstream, connection.exchange === exchange,
            !connection.machine.exchange.receivePaused || connection.machine.exchange.sendStopped
        {
            switch upstream.receive(into: buffer) {
            case .done(let n):
                ctx.metrics.counters.routes[exchange.metricsSlot].upstreamReceivedBytes += n
                connection.machine.exchange.onAnswerBytes(n, now: ctx.loop.now)
                feedResponse(exchange, UnsafeRawBufferPointer(rebasing: buffer[0..<n]), connection)
                if connection.pendingOut >= Connection.outHighWater, let e = connection.exchange, e === exchange {
                    connection.machine.exchange.onClientBacklogged()
                }
                // Plain TCP: a short read means the socket is empty (epoll tells when there is more).
                if n < buffer.count && !upstream.buffersInternally { return }
            case .wouldBlock:
                return
            case .closed:
                upstreamClosed(exchange, connection)
                return
            }
        }
    }

    private func feedResponse(_ exchange: Exchange, _ bytes: UnsafeRawBufferPointer, _ connection: Connection) {
        var offset = 0
        while connection.exchange === exchange, !connection.closed, exchange.upstream != nil {
            let base = offset
            let (consumed, event) = connection.responseParser.parse(UnsafeRawBufferPointer(rebasing: bytes[base...]))
            offset += consumed
            guard let event else {
                if consumed == 0 || offset >= bytes.count { return }
                continue
            }
            switch event {
            case .informational(let head):
                relayInformational(head, connection)
            case .head(let head, let framing):
                upstreamHead(exchange, head, framing, rest: UnsafeRawBufferPointer(rebasing: bytes[offset...]), connection)
            case .body(let range):
                let body = UnsafeRawBufferPointer(rebasing: bytes[(base + range.lowerBound)..<(base + range.upperBound)])
                upstreamBody(exchange, body, connection)
            case .end:
                upstreamEnded(exchange, trailingBytes: offset < bytes.count, connection)
                return
            case .error(let error):
                upstreamBroken(exchange, "the upstream's answer is not valid HTTP/1.1: \(error)", connection)
                return
            }
        }
    }

    /// The upstream closed its side (or the connection broke).
    private func upstreamClosed(_ exchange: Exchange, _ connection: Connection) {
        switch connection.responseParser.finish() {
        case .end?:
            upstreamEnded(exchange, trailingBytes: false, connection)
        case .error(let error)?:
            upstreamBroken(exchange, "\(error)", connection)
        case nil, .informational?, .head?, .body?:
            // (`finish` answers only nil, `.end` or `.error`.) Nothing of an answer came. On a reused
            // connection that is the upstream closing it as the request arrived (RFC 9112 §9.3.1):
            // send again once on a fresh one when that is safe.
            let upstream = exchange.detachUpstream()
            upstream?.retire(.closedByUpstream)
            let why = "the upstream closed the connection without answering"
            act(on: connection.machine.exchange.onClosedBeforeAnswer(connectionWasReused: upstream?.reused == true), exchange, why, connection)
        }
    }

    /// The upstream's answer cannot be used: a 502 when nothing went to the client yet, else a cut.
    func upstreamBroken(_ exchange: Exchange, _ why: String, _ connection: Connection) {
        exchange.detachUpstream()?.retire()
        act(on: connection.machine.exchange.onBroken(), exchange, why, connection)
    }

    private func act(on failure: ExchangeMachine.Failure, _ exchange: Exchange, _ why: String, _ connection: Connection) {
        switch failure {
        case .retryOnFreshConnection:
            ctx.metrics.retriedOnFreshConnection()
            send(exchange, token: exchange.sentToken, fresh: true, connection)
        case .badGateway:
            let held = exchange.takeHeld401() != nil
            connection.respond(.badGateway(held ? "the upstream answered badly: \(why)" : why), to: exchange)
        case .cut:
            // Once a response has started, a failure can only end the connection (CONTRACT): what was
            // sent goes out, then the connection closes short of the announced end.
            ctx.logger.warning("upstream failed mid-response: \(why)")
            connection.cutShort(exchange)
        }
    }

    /// RFC 9110 §15.2: 1xx answers are relayed to HTTP/1.1 clients (never to 1.0 ones).
    private func relayInformational(_ head: ResponseHead, _ connection: Connection) {
        guard connection.machine.exchange.clientVersion == .http1_1 else { return }
        let bytes = ByteBuffer()
        Forwarder.writeInformationalHead(into: bytes, head)
        connection.appendOut(bytes.bytes)
        connection.flush()
    }

    /// RFC 9449 §9: the upstream's newest `DPoP-Nonce` goes into later proofs; true for a 401 with
    /// `error="use_dpop_nonce"`, retried once with it (the request's one retry).
    private func noteDPoPNonce(_ head: ResponseHead, _ dpop: DPoPBinding, origin: String) -> Bool {
        guard let nonce = head.fields.first("dpop-nonce") else { return false }
        dpop.prover.upstreamGave(nonce: nonce, origin: origin)
        guard head.status == 401, let challenge = head.fields.first("www-authenticate") else { return false }
        return DPoPChallenge.asksForNonce(challenge)
    }

    /// `rest`: the bytes read after the head (a 101's are the new protocol's).
    private func upstreamHead(
        _ exchange: Exchange, _ head: ResponseHead, _ framing: ResponseBodyFraming, rest: UnsafeRawBufferPointer, _ connection: Connection
    ) {
        ctx.metrics.upstreamLatency(ctx.loop.now - connection.machine.exchange.tryStartedAt)
        // From the request's last byte written (its head, for most) to the answer's head.
        let upstreamSeconds = ctx.loop.now - connection.machine.exchange.lastUpstreamWrite
        ctx.metrics.counters.routes[exchange.metricsSlot].upstreamResponse.observe(upstreamSeconds)
        exchange.record.upstreamAnswered(status: head.status, seconds: upstreamSeconds)
        if exchange.scrubber != nil, let why = refusesUnscrubbable(head) { return upstreamBroken(exchange, why, connection) }
        // Without `credentials.dpop`, one test of a constant (docs/ARCHITECTURE.md: DPoP costs nothing when off).
        var nonceDemanded = false
        if exchange.route!.dpopEnabled, let dpop = exchange.sentToken?.dpop {
            nonceDemanded = noteDPoPNonce(head, dpop, origin: exchange.route!.forwarder.upstream.origin)
        }
        // A `type: aws` route's 403 may be the 401 (CONTRACT.md "AWS credentials and SigV4 signing").
        var verdict = AWSRefusal.Verdict.passOn
        if head.status == 403, let signer = exchange.route!.sigv4, let token = exchange.sentToken {
            verdict = signer.verdict(on: head, isHEAD: connection.machine.exchange.isHEAD, token: token)
        }
        let refusedByAWS: Bool
        if case .passOn = verdict { refusedByAWS = false } else { refusedByAWS = true }
        let countsAs401 = ExchangeRules.refusesToken(status: head.status, tokenInQuery: exchange.route!.forwarder.credential.tokenInQuery) || refusedByAWS
        let action = connection.machine.exchange.onFinalHead(
            status: head.status, upstreamFraming: framing, tokenCanChange: exchange.route!.tokenCanChange,
            refusingGoodTokens: countsAs401 && exchange.route!.state.refusingGoodTokens(now: ctx.loop.now), refusesToken: countsAs401)
        switch action {
        case .broken(let why):
            upstreamBroken(exchange, why, connection)
        case .startTunnel:
            startTunnel(exchange, head, rest: rest, connection)
        case .hold401:
            exchange.hold401(head, framing, dpopNonceDemanded: nonceDemanded)
            exchange.held401?.expiryInBody = verdict == .readBody
        case .relay(let clientFraming, let startStormGuard):
            // A freshly refreshed token was refused too (CONTRACT point 3): no refresh storm.
            if startStormGuard { connection.tokens.startStormGuard(exchange) }
            // A 401 to a token that goes to the client as it came: a static token, the storm guard,
            // or the retry's own 401 (each upstream 401 counts once).
            if (head.status == 401 || refusedByAWS) && exchange.sentToken != nil { connection.tokens.count401(exchange, .passedThrough) }
            writeHead(exchange, head, framing: clientFraming, connection)
        }
    }

    /// Writes the answer's head for the client, framed as the machine decided.
    func writeHead(_ exchange: Exchange, _ response: ResponseHead, framing: ExchangeRules.ClientFraming, _ connection: Connection) {
        exchange.record.answered(status: response.status)
        if connection.pendingOut == 0 { connection.machine.onOutputWaiting(now: ctx.loop.now) }
        let before = connection.outBuf.count
        exchange.route!.forwarder.writeResponseHead(
            into: connection.outBuf, response, framing: framing,
            closing: !connection.machine.exchange.keepAlive || connection.noMoreRequests,
            clientVersion: exchange.head.version, clientHost: exchange.head.first("host"),
            sentToken: exchange.route!.forwarder.credential.tokenInQuery && exchange.scrubber == nil ? exchange.sentToken : nil)
        if let scrubber = exchange.scrubber { noteScrubbed(scrubber.scrubHead(connection.outBuf, from: before), exchange) }
        exchange.record.wroteOut(connection.outBuf.count - before)
        // Not flushed here: the body usually follows in the same read, and head and body then leave
        // in one write; the body, the end, or `readUpstream`'s caller flushes.
        if connection.machine.exchange.bodyRefused { exchange.dropQueuedBody() }
    }

    private func upstreamBody(_ exchange: Exchange, _ bytes: UnsafeRawBufferPointer, _ connection: Connection) {
        switch connection.machine.exchange.onAnswerBody(count: bytes.count) {
        case .relay:
            break
        case .hold:
            exchange.holdMore(bytes)
            return
        case .releaseHeldThenRelay:
            // Too big to hold for a retry: give up the retry and pass the answer on as it came.
            if let held = exchange.takeHeld401() {
                if !held.expiryInBody { connection.tokens.count401(exchange, .passedThrough) }
                let framing = connection.machine.exchange.startAnswering(status: held.head.status, upstreamFraming: held.framing)
                writeHead(exchange, held.head, framing: framing, connection)
                held.body.withUnsafeBytes { writeBody(exchange, $0, connection) }
            }
        }
        writeBody(exchange, bytes, connection)
    }

    /// Body bytes for the client: through the answer's scrubber on a route with `scrub`.
    func writeBody(_ exchange: Exchange, _ bytes: UnsafeRawBufferPointer, _ connection: Connection) {
        if let scrubber = exchange.scrubber { return writeScrubbed(exchange, bytes, scrubber, connection) }
        writeFramed(exchange, bytes, connection)
    }

    /// Body bytes framed for the client as the machine decided.
    func writeFramed(_ exchange: Exchange, _ bytes: UnsafeRawBufferPointer, _ connection: Connection) {
        guard bytes.count > 0, !connection.closed else { return }
        switch connection.machine.exchange.framing {
        case .none:
            return
        case .chunked:
            exchange.record.wroteOut(bytes.count)
            if connection.pendingOut == 0 { connection.machine.onOutputWaiting(now: ctx.loop.now) }
            ResponseWriter.appendChunk(connection.outBuf, bytes)
            connection.flush()
        case .length, .close:
            exchange.record.wroteOut(bytes.count)
            writeRaw(bytes, connection)
        }
    }

    /// The answer is complete. The upstream connection goes back to the pool when the exchange left
    /// it clean: the whole request written, the whole answer read, nothing after it, no `close`.
    private func upstreamEnded(_ exchange: Exchange, trailingBytes: Bool, _ connection: Connection) {
        let upstreamCloses = connection.responseParser.connectionMustClose
        let (reuse, next) = connection.machine.exchange.onAnswerEnded(
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
            connection.tokens.releaseHeld401(exchange, connection)
        case .retryWithNewToken(let stale):
            if let held = exchange.held401, held.expiryInBody, !AWSRefusal.bodyNamesExpiredCredentials(held.body) {
                // An AWS 403 for another reason (AccessDenied, a bad signature): it goes on as it came.
                connection.tokens.releaseHeld401(exchange, connection)
            } else if exchange.held401?.dpopNonceDemanded == true {
                // A DPoP nonce demand is retried with the same token and a proof that carries the nonce.
                ctx.metrics.retriedAfter401()
                connection.tokens.acquire(for: exchange, staleGeneration: nil, connection)
            } else {
                connection.tokens.acquire(for: exchange, staleGeneration: stale, connection)
            }
        case .complete(let refusedBody):
            if exchange.scrubber != nil { finishScrubbedBody(exchange, connection) }
            if case .chunked = connection.machine.exchange.framing { ResponseWriter.appendLastChunk(connection.outBuf) }
            // The client is still sending a body the upstream did not wait for: answer, then close.
            if refusedBody { exchange.dropQueuedBody() }
            connection.responseDone(exchange)
        }
    }

    /// Straight from the read buffer to the client's socket when nothing waits before it; keeps what did not fit.
    private func writeRaw(_ bytes: UnsafeRawBufferPointer, _ connection: Connection) {
        guard !connection.closed else { return }
        if connection.pendingOut == 0 {
            switch connection.send(bytes) {
            case .done(let n):
                connection.machine.onClientTook(now: ctx.loop.now)
                if n < bytes.count { connection.outBuf.append(UnsafeRawBufferPointer(rebasing: bytes[n...])) }
            case .wouldBlock:
                connection.machine.onOutputWaiting(now: ctx.loop.now)
                connection.outBuf.append(bytes)
            case .closed:
                connection.close()
                return
            }
            connection.updateInterest()
            return
        }
        connection.outBuf.append(bytes)
        connection.flush()
    }
}
