/// The request body of the exchange in progress: its machine (`machine.exchange`) decides whether
/// the request waits for its body, spills it to a spool file or streams it (CONTRACT point 8,
/// `forward.request_buffering`); its `Exchange` holds the bytes. This is where the two meet.
extension Connection {
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
            leg.refillFromSpool(exchange, self)
            return action
        }
        guard action == .none, !machine.exchange.bodyRefused else { return action }
        exchange.streamedBodyEnded()
        return action
    }
}
