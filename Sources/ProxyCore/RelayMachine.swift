/// The decisions of a byte relay (`ByteRelay`), with no I/O: when a side is read, what follows the
/// end of what one side sends, when the relay is over, and when it has been silent or stuck too
/// long. The relay tells it what happened (the `on…` methods, the time passed in) and does what it
/// answers. Its two sides are the client's (`.client`) and the one the proxy opened (`.upstream`).
struct RelayMachine {
    enum Side: Equatable {
        case client
        case upstream

        var other: Side { self == .client ? .upstream : .client }
    }

    /// What the end of one side's bytes does to the relay: the one difference between its uses.
    enum HalfClose: Equatable {
        /// TCP's half-close goes through (RFC 9293 §3.6): once everything the ended side sent is
        /// written, the other side's writing is shut down, and the other direction goes on until it
        /// ends too. A CONNECT tunnel (RFC 9110 §9.3.6).
        case propagate
        /// The relay ends: what the ended side sent is written to the other, then both close, and
        /// neither is read any more (docs/ENGINE.md, "Upgrade and WebSocket").
        case closeBoth
    }

    /// The relay's bounds in time (docs/CONTRACT.md `limits:`).
    struct Timeouts: Equatable {
        /// No byte read either way for this long ends the relay (`client_idle_timeout`).
        var idle: Double
        /// Bytes waited this long for the client with none taken ends the relay
        /// (`client_send_timeout`); nil: no such bound.
        var clientSend: Double?
    }

    /// One side's state.
    struct SideState: Equatable {
        /// Bytes waiting to be written to this side.
        var pending = 0
        /// This side sent its end (a read returned 0, or the connection broke).
        var readEnded = false
        /// Writing to this side was shut down (`HalfClose.propagate`).
        var writeShut = false
        /// When bytes began to wait for this side, or it last took some.
        var lastTook: Double
    }

    let halfClose: HalfClose
    let timeouts: Timeouts
    /// A side is read only while less than this waits for the other (docs/ENGINE.md).
    let highWater: Int
    private(set) var client: SideState
    private(set) var upstream: SideState
    /// The last byte read from either side (or the start).
    private(set) var lastActivity: Double
    private(set) var isOver = false

    init(halfClose: HalfClose, timeouts: Timeouts, highWater: Int, now: Double) {
        self.halfClose = halfClose
        self.timeouts = timeouts
        self.highWater = highWater
        client = SideState(lastTook: now)
        upstream = SideState(lastTook: now)
        lastActivity = now
    }

    subscript(side: Side) -> SideState {
        get { side == .client ? client : upstream }
        set {
            if side == .client { client = newValue } else { upstream = newValue }
        }
    }

    // MARK: reading

    /// Whether `side` is read now: it has not ended, the other side has room, and (closing both)
    /// neither side has ended.
    func reads(_ side: Side) -> Bool {
        guard !isOver, !self[side].readEnded, self[side.other].pending < highWater else { return false }
        switch halfClose {
        case .propagate: return true
        case .closeBoth: return !self[side.other].readEnded
        }
    }

    /// `count` bytes came from `side`, queued for the other side (`pendingThere`: all that waits there now).
    mutating func onRead(from side: Side, pendingThere: Int, now: Double) {
        lastActivity = now
        onQueued(for: side.other, pending: pendingThere, now: now)
    }

    /// `side` sent its end.
    mutating func onReadEnded(_ side: Side) {
        self[side].readEnded = true
    }

    // MARK: writing

    /// Bytes are queued for `side`; `pending`: all that waits there now.
    mutating func onQueued(for side: Side, pending: Int, now: Double) {
        if self[side].pending == 0 { self[side].lastTook = now }
        self[side].pending = pending
    }

    enum AfterWrite: Equatable {
        case none
        /// Shut down writing to this side (its peer sees the end of what the other side sent).
        case shutdownWrite
        /// Everything that had to go has gone: close both sides.
        case end
    }

    /// Bytes were written to `side`; `pending`: what still waits there.
    mutating func onWritten(to side: Side, pending: Int, now: Double) -> AfterWrite {
        self[side].lastTook = now
        self[side].pending = pending
        return afterWrite(to: side)
    }

    /// What follows now that `side` took what it could.
    mutating func afterWrite(to side: Side) -> AfterWrite {
        guard !isOver else { return .none }
        switch halfClose {
        case .propagate:
            if self[side].pending == 0 && self[side.other].readEnded && !self[side].writeShut {
                self[side].writeShut = true
                if client.readEnded && upstream.readEnded && self[side.other].pending == 0 { return end() }
                return .shutdownWrite
            }
            if client.readEnded && upstream.readEnded && client.pending == 0 && upstream.pending == 0 { return end() }
            return .none
        case .closeBoth:
            // What the ended side sent has all gone to the other one.
            if (client.readEnded && upstream.pending == 0) || (upstream.readEnded && client.pending == 0) { return end() }
            return .none
        }
    }

    /// A write failed: the side is gone, and so is the relay.
    mutating func onWriteFailed() {
        isOver = true
    }

    private mutating func end() -> AfterWrite {
        isOver = true
        return .end
    }

    // MARK: time

    /// How often the relay's timer looks at the clocks: a quarter of the shortest bound, at most
    /// once a second.
    var checkInterval: Double {
        max(1, min(timeouts.idle, timeouts.clientSend ?? timeouts.idle) / 4)
    }

    /// Whether a bound ran out: nothing read either way for `idle`, or bytes waiting for the
    /// client that took none for `clientSend`.
    mutating func onTick(now: Double) -> Bool {
        guard !isOver else { return false }
        if now - lastActivity >= timeouts.idle {
            isOver = true
        } else if let send = timeouts.clientSend, client.pending > 0, now - client.lastTook > send {
            isOver = true
        }
        return isOver
    }

    /// The relay ended for a reason of its own (a broken socket, a closed connection).
    mutating func onClosed() {
        isOver = true
    }
}
