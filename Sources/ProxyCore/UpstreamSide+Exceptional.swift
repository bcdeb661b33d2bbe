import Credentials
import HTTP1
import Sockets
import Upstream

/// The upstream side's exceptional paths, apart from its plain course (UpstreamSide.swift) so that a
/// request that takes none of them reads one file: an answer that breaks or never comes (502, a cut,
/// one resend on a fresh connection), 1xx answers, a DPoP nonce, the end of a wait for a token and the
/// 401 retry, the exchange's timeouts, a spooled body's refill, and the tunnel after a 101.
extension UpstreamSide {
    /// The connect attempt failed (the upstream connection's event): 504 on its timeout, else 502.
    func upstreamConnectFailed(_ failure: UpstreamFailure) {
        attempt = nil
        connectStartedAt = 0
        guard let exchange, let connection = client else { return }
        ctx.noteUpstreamFailure("\(failure)")
        switch failure {
        case .timedOut: connection.respond(.upstreamTimeout, to: exchange)
        case .unreachable(let why): connection.respond(.badGateway("the upstream could not be reached: \(why)"), to: exchange)
        }
    }

    /// The upstream closed its side (or the connection broke).
    func upstreamClosed(_ exchange: Exchange, _ connection: Connection) {
        switch responseParser.finish() {
        case .end?:
            upstreamEnded(exchange, trailingBytes: false, connection)
        case .error(let error)?:
            upstreamBroken(exchange, "\(error)", connection)
        case nil, .informational?, .head?, .body?:
            // (`finish` answers only nil, `.end` or `.error`.) Nothing of an answer came. On a reused
            // connection that is the upstream closing it as the request arrived (RFC 9112 §9.3.1):
            // send again once on a fresh one when that is safe.
            let upstream = detachUpstream()
            upstream?.retire(.closedByUpstream)
            let why = "the upstream closed the connection without answering"
            act(on: connection.machine.exchange.onClosedBeforeAnswer(connectionWasReused: upstream?.reused == true), exchange, why, connection)
        }
    }

