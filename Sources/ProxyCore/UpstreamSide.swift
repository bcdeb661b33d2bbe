import Credentials
import HTTP1
import Sockets
import Upstream

/// The upstream side of a client connection's exchanges (docs/ENGINE.md, docs/ARCHITECTURE.md "A
/// request"): one per connection, made with it. It owns what carries a try upstream: the connect
/// attempt, the upstream connection (taken from the route's pool and given back to it), and the
/// parser of the answer; the upstream connection's events come here directly (it is their owner and
/// connect delegate). The request goes up as the proxy writes it, with the current token or after a
/// wait for one; the answer is framed again for the client; a 401 may be held for one retry; a 101
/// turns both connections into a tunnel. This file is the plain course of a request; what leaves it
/// (failures, retries, timeouts, the tunnel) is UpstreamSide+Exceptional.swift. What happens is reported to
/// the exchange's `ExchangeMachine` (in the connection's machine), and what it decides is done here.
/// The `Exchange` holds the request's bytes only.
///
/// Its methods are handed the connection they work for (a guaranteed parameter costs no reference
/// counting, where a stored reference would be loaded and retained at each use); only the events
/// from libcurl and the loop start from the stored `client`, once each. What it asks of the
/// connection is its client side: the machine, the answer's output (`appendOut`, `outBuf`, `flush`)
/// and the exchange's ends (`respond`, `responseDone`, `cutShort`).
final class UpstreamSide: UpstreamConnectDelegate, UpstreamConnectionOwner {
    /// unowned(unsafe): the loop's context outlives its connections (see `Connection.ctx`).
    unowned(unsafe) let ctx: LoopContext
    /// `ctx.metrics`, a `let` here so that a count borrows it (docs/ENGINE.md "Counting a request").
    let metrics: LoopMetrics
    /// The connection it is the upstream side of; set once by the connection's initializer. Read
    /// only while `exchange` is set (the connection clears it, `detach`, before it goes away).
    unowned(unsafe) var client: Connection?
    /// Parses the current exchange's answer; reset for every try.
    var responseParser: ResponseParser
    /// The exchange whose try is under way (`attach`), until the connection ends it (`detach`): an
    /// event that comes after finds none and does nothing.
    private(set) var exchange: Exchange?
    /// The connection that carries the try, or the attempt to make one.
    private(set) var upstream: UpstreamConnection?
    var attempt: UpstreamConnectAttempt?
    /// When the current connect attempt started (0: none, or the connection came from the pool).
    var connectStartedAt = 0.0
    /// A read of the answer is under way (`readUpstream`: one at a time).
    var reading = false
    /// The scrubber its tries on a route with `scrub` use one after the other (`RouteScrubbing`).
    var answerScrubber: ResponseScrubber?

    /// An upstream connection is being made or carries the exchange.
    var isActive: Bool { upstream != nil || attempt != nil }

    init(ctx: LoopContext) {
        self.ctx = ctx
        metrics = ctx.metrics
        responseParser = ResponseParser(limits: ResponseParserLimits(maxHeadBytes: ctx.configuration.limits.maxHeaderBytes))
    }

    // MARK: the upstream connection's events

    func upstreamConnected(_ c: UpstreamConnection) {
        attempt = nil
        guard let exchange, let connection = client else {
            c.retire()
            return
        }
        use(c, for: exchange, connection)
    }

    func upstreamReady(_ events: UInt32) {
        guard let exchange, let connection = client else { return }
        if events & ReadyEvents.writable != 0 { pumpUpstream(exchange, connection) }
        guard upstream != nil, connection.exchange === exchange else { return }
        // A hang-up is read even while paused: what is left is bounded by the socket's buffer.
        if events & ReadyEvents.failed != 0 || (events & ReadyEvents.readable != 0 && !connection.machine.exchange.receivePaused) {
            readUpstream(exchange, connection)
        }
        updateUpstreamInterest(exchange, connection)
    }

    // MARK: the exchange's upstream connection

