import Upstream

/// The upstream leg of an exchange: the connection that carries its try (or the attempt to make
/// one), one read of the answer at a time, and the upstream connection's events, which go to the
/// connection's `UpstreamLeg` while the exchange is attached to its client connection (an event
/// for an exchange that has ended finds no connection and does nothing).
extension Exchange {
    /// A try goes on this connection's behalf (until `detach`).
    func attach(to connection: Connection) {
        self.connection = connection
    }

    /// A new connection is being made for this try.
    func connecting(_ attempt: UpstreamConnectAttempt, startedAt: Double) {
        self.attempt = attempt
        connectStartedAt = startedAt
    }

    /// The try's connection is ready; answers how long a new one took to make (nil: it came from the pool).
    func connected(_ c: UpstreamConnection, now: Double) -> Double? {
        let took = connectStartedAt > 0 ? now - connectStartedAt : nil
        connectStartedAt = 0
        c.owner = self
        upstream = c
        return took
    }

    func connectFailed() {
        connectStartedAt = 0
    }

    /// One read of the answer at a time: false while another is under way.
    func beginReading() -> Bool {
        guard !reading else { return false }
        reading = true
        return true
    }

    func endReading() {
        reading = false
    }

    /// Drops the upstream leg: the attempt is cancelled, the connection closed or pooled.
    func detachUpstream() -> UpstreamConnection? {
        attempt?.cancel()
        attempt = nil
        let c = upstream
        upstream = nil
        c?.owner = nil
        return c
    }

    // MARK: upstream events (forwarded to the connection's leg)

    func upstreamConnected(_ c: UpstreamConnection) {
        attempt = nil
        guard let connection else {
            c.retire()
            return
        }
        connection.leg.upstreamConnected(self, c, connection)
    }

    func upstreamConnectFailed(_ failure: UpstreamFailure) {
        attempt = nil
        if let connection { connection.leg.upstreamFailed(self, failure, connection) }
    }

    func upstreamReady(_ events: UInt32) {
        if let connection { connection.leg.upstreamReady(self, events, connection) }
    }
}
