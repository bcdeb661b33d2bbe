import Credentials
import HTTP1
import Sockets
import Upstream

/// The upstream half of a client connection's exchanges (docs/ENGINE.md): the request goes up as
/// the proxy writes it, the answer is parsed by `HTTP1.ResponseParser` and framed again for the
/// client; a 401 may be held for one retry; a 101 turns both connections into a tunnel. What
/// happens is reported to the exchange's `ExchangeMachine`, and what it decides is done here.
///
/// A value in its connection (no allocation, no reference counting: a class here, one per
/// connection, cost about 100 instructions per request in retains of it). It keeps no reference to
/// its connection: each call is handed the connection it works for (a stored back-reference would
/// be either weak, slow on every request, or optional, a check on every use), and the state of the
/// leg is the connection's (`responseParser`, the exchange's machine). What it asks of the
/// connection is its client side: the machine, the answer's output (`appendOut`, `outBuf`, `flush`)
/// and the exchange's ends (`respond`, `responseDone`, `cutShort`). This file sends, times out and
/// hands a 101's connections to a `ByteRelay`; reading and relaying the response is
/// UpstreamLeg+Response.swift.
struct UpstreamLeg {
    /// unowned(unsafe): the loop's context outlives its connections (see `Connection.ctx`).
    unowned(unsafe) let ctx: LoopContext

    // MARK: sending upstream

    /// Sends the request upstream: with the client's own Authorization, or with a token.
    func forward(_ exchange: Exchange, _ connection: Connection) {
        if exchange.keepsClientAuthorization {
            send(exchange, token: nil, connection)
        } else {
            connection.tokens.acquire(for: exchange, staleGeneration: nil, connection)
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
        connection.machine.exchange.onTryStarted(tokenGeneration: token?.generation, now: ctx.loop.now)
        connection.responseParser.reset()
        connection.responseParser.expect(requestMethodIsHEAD: connection.machine.exchange.isHEAD)
        exchange.attach(to: connection)
        if !fresh, let idle = route.upstream.takeIdle() {
            ctx.metrics.counters.routes[route.metricsSlot].connectionsReused += 1
            upstreamConnected(exchange, idle, connection)
            return
        }
        do {
            let startedAt = ctx.loop.now
            exchange.connecting(try route.upstream.connect(exchange), startedAt: startedAt)
        } catch {
            ctx.noteUpstreamFailure("the upstream connection could not be started: \(error)")
            connection.respond(.badGateway("the upstream connection could not be started: \(error)"), to: exchange)
        }
    }

    func upstreamConnected(_ exchange: Exchange, _ upstream: UpstreamConnection, _ connection: Connection) {
        if let took = exchange.connected(upstream, now: ctx.loop.now) {
            // A new connection: TCP, TLS and any proxy tunnel (`tokenproxy_upstream_connect_seconds`).
            let route = exchange.route!
            ctx.metrics.counters.routes[route.metricsSlot].connectionsOpened += 1
            ctx.metrics.counters.routes[route.metricsSlot].upstreamConnect[route.tlsIndex].observe(took)
        }
        pumpUpstream(exchange, connection)
        updateUpstreamInterest(exchange, connection)
    }

    func upstreamFailed(_ exchange: Exchange, _ failure: UpstreamFailure, _ connection: Connection) {
        exchange.connectFailed()
        ctx.noteUpstreamFailure("\(failure)")
        switch failure {
        case .timedOut: connection.respond(.upstreamTimeout, to: exchange)
        case .unreachable(let why): connection.respond(.badGateway("the upstream could not be reached: \(why)"), to: exchange)
        }
    }

    /// New body bytes (or the body's end) are queued: send what the upstream takes.
    func sendUpstream(_ exchange: Exchange, _ connection: Connection) {
        guard exchange.upstream != nil else { return }
        pumpUpstream(exchange, connection)
        updateUpstreamInterest(exchange, connection)
    }

    /// Writes what is queued for the upstream until it takes no more.
    func pumpUpstream(_ exchange: Exchange, _ connection: Connection) {
        guard let upstream = exchange.upstream, !connection.machine.exchange.sendStopped else { return }
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
        guard let upstream = exchange.upstream else { return }
        let paused = connection.machine.exchange.receivePaused
        var wanted: Interest = []
        if !paused { wanted.insert(.read) }
        if !connection.machine.exchange.sendStopped && exchange.bytesWaitingToGoUp > 0 { wanted.insert(.write) }
        upstream.setInterest(wanted)
    }

    func upstreamReady(_ exchange: Exchange, _ events: UInt32, _ connection: Connection) {
        if events & ReadyEvents.writable != 0 { pumpUpstream(exchange, connection) }
        guard exchange.upstream != nil, connection.exchange === exchange else { return }
        // A hang-up is read even while paused: what is left is bounded by the socket's buffer.
        if events & ReadyEvents.failed != 0 || (events & ReadyEvents.readable != 0 && !connection.machine.exchange.receivePaused) {
            readUpstream(exchange, connection)
        }
        updateUpstreamInterest(exchange, connection)
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
            exchange.detachUpstream()?.retire()
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
        guard let upstream = exchange.detachUpstream() else { return }
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