    /// The exchange is over for its connection: late upstream events find nothing. An upstream
    /// connection still held cannot be reused.
    func detach() {
        exchange = nil
        detachUpstream()?.retire()
    }

    /// Drops the try's connection (to be closed or pooled by the caller) and cancels an attempt.
    func detachUpstream() -> UpstreamConnection? {
        attempt?.cancel()
        attempt = nil
        connectStartedAt = 0
        let c = upstream
        upstream = nil
        c?.owner = nil
        return c
    }

    // MARK: sending upstream

    /// Sends the request upstream: with the client's own Authorization, or with a token.
    func forward(_ exchange: Exchange, _ connection: Connection) {
        if exchange.keepsClientAuthorization {
            send(exchange, token: nil, connection)
        } else {
            acquire(for: exchange, staleGeneration: nil, connection)
        }
    }

    /// Sends the request with `token` (nil: the client's own Authorization goes), on an idle pooled
    /// connection when there is one (`fresh`: never), else on a new one.
    func send(_ exchange: Exchange, token: TokenSnapshot?, fresh: Bool = false, _ connection: Connection) {
        let route = exchange.route!
        let forwarder = route.forwarder
        let forwardedHost = exchange.forwardedHost.map { connection.forwardedHostLine.line(for: $0) }
        let wholeBody = connection.machine.exchange.bodyBuffering == .whole
        let wholeBodyLength = exchange.beginTry(
            wholeBody: wholeBody, bodyDone: connection.machine.exchange.requestBodyDone, bodyOnWire: connection.machine.exchange.bodyOnWire)
        let credential: RequestCredential
        do {
            credential = try forwarder.credential.resolve(token: token) { exchange.bodyToSign(wholeBody: wholeBody) }
        } catch {
            connection.respond(error, to: exchange)
            return
        }
        forwarder.writeRequestHead(
            into: exchange.upOut, for: exchange.head,
            Forwarder.RequestParts(
                path: exchange.path, query: exchange.query, forwardedFor: connection.forwardedForLines, forwardedHost: forwardedHost,
                absoluteAuthority: forwarder.preserveHost && exchange.head.target.utf8.first != UInt8(ascii: "/") ? exchange.forwardedHost : nil,
                upgrade: connection.machine.exchange.wantsUpgrade, wholeBodyLength: wholeBodyLength,
                dropsExpect: connection.machine.exchange.answersContinue, traceparent: exchange.record.attemptStarted()),
            credential: credential)
        exchange.headWritten(token: token)
        if let scrubbing = route.scrubbing { exchange.scrubber = scrubbing.scrubber(for: token, kept: &answerScrubber) }
        connection.machine.exchange.onTryStarted(tokenGeneration: token?.generation, now: ctx.loop.now)
        responseParser.reset()
        responseParser.expect(requestMethodIsHEAD: connection.machine.exchange.isHEAD)
        self.exchange = exchange
        if !fresh, let idle = route.upstream.takeIdle() {
            metrics.counters.routes[route.metricsSlot].connectionsReused += 1
            use(idle, for: exchange, connection)
            return
        }
        do {
            let startedAt = ctx.loop.now
            attempt = try route.upstream.connect(self)
            connectStartedAt = startedAt
        } catch {
            ctx.noteUpstreamFailure("the upstream connection could not be started: \(error)")
            connection.respond(.badGateway("the upstream connection could not be started: \(error)"), to: exchange)
        }
    }

    /// The try goes on `c`, from the pool or just made.
    private func use(_ c: UpstreamConnection, for exchange: Exchange, _ connection: Connection) {
        if connectStartedAt > 0 {
            // A new connection: TCP, TLS and any proxy tunnel (`tokenproxy_upstream_connect_seconds`).
            let took = ctx.loop.now - connectStartedAt
            connectStartedAt = 0
            let route = exchange.route!
            metrics.counters.routes[route.metricsSlot].connectionsOpened += 1
            metrics.counters.routes[route.metricsSlot].upstreamConnect[route.tlsIndex].observe(took)
        }
        c.owner = self
        upstream = c
        pumpUpstream(exchange, connection)
        updateUpstreamInterest(exchange, connection)
    }