    /// The upstream's answer cannot be used: a 502 when nothing went to the client yet, else a cut.
    func upstreamBroken(_ exchange: Exchange, _ why: String, _ connection: Connection) {
        detachUpstream()?.retire()
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
    func relayInformational(_ head: ResponseHead, _ connection: Connection) {
        guard connection.machine.exchange.clientVersion == .http1_1 else { return }
        let bytes = ByteBuffer()
        Forwarder.writeInformationalHead(into: bytes, head)
        connection.appendOut(bytes.bytes)
        connection.flush()
    }

    /// RFC 9449 §9: the upstream's newest `DPoP-Nonce` goes into later proofs; true for a 401 with
    /// `error="use_dpop_nonce"`, retried once with it (the request's one retry).
    func noteDPoPNonce(_ head: ResponseHead, _ dpop: DPoPBinding, origin: String) -> Bool {
        guard let nonce = head.fields.first("dpop-nonce") else { return false }
        dpop.prover.upstreamGave(nonce: nonce, origin: origin)
        guard head.status == 401, let challenge = head.fields.first("www-authenticate") else { return false }
        return DPoPChallenge.asksForNonce(challenge)
    }

    /// Moves the next part of a spooled body into the exchange's buffer for the upstream.
    func refillFromSpool(_ exchange: Exchange, _ connection: Connection) {
        // A spool that cannot be read sends nothing more; the upstream answers what it has, or its
        // timeout ends the exchange.
        if !exchange.refillFromSpool(whole: connection.machine.exchange.bodyBuffering == .whole) {
            connection.machine.exchange.onSendFailed()
        }
    }

    // MARK: the token (CONTRACT point 3)

    func waitEnded(_ exchange: Exchange, outcome: RefreshOutcome?, _ connection: Connection) {
        if exchange.record.trace != nil, let refresh = exchange.route?.tokens.refreshTracing.current { exchange.record.trace?.linkLastWait(to: refresh) }
        if let waited = exchange.record.tokenWaitEnded(now: ctx.loop.now) {
            ctx.metrics.counters.routes[exchange.metricsSlot].tokenWait.observe(waited)
        }
        // A held 401 means this wait was for its retry (CONTRACT point 3).
        let after401 = exchange.held401 != nil
        let arrived: ExchangeMachine.TokenArrived
        var token: TokenSnapshot?
        var loginWhy = ""
        switch outcome {
        case .token(let snapshot) where snapshot.isValid(at: Syscall.wallClock()):
            arrived = .valid(generation: snapshot.generation)
            token = snapshot
        case .loginRequired(let why):
            arrived = .loginRequired
            loginWhy = why
        case .token, .unavailable, nil:
            arrived = .none
        }
        switch connection.machine.exchange.onTokenArrived(arrived) {
        case .send(let isRetryAfter401):
            if isRetryAfter401 {
                ctx.metrics.retriedAfter401()
                count401(exchange, .retried)
            }
            send(exchange, token: token, connection)
        case .releaseHeld401(let startStormGuard):
            // No other token (or the one the upstream refused): its 401 goes on as it came.
            if startStormGuard { self.startStormGuard(exchange) }
            releaseHeld401(exchange, connection)
        case .loginRequired:
            if after401 { count401(exchange, .loginRequired) }
            connection.respond(.loginRequired(loginWhy), to: exchange)
        case .unavailable:
            if after401 { count401(exchange, .unavailable) }
            let view = exchange.route!.tokens.current()
            let why: String
            if case .unavailable(let message, _) = outcome { why = message } else { why = view.failure ?? "no valid token yet" }
            connection.respond(.tokenUnavailable("no valid token: \(why)", retryAfter: view.retryAfter), to: exchange)
        }
    }

    /// The upstream refused a freshly refreshed token, or a refresh handed back the very one it
    /// refused (CONTRACT point 3): for the next 30 s the route's 401s pass on without a refresh.
    func startStormGuard(_ exchange: Exchange) {
        exchange.route!.state.upstreamRefusedFreshToken(now: ctx.loop.now)
        ctx.metrics.counters.routes[exchange.metricsSlot].stormGuardActivations += 1
    }

    /// No other token (or the one the upstream refused): the held 401 goes on as it came.
    func releaseHeld401(_ exchange: Exchange, _ connection: Connection) {
        guard let held = exchange.takeHeld401() else { return }
        if !held.expiryInBody { count401(exchange, .passedThrough) }
        // The framing of what we hold is known exactly now.
        let response = Forwarder.heldAnswer(held.head, bodyLength: held.body.count)
        let framing = connection.machine.exchange.startAnswering(status: response.status, upstreamFraming: .contentLength(held.body.count))
        writeHead(exchange, response, framing: framing, connection)
        held.body.withUnsafeBytes { writeBody(exchange, $0, connection) }
        if exchange.scrubber != nil { finishScrubbedBody(exchange, connection) }
        connection.responseDone(exchange)
    }

    /// `tokenproxy_upstream_401_total{result}`; a retry also marks the access log's line.
    func count401(_ exchange: Exchange, _ result: Upstream401Result) {
        ctx.metrics.counters.routes[exchange.metricsSlot].upstream401[result.rawValue] += 1
        if result == .retried { exchange.record.retriedAfter401Sent() }
    }

    // MARK: timeouts

    /// The exchange's part of the connection's tick (`ExchangeMachine.onTick`).
    func timedOut(_ exchange: Exchange, _ timeout: ExchangeMachine.TimeoutAction, _ connection: Connection) {
        switch timeout {
        case .none:
            break
        case .gatewayTimeout:
            detachUpstream()?.retire()
            connection.respond(.upstreamTimeout, to: exchange)
        case .silentMidBody:
            // `upstream_idle_timeout` ran out mid-body.
            let seconds = ctx.configuration.limits.upstreamIdleTimeout
            upstreamBroken(exchange, "the upstream went silent mid-body for \(Int(seconds))s", connection)
        case .requestTimeout:
            connection.fail(.requestTimeout)
        case .closeClient:
            connection.close()
        }
    }

    // MARK: the tunnel (docs/ENGINE.md, "Upgrade and WebSocket")

    /// After `101 Switching Protocols` both connections are a byte tunnel: the 101 goes to the client,
    /// and the client's socket and the upstream connection leave the exchange for a `ByteRelay`,
    /// with what the client sent after its request head (already the new protocol's) and what the
    /// upstream sent after the 101 (`rest`).
    func startTunnel(_ exchange: Exchange, _ response: ResponseHead, rest: UnsafeRawBufferPointer, _ connection: Connection) {
        exchange.record.answered(status: 101)
        let out = ByteBuffer()
        Forwarder.writeSwitchingProtocolsHead(into: out, response)
        exchange.record.wroteOut(out.count)
        connection.recordFinished(exchange)
        let toUpstream = exchange.upOut.withUnsafeBytes(from: exchange.upOutStart) { Array($0) }
        guard let upstream = detachUpstream() else { return }
        let client = connection.relinquishSocket()
        // Either side's end closes both, `client_idle_timeout` with no byte either way and
        // `client_send_timeout` bound it, as they bound the connection it was.
        let limits = ctx.configuration.limits
        let configuration = ByteRelay.Configuration(
            halfClose: .closeBoth, timeouts: .init(idle: limits.clientIdleTimeout, clientSend: limits.clientSendTimeout),
            accessLine: .upgrade(exchange), metrics: .upgrade(routeSlot: exchange.metricsSlot))
        ByteRelay.start(
            ctx: ctx, client: client.end, upstream: .upstream(upstream), toClient: client.unwritten + out.bytes + Array(rest),
            toUpstream: toUpstream + client.unread, tlsWantsWrite: client.tlsWantsWrite, configuration)
    }
}

extension UpstreamSide {
    /// No valid token for the request (`acquire`): a login is asked for when the session ended or
    /// never began, or the request waits (bounded by `refresh_wait`) for a refresh to give one.
    func waitForToken(_ exchange: Exchange, staleGeneration: UInt64?, latest: TokenSnapshot?, _ connection: Connection) {
        let route = exchange.route!
        let view = route.tokens.current()
        switch view.session {
        case .ended:
            connection.respond(.loginRequired(view.failure ?? "the session ended: run `tokenproxy login`"), to: exchange)
            return
        case .none where route.sessionNeedsLogin:
            // The token source's own words when it gave any (a sealed session no key opens names its key id).
            connection.respond(.loginRequired(view.failure ?? "no session: run `tokenproxy login`"), to: exchange)
            return
        case .none, .active:
            break
        }
        metrics.waitedForToken()
        let loop = ctx.loop
        let timer = loop.schedule(after: ctx.configuration.limits.refreshWait) { [weak connection, weak exchange] in
            guard let connection, let exchange, !connection.closed, exchange.endTokenWait().ended else { return }
            connection.upstream.waitEnded(exchange, outcome: nil, connection)
        }
        exchange.waitForToken(timer: timer, now: ctx.loop.now)
        let waiter = LoopBound(connection)
        let waiting = LoopBound(exchange)
        let reason: RefreshReason = staleGeneration == nil ? .expiry : .unauthorized
        route.tokens.refresh(staleGeneration: staleGeneration ?? latest?.generation, reason: reason) { outcome in
            loop.execute {
                guard let connection = waiter.object, let exchange = waiting.object, !connection.closed else { return }
                let (ended, timer) = exchange.endTokenWait()
                guard ended else { return }
                if let timer { loop.cancel(timer) }
                connection.upstream.waitEnded(exchange, outcome: outcome, connection)
            }
        }
    }
}
