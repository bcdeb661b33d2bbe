import Credentials
import HTTP1
import Sockets
import Upstream

/// The upstream side of a client connection's exchanges (docs/ENGINE.md, docs/ARCHITECTURE.md "A
/// request"): one per connection, made with it. It owns what carries a try upstream: the connect
/// attempt, the upstream connection (taken from the route's pool and given back to it), and the
/// parser of the answer; the upstream connection's events come here directly (it is their owner and
/// connect delegate). The request goes up as the proxy writes it, with the current token or after a
/// wait for one; the answer is framed again for the client (UpstreamSide+Response.swift); a 401 may
/// be held for one retry; a 101 turns both connections into a tunnel. What happens is reported to
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
    private var attempt: UpstreamConnectAttempt?
    /// When the current connect attempt started (0: none, or the connection came from the pool).
    private var connectStartedAt = 0.0
    /// A read of the answer is under way (`readUpstream`: one at a time).
    var reading = false

    /// An upstream connection is being made or carries the exchange.
    var isActive: Bool { upstream != nil || attempt != nil }

    init(ctx: LoopContext) {
        self.ctx = ctx
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
                dropsExpect: connection.machine.exchange.answersContinue),
            credential: credential)
        exchange.headWritten(token: token)
        connection.machine.exchange.onTryStarted(tokenGeneration: token?.generation, now: ctx.loop.now)
        responseParser.reset()
        responseParser.expect(requestMethodIsHEAD: connection.machine.exchange.isHEAD)
        self.exchange = exchange
        if !fresh, let idle = route.upstream.takeIdle() {
            ctx.metrics.counters.routes[route.metricsSlot].connectionsReused += 1
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
            ctx.metrics.counters.routes[route.metricsSlot].connectionsOpened += 1
            ctx.metrics.counters.routes[route.metricsSlot].upstreamConnect[route.tlsIndex].observe(took)
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
                ctx.metrics.counters.routes[exchange.metricsSlot].upstreamSentBytes += n
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

    /// Moves the next part of a spooled body into the exchange's buffer for the upstream.
    func refillFromSpool(_ exchange: Exchange, _ connection: Connection) {
        // A spool that cannot be read sends nothing more; the upstream answers what it has, or its
        // timeout ends the exchange.
        if !exchange.refillFromSpool(whole: connection.machine.exchange.bodyBuffering == .whole) {
            connection.machine.exchange.onSendFailed()
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

// MARK: the token (CONTRACT point 3)

/// A request goes with the current token, or waits (bounded by `limits.refresh_wait`) for a refresh;
/// a held 401 is retried once with another token or passed on as it came. What the exchange's
/// machine decides (`ExchangeMachine.onTokenArrived`) is done here.
extension UpstreamSide {
    /// Sends with the current token, or waits (bounded by `refresh_wait`) for a refresh to give one.
    func acquire(for exchange: Exchange, staleGeneration: UInt64?, _ connection: Connection) {
        let route = exchange.route!
        let view = route.tokens.current()
        if let snapshot = view.snapshot, snapshot.isValid(at: wallClock()), staleGeneration == nil || snapshot.generation != staleGeneration {
            // A 401 for an older token is retried with the newer one at once (CONTRACT point 3).
            if staleGeneration != nil {
                ctx.metrics.retriedAfter401()
                count401(exchange, .retried)
            }
            send(exchange, token: snapshot, connection)
            return
        }
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
        ctx.metrics.waitedForToken()
        let loop = ctx.loop
        let timer = loop.schedule(after: ctx.configuration.limits.refreshWait) { [weak connection, weak exchange] in
            guard let connection, let exchange, !connection.closed, exchange.endTokenWait().ended else { return }
            connection.upstream.waitEnded(exchange, outcome: nil, connection)
        }
        exchange.waitForToken(timer: timer, now: ctx.loop.now)
        let waiter = LoopBound(connection)
        let waiting = LoopBound(exchange)
        let reason: RefreshReason = staleGeneration == nil ? .expiry : .unauthorized
        route.tokens.refresh(staleGeneration: staleGeneration ?? view.snapshot?.generation, reason: reason) { outcome in
            loop.execute {
                guard let connection = waiter.object, let exchange = waiting.object, !connection.closed else { return }
                let (ended, timer) = exchange.endTokenWait()
                guard ended else { return }
                if let timer { loop.cancel(timer) }
                connection.upstream.waitEnded(exchange, outcome: outcome, connection)
            }
        }
    }

    func waitEnded(_ exchange: Exchange, outcome: RefreshOutcome?, _ connection: Connection) {
        if let waited = exchange.record.tokenWaitEnded(now: ctx.loop.now) {
            ctx.metrics.counters.routes[exchange.metricsSlot].tokenWait.observe(waited)
        }
        // A held 401 means this wait was for its retry (CONTRACT point 3).
        let after401 = exchange.held401 != nil
        let arrived: ExchangeMachine.TokenArrived
        var token: TokenSnapshot?
        var loginWhy = ""
        switch outcome {
        case .token(let snapshot) where snapshot.isValid(at: wallClock()):
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
        connection.responseDone(exchange)
    }

    /// `tokenproxy_upstream_401_total{result}`; a retry also marks the access log's line.
    func count401(_ exchange: Exchange, _ result: Upstream401Result) {
        ctx.metrics.counters.routes[exchange.metricsSlot].upstream401[result.rawValue] += 1
        if result == .retried { exchange.record.retriedAfter401Sent() }
    }
}