    /// New body bytes (or the body's end) are queued: send what the upstream takes.
    func sendUpstream(_ exchange: Exchange, _ connection: Connection) {
        guard upstream != nil else { return }
        pumpUpstream(exchange, connection)
        updateUpstreamInterest(exchange, connection)
    }

    /// Writes what is queued for the upstream until it takes no more.
    func pumpUpstream(_ exchange: Exchange, _ connection: Connection) {
        guard let upstream, !connection.machine.exchange.sendStopped else { return }
        let wasBacklogged = exchange.bodyBacklogged(waitingForBody: connection.machine.exchange.isWaitingForBody)
        let spooled = exchange.spoolHasMore
        if spooled { refillFromSpool(exchange, connection) }
        while exchange.upOutStart < exchange.upOut.count {
            let start = exchange.upOutStart
            let result = exchange.upOut.withUnsafeBytes(from: start) { upstream.send($0) }
            switch result {
            case .done(let n):
                metrics.counters.routes[exchange.metricsSlot].upstreamSentBytes += n
                connection.machine.exchange.onSent(reachedBody: exchange.sent(n), now: ctx.loop.now)
            case .wouldBlock:
                break
            case .closed:
                // The upstream stopped reading; it may have answered first (epoll reports the hang-up
                // and the answer is read then).
                connection.machine.exchange.onSendFailed()
            }
            if case .done = result {
                if spooled && exchange.spoolHasMore { refillFromSpool(exchange, connection) }
                continue
            }
            break
        }
        if wasBacklogged && !exchange.bodyBacklogged(waitingForBody: connection.machine.exchange.isWaitingForBody) {
            ctx.loop.schedule(task: connection)  // room again: read the client on the next turn
        }
    }

    func updateUpstreamInterest(_ exchange: Exchange, _ connection: Connection) {
        guard let upstream else { return }
        let paused = connection.machine.exchange.receivePaused
        var wanted: Interest = []
        if !paused { wanted.insert(.read) }
        if !connection.machine.exchange.sendStopped && exchange.bytesWaitingToGoUp > 0 { wanted.insert(.write) }
        upstream.setInterest(wanted)
    }

    /// The client took enough of the answer: read the upstream again. With TLS the library may
    /// hold bytes epoll cannot see, so read now rather than wait for readiness.
    @inline(__always)
    func resumeIfDrained(_ connection: Connection) {
        guard let exchange = connection.exchange, connection.machine.exchange.receivePaused,
            connection.pendingOut < Connection.outLowWater
        else { return }
        connection.machine.exchange.onClientCaughtUp()
        readUpstream(exchange, connection)
        updateUpstreamInterest(exchange, connection)
    }
}

// MARK: the token (CONTRACT point 3) and the answer

/// A request goes with the current token, or waits (bounded by `limits.refresh_wait`) for a refresh
/// (the wait, its end and the 401 retry are in UpstreamSide+Exceptional.swift); then the answer is relayed.
extension UpstreamSide {
    /// Sends with the current token, or waits (bounded by `refresh_wait`) for a refresh to give one.
    func acquire(for exchange: Exchange, staleGeneration: UInt64?, _ connection: Connection) {
        let route = exchange.route!
        // The snapshot alone first; the whole view only when it does not serve.
        let latest = route.tokens.currentSnapshot()
        if let snapshot = latest, snapshot.isValid(at: Syscall.wallClock()), staleGeneration == nil || snapshot.generation != staleGeneration {
            // A 401 for an older token is retried with the newer one at once (CONTRACT point 3).
            if staleGeneration != nil {
                metrics.retriedAfter401()
                count401(exchange, .retried)
            }
            send(exchange, token: snapshot, connection)
            return
        }
        waitForToken(exchange, staleGeneration: staleGeneration, latest: latest, connection)
    }

    // MARK: the answer (docs/ENGINE.md): the upstream's bytes read, parsed by `HTTP1.ResponseParser`
    // and framed again for the client as the machine decides (relay, hold a 401 for a retry, a tunnel
    // on 101, 502 or a cut on a broken answer); at its end the connection is pooled or retired.

