/// The exchange's clocks at the connection's tick: which of `upstream_timeout`,
/// `upstream_idle_timeout` and `client_idle_timeout` ran out (docs/CONTRACT.md). Pure, like the rest
/// of the machine; apart because it reads the machine and changes nothing.
extension ExchangeMachine {
    /// The `limits:` that bound an exchange in time (docs/CONTRACT.md).
    struct Timeouts {
        var upstreamTimeout: Double
        var upstreamIdleTimeout: Double
        var clientIdleTimeout: Double
    }

    /// What the connection knows of its side at a tick.
    struct ClientSide {
        var lastClientByte: Double
        /// An upstream connection is being made or carries this exchange.
        var upstreamActive: Bool
        /// So much of the body waits for the upstream that the client is not being read.
        var bodyBacklogged: Bool
        var waitingForToken: Bool
    }

    enum TimeoutAction: Equatable {
        case none
        /// No final head within `upstream_timeout` of the last byte written up: 504.
        case gatewayTimeout
        /// The upstream went silent mid-body for `upstream_idle_timeout`.
        case silentMidBody
        /// The client went silent mid-body before any answer: 408.
        case requestTimeout
        /// The client went silent mid-body after the answer started: close.
        case closeClient
    }

    /// `upstream_timeout` until the final head (counted from the last byte written up, so a long upload
    /// is not cut), `upstream_idle_timeout` between answer bytes while the client keeps up,
    /// `client_idle_timeout` while the client's body is being read (a 101's tunnel has its own
    /// clocks: `RelayMachine`).
    func onTick(now: Double, _ client: ClientSide, _ limits: Timeouts) -> TimeoutAction {
        if client.upstreamActive {
            if !finalHeadArrived {
                if now - max(tryStartedAt, lastUpstreamWrite) > limits.upstreamTimeout { return .gatewayTimeout }
            } else if !receivePaused && now - lastUpstreamByte > limits.upstreamIdleTimeout {
                return .silentMidBody
            }
        }
        // Client silence counts only while it is read: not while its body waits for the upstream.
        guard !requestBodyDone, !client.bodyBacklogged, now - client.lastClientByte > limits.clientIdleTimeout else { return .none }
        if responseStarted { return .closeClient }
        return client.waitingForToken ? .none : .requestTimeout
    }
}
