import Config
import HTTP1

/// One exchange on its client connection (docs/ARCHITECTURE.md, "A request"): a request head begins
/// it (the route, the access checks, the token), the body goes where its machine says (read first,
/// spooled, or streamed), and its end is an answer of the proxy's own or the upstream's, then the
/// next pipelined request. The machine (`machine.exchange`) decides; this performs.
extension Connection {
    func begin(_ head: consuming RequestHead) {
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

    @inline(__always)
    func open(_ head: consuming RequestHead, route: LoopRoute?) -> Exchange {
        let dropped = head.droppedFieldCount
        machine.onRequestHead(
            ExchangeMachine(
                head: head, draining: ctx.shared.draining.load(ordering: .relaxed), requestBuffering: route?.requestBuffering ?? 0,
                spoolLimit: route?.requestBufferingDisk ?? 0, signingBodyLimit: route?.signingBodyLimit,
                signingMayStreamUnsigned: route?.sigv4?.mayStreamUnsigned ?? false))
        let exchange = Exchange(head: head, route: route, startedAt: ctx.loop.now, upOut: upstreamOut)
        self.exchange = exchange
        if let tracer = ctx.tracer { exchange.record.trace = tracer.start(exchange.head) }
        if dropped > 0 { ctx.metrics.droppedUnderscoreFields(dropped) }
        return exchange
    }

    @inline(__always)
    func proceed(_ exchange: Exchange, route: LoopRoute, checked: Result<AccessPolicy.CheckedTarget, ProxyError>) {
        switch checked {
        case .failure(let error):
            respond(error, to: exchange)
        case .success(let target):
            if let budget = route.budget,
                let refusal = exchange.admitUnderBudget(budget, caller: target.caller ?? PlaceholderConfiguration.defaultCaller, now: ctx.loop.now)
            {
                respond(refusal, to: exchange)
                return
            }
            exchange.accept(target, route: route, maxBodyBytes: ctx.configuration.limits.maxBodyBytes, shared: ctx.shared)
            if exchange.keepsReplay { machine.exchange.onReplayKept(true) }
            // A chunked body within `forward.request_buffering` is read first (`forward` once it ends);
            // a client that waits for `100 Continue` before sending it gets the proxy's own.
            if !machine.exchange.isWaitingForBody {
                upstream.forward(exchange, self)
            } else if machine.exchange.answersContinue {
                appendOut(Forwarder.continueHead)
                flush()
            }
        }
    }

    /// Body bytes from the client: counted, kept for a replay when they fit, and queued for the
    /// upstream in its framing (or held while the request waits for its body). Answers whether the
    /// request, which waited for its chunked body, is to be sent now.
    func takeBody(_ bytes: UnsafeRawBufferPointer, into exchange: Exchange) -> ExchangeMachine.BufferingAction {
        guard exchange.countBody(bytes.count) else { return .none }
        if !exchange.keepForReplay(bytes) { machine.exchange.onReplayKept(false) }
        guard !machine.exchange.bodyRefused, !bytes.isEmpty else { return .none }
        if exchange.spools {
            if machine.exchange.isWaitingForBody {
                var action = machine.exchange.onBodyBuffered(total: exchange.spoolSize + bytes.count)
                if action == .keepWaiting {
                    switch exchange.spoolMore(bytes) {
                    case .spooled: return .keepWaiting
                    case .failed: return .none
                    case .full: action = machine.exchange.onSpoolUnavailable()
                    }
                }
                // It streams (as chunks): what the spool holds goes first, then these bytes.
                exchange.queueAfterSpool(bytes)
                return action
            }
            if exchange.queueBehindSpool(bytes) { return .none }
        }
        if machine.exchange.isWaitingForBody {
            var action = machine.exchange.onBodyBuffered(total: exchange.holdWaitedBody(bytes))
            if action == .spill {
                if exchange.startSpool() { return .keepWaiting }
                action = machine.exchange.onSpoolUnavailable()
            }
            if action == .send(whole: false) { exchange.chunkWaitedBody() }
            return action
        }
        exchange.queueBody(bytes)
        return .none
    }

    /// The client's body is complete. Answers whether the request, which waited for its body, is to
    /// be sent now.
    func bodyEnded(_ exchange: Exchange) -> ExchangeMachine.BufferingAction {
        let action = machine.exchange.onRequestBodyEnded()
        if exchange.bodyEndsInSpool {
            // A spooled body that ended in time is wholly at hand, in the file: a complete replay copy.
            if action == .send(whole: true) { machine.exchange.onReplayKept(true) }
            guard action == .none, !machine.exchange.bodyRefused else { return action }
            exchange.spooledBodyEnded()
            upstream.refillFromSpool(exchange, self)
            return action
        }
        guard action == .none, !machine.exchange.bodyRefused else { return action }
        exchange.streamedBodyEnded()
        return action
    }

    // MARK: ending an exchange

    /// Answers with one of the proxy's own errors.
    func respond(_ error: ProxyError, to exchange: Exchange) {
        upstream.detachUpstream()?.retire()
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
            if ctx.auditing { auditUnparsed(error) }
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
        let seconds = ctx.loop.now - exchange.startedAt
        if exchange.metricsSlot >= 0 {
            upstream.metrics.requestFinished(
                status: exchange.record.status, bytesIn: exchange.bodyBytesSeen, bytesOut: exchange.record.bytesOut, slot: exchange.metricsSlot,
                seconds: seconds)
        } else {
            upstream.metrics.requestFinished(status: exchange.record.status, bytesIn: exchange.bodyBytesSeen, bytesOut: exchange.record.bytesOut)
        }
        if ctx.configuration.log.accessLog { logAccess(exchange, event: "request", seconds: seconds) }
        if ctx.auditing { audit(exchange) }
        if let trace = exchange.record.trace { trace.tracer.finish(exchange) }
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
        upstream.detach()
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
        upstream.detach()
        self.exchange = nil
        machine.onAnswerCut()
        flush()
    }
}