    func readUpstream(_ exchange: Exchange, _ connection: Connection) {
        // One read at a time: the loop's buffer holds the bytes being passed on.
        guard !reading else { return }
        reading = true
        defer { reading = false }
        let buffer = ctx.upstreamBuffer
        while let upstream = self.upstream, connection.exchange === exchange,
            !connection.machine.exchange.receivePaused || connection.machine.exchange.sendStopped
        {
            switch upstream.receive(into: buffer) {
            case .done(let n):
                metrics.counters.routes[exchange.metricsSlot].upstreamReceivedBytes += n
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
        while connection.exchange === exchange, !connection.closed, self.upstream != nil {
            let base = offset
            let (consumed, event) = responseParser.parse(UnsafeRawBufferPointer(rebasing: bytes[base...]))
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

    /// `rest`: the bytes read after the head (a 101's are the new protocol's).
    private func upstreamHead(
        _ exchange: Exchange, _ head: ResponseHead, _ framing: ResponseBodyFraming, rest: UnsafeRawBufferPointer, _ connection: Connection
    ) {
        // From the request's last byte written (its head, for most) to the answer's head.
        let upstreamSeconds = ctx.loop.now - connection.machine.exchange.lastUpstreamWrite
        metrics.upstreamAnswered(
            latency: ctx.loop.now - connection.machine.exchange.tryStartedAt, slot: exchange.metricsSlot, seconds: upstreamSeconds)
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
            if startStormGuard { self.startStormGuard(exchange) }
            // A 401 to a token that goes to the client as it came: a static token, the storm guard,
            // or the retry's own 401 (each upstream 401 counts once).
            if (head.status == 401 || refusedByAWS) && exchange.sentToken != nil { count401(exchange, .passedThrough) }
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
                if !held.expiryInBody { count401(exchange, .passedThrough) }
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
            // The body's last bytes may leave at once: the audit line goes first.
            if ctx.auditing && responseParser.bodyComplete { connection.audit(exchange) }
            writeRaw(bytes, connection)
        }
    }

    /// The answer is complete. The upstream connection goes back to the pool when the exchange left
    /// it clean: the whole request written, the whole answer read, nothing after it, no `close`.
    func upstreamEnded(_ exchange: Exchange, trailingBytes: Bool, _ connection: Connection) {
        let upstreamCloses = responseParser.connectionMustClose
        let (reuse, next) = connection.machine.exchange.onAnswerEnded(
            trailingBytes: trailingBytes, parserSaysClose: upstreamCloses, bytesWaitingToGoUp: exchange.bytesWaitingToGoUp)
        if let upstream = detachUpstream() {
            if reuse {
                exchange.route!.upstream.putIdle(upstream)
            } else {
                upstream.retire(.afterResponse(unreadBytes: trailingBytes, upstreamCloses: upstreamCloses))
            }
        }
        switch next {
        case .releaseHeld401:
            releaseHeld401(exchange, connection)
        case .retryWithNewToken(let stale):
            if let held = exchange.held401, held.expiryInBody, !AWSRefusal.bodyNamesExpiredCredentials(held.body) {
                // An AWS 403 for another reason (AccessDenied, a bad signature): it goes on as it came.
                releaseHeld401(exchange, connection)
            } else if exchange.held401?.dpopNonceDemanded == true {
                // A DPoP nonce demand is retried with the same token and a proof that carries the nonce.
                metrics.retriedAfter401()
                acquire(for: exchange, staleGeneration: nil, connection)
            } else {
                acquire(for: exchange, staleGeneration: stale, connection)
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
        // Straight to the socket unless bytes wait before these, or audit lines do (`AuditBatch`).
        if connection.pendingOut == 0 && !(ctx.auditing && ctx.auditBatch.linesWait) {
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
        if connection.pendingOut == 0 { connection.machine.onOutputWaiting(now: ctx.loop.now) }
        connection.outBuf.append(bytes)
        connection.flush()
    }
}
