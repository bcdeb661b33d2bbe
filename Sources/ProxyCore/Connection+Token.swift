import Credentials

/// The token side of a client connection's exchange (CONTRACT point 3): a request goes with the
/// current token, or waits (bounded by `limits.refresh_wait`) for a refresh; a held 401 is retried
/// once with another token or passed on as it came. What the exchange's machine decides
/// (`ExchangeMachine.onTokenArrived`) is done here.
extension Connection {
    /// Sends with the current token, or waits (bounded by `refresh_wait`) for a refresh to give one.
    func acquireToken(for exchange: Exchange, staleGeneration: UInt64?) {
        let route = exchange.route!
        let view = route.tokens.current()
        if let snapshot = view.snapshot, snapshot.isValid(at: wallClock()), staleGeneration == nil || snapshot.generation != staleGeneration {
            // A 401 for an older token is retried with the newer one at once (CONTRACT point 3).
            if staleGeneration != nil {
                ctx.metrics.retriedAfter401()
                count401(exchange, .retried)
            }
            send(exchange, token: snapshot)
            return
        }
        switch view.session {
        case .ended:
            respond(.loginRequired(view.failure ?? "the session ended: run `tokenproxy login`"), to: exchange)
            return
        case .none where route.sessionNeedsLogin:
            // The token source's own words when it gave any (a sealed session no key opens names its key id).
            respond(.loginRequired(view.failure ?? "no session: run `tokenproxy login`"), to: exchange)
            return
        case .none, .active:
            break
        }
        ctx.metrics.waitedForToken()
        let loop = ctx.loop
        let timer = loop.schedule(after: ctx.configuration.limits.refreshWait) { [weak self, weak exchange] in
            guard let self, let exchange, !self.closed, exchange.endTokenWait().ended else { return }
            self.tokenWaitEnded(exchange, outcome: nil)
        }
        exchange.waitForToken(timer: timer, now: ctx.loop.now)
        let waiter = LoopBound(self), waiting = LoopBound(exchange)
        route.tokens.refresh(staleGeneration: staleGeneration ?? view.snapshot?.generation, reason: staleGeneration == nil ? .expiry : .unauthorized) { outcome in
            loop.execute {
                guard let self = waiter.object, let exchange = waiting.object, !self.closed else { return }
                let (ended, timer) = exchange.endTokenWait()
                guard ended else { return }
                if let timer { loop.cancel(timer) }
                self.tokenWaitEnded(exchange, outcome: outcome)
            }
        }
    }

    func tokenWaitEnded(_ exchange: Exchange, outcome: RefreshOutcome?) {
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
        switch machine.exchange.onTokenArrived(arrived) {
        case .send(let isRetryAfter401):
            if isRetryAfter401 {
                ctx.metrics.retriedAfter401()
                count401(exchange, .retried)
            }
            send(exchange, token: token)
        case .releaseHeld401:
            // No other token (or the one the upstream refused): its 401 goes on as it came.
            releaseHeld401(exchange)
        case .loginRequired:
            if after401 { count401(exchange, .loginRequired) }
            respond(.loginRequired(loginWhy), to: exchange)
        case .unavailable:
            if after401 { count401(exchange, .unavailable) }
            let view = exchange.route!.tokens.current()
            let why: String
            if case .unavailable(let message, _) = outcome { why = message } else { why = view.failure ?? "no valid token yet" }
            respond(.tokenUnavailable("no valid token: \(why)", retryAfter: view.retryAfter), to: exchange)
        }
    }

    /// `tokenproxy_upstream_401_total{result}`; a retry also marks the access log's line.
    func count401(_ exchange: Exchange, _ result: Upstream401Result) {
        ctx.metrics.counters.routes[exchange.metricsSlot].upstream401[result.rawValue] += 1
        if result == .retried { exchange.record.retriedAfter401Sent() }
    }

    func releaseHeld401(_ exchange: Exchange) {
        guard let held = exchange.takeHeld401() else { return }
        count401(exchange, .passedThrough)
        // The framing of what we hold is known exactly now.
        let response = Forwarder.heldAnswer(held.head, bodyLength: held.body.count)
        let framing = machine.exchange.startAnswering(status: response.status, upstreamFraming: .contentLength(held.body.count))
        writeHead(exchange, response, framing: framing)
        held.body.withUnsafeBytes { writeBody(exchange, $0) }
        responseDone(exchange)
    }
}
