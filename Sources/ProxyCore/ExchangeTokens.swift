import Credentials
import HTTP1

/// The token side of a client connection's exchanges (CONTRACT point 3): a request goes with the
/// current token, or waits (bounded by `limits.refresh_wait`) for a refresh; a held 401 is retried
/// once with another token or passed on as it came. What the exchange's machine decides
/// (`ExchangeMachine.onTokenArrived`) is done here; the sending is the connection's `UpstreamLeg`.
///
/// A value in its connection (no allocation); like the leg it is handed the connection it works for.
struct ExchangeTokens {
    /// unowned(unsafe): the loop's context outlives its connections (see `Connection.ctx`).
    unowned(unsafe) let ctx: LoopContext

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
            connection.leg.send(exchange, token: snapshot, connection)
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
            connection.tokens.waitEnded(exchange, outcome: nil, connection)
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
                connection.tokens.waitEnded(exchange, outcome: outcome, connection)
            }
        }
    }

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
            connection.leg.send(exchange, token: token, connection)
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
        connection.leg.writeHead(exchange, response, framing: framing, connection)
        held.body.withUnsafeBytes { connection.leg.writeBody(exchange, $0, connection) }
        connection.responseDone(exchange)
    }

    /// `tokenproxy_upstream_401_total{result}`; a retry also marks the access log's line.
    func count401(_ exchange: Exchange, _ result: Upstream401Result) {
        ctx.metrics.counters.routes[exchange.metricsSlot].upstream401[result.rawValue] += 1
        if result == .retried { exchange.record.retriedAfter401Sent() }
    }
}
