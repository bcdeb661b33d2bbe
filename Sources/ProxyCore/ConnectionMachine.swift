import Config

/// The life of one client connection (docs/ARCHITECTURE.md, "A request"), with no I/O and no buffers:
/// `Connection` tells it what happened (events in: the `on…` methods, the time passed in) and does
/// what it answers (actions out). The exchange in progress is part of this state: its machine
/// (`ExchangeMachine`) lives in `exchange` from the request head until the exchange ends, so that a
/// decision that needs both (a half-close mid-request, a tick, a drain) is taken here from what the
/// machine already knows, and `Connection` only performs the answer. This one decides what surrounds
/// the exchange: when a request head may be read, when the connection closes or lingers, which of
/// the client's timeouts has run out, and the TLS under it all: the handshake and the switch into
/// TLS after a forward-proxy CONNECT's 200 (docs/FORWARD-PROXY.md) are its phases, and the switch is
/// an action it returns. `Connection` holds only the `TLSSession` itself, the I/O handle, as it holds
/// the socket. ProxyCoreTests drive it case by case.
struct ConnectionMachine {
    enum Phase: Equatable {
        /// The TLS handshake runs (a TLS listener's new connection, or a tunnel after its CONNECT's
        /// 200): its own steps say what to wait for, and no request is read. Its time counts against
        /// `client_idle_timeout`, as an idle connection's does.
        case handshaking
        /// Waiting for a request (a new connection, or keep-alive between requests).
        case idle
        /// Bytes of a request head have come (blank lines before it count): `client_header_timeout` runs.
        case readingHead(since: Double)
        /// A request is being handled: its body read, its answer written.
        case exchange
        /// A CONNECT was answered 200 and its exchange is over: once the 200 is written, the
        /// connection switches into TLS (`WrittenAction.startTunnelTLS`). Nothing is read meanwhile:
        /// the client's next bytes are TLS.
        case connectAnswered
        /// The last answer is being written; then the connection closes, or lingers.
        case closingAfterWrite
        /// Writing is shut down; what the client still sends is read and dropped until `until`, so that
        /// the kernel's reset does not destroy the answer in flight (RFC 9112 §9.6, nginx's lingering close).
        case lingering(until: Double)
        case closed
    }

    private(set) var phase: Phase = .idle
    /// The exchange in progress while `hasExchange`: it begins with `onRequestHead` and ends with
    /// `onExchangeFinished`, `onAnswerCut` or `onClosed`. Its events go to it here
    /// (`machine.exchange.on…`). Not an optional: the hot path reads it a few dozen times per request,
    /// and an optional's tag check on a value this size is a call each time (docs/ENGINE.md).
    var exchange = ExchangeMachine()
    private(set) var hasExchange = false
    /// The client shut down its sending side: the current answer is finished, then the connection closes.
    private(set) var peerHalfClosed = false
    /// The request in progress has been read whole while its answer has not: the next pipelined
    /// request waits (RFC 9112 §9.3.2: answers leave in order).
    private(set) var requestEnded = false
    private(set) var lastClientByte: Double
    /// When the client last took a byte of the answer, or when bytes began to wait for it.
    private(set) var lastClientWrite: Double

    /// The client's bytes go through TLS: on a TLS listener, or in a forward-proxy tunnel from its
    /// handshake on. A Bool, so the per-request paths test no optional session (docs/ENGINE.md).
    private(set) var speaksTLS: Bool
    /// OpenSSL must write before it can read on (`ClientTLSIO.read`): a writable socket reads again.
    private(set) var tlsWantsWrite = false
    /// The host of a forward-proxy tunnel, which every request in it must name (421 otherwise); set
    /// when its CONNECT is answered 200.
    private(set) var pin: TunnelPin?

    /// `tls`: the connection came from a TLS listener, and its handshake runs first.
    init(now: Double, tls: Bool = false) {
        lastClientByte = now
        lastClientWrite = now
        speaksTLS = tls
        if tls { phase = .handshaking }
    }

    // Pattern tests, not `==`: the phase has payloads, and these are asked many times a request.
    var isClosed: Bool {
        if case .closed = phase { return true }
        return false
    }
    var isLingering: Bool {
        if case .lingering = phase { return true }
        return false
    }
    var isClosingAfterWrite: Bool {
        if case .closingAfterWrite = phase { return true }
        return false
    }
    var isHandshaking: Bool {
        if case .handshaking = phase { return true }
        return false
    }
    /// A CONNECT was answered 200 and TLS has not started: the client is not read (its next bytes
    /// are TLS), from the answer on, also while the CONNECT's exchange ends.
    var awaitsTunnel: Bool { pin != nil && !speaksTLS }
    /// A TLS session is up over the socket (its handshake done): close_notify may go (RFC 8446 §6.1).
    var tlsEstablished: Bool { speaksTLS && !isHandshaking }

    /// Request bytes are parsed now: between requests, in a head, or in the body of the request in progress.
    var parsesRequests: Bool {
        switch phase {
        case .idle, .readingHead: return true
        case .exchange: return !requestEnded
        case .handshaking, .connectAnswered, .closingAfterWrite, .lingering, .closed: return false
        }
    }

    /// The client socket is read for requests.
    var readsRequests: Bool {
        guard !peerHalfClosed else { return false }
        switch phase {
        case .idle, .readingHead, .exchange: return true
        case .handshaking, .connectAnswered, .closingAfterWrite, .lingering, .closed: return false
        }
    }

    // MARK: reading

    /// Bytes came from the client; outside an exchange the first one starts a request head.
    mutating func onClientBytes(now: Double) {
        lastClientByte = now
        if case .idle = phase { phase = .readingHead(since: now) }
    }

    /// Unparsed bytes wait after an answer (a pipelined request): its head has started.
    mutating func onPipelinedBytesWaiting(now: Double) {
        if case .idle = phase { phase = .readingHead(since: now) }
    }

    /// A request head was parsed: its exchange begins.
    @inline(__always)
    mutating func onRequestHead(_ exchange: ExchangeMachine) {
        phase = .exchange
        requestEnded = false
        self.exchange = exchange
        hasExchange = true
    }

    /// The request in progress was read whole. Answers whether that ends the exchange (its answer
    /// was complete already: the upstream answered before the body's end).
    mutating func onRequestEnded() -> Bool {
        requestEnded = true
        return hasExchange && exchange.responseDone
    }

    enum HalfCloseAction: Equatable {
        /// Nothing now: the answer in progress (or queued) goes out, then the connection closes.
        case none
        case close
    }

    /// The client shut down its sending side (or its connection broke while reading). `pendingOut`:
    /// bytes of an answer still wait for the client.
    mutating func onClientFinishedSending(pendingOut: Int) -> HalfCloseAction {
        peerHalfClosed = true
        switch phase {
        case .exchange:
            // Cut off mid-request: the upstream can never get it whole. Otherwise answer, then close.
            if hasExchange { return exchange.requestBodyDone ? .none : .close }
            return closeUnlessWriting(pendingOut: pendingOut)
        case .closingAfterWrite:
            return .none
        case .handshaking, .idle, .readingHead, .connectAnswered, .lingering, .closed:
            return closeUnlessWriting(pendingOut: pendingOut)
        }
    }

    /// Nothing in flight; an unfinished request head can never complete now.
    private mutating func closeUnlessWriting(pendingOut: Int) -> HalfCloseAction {
        if pendingOut > 0 {
            phase = .closingAfterWrite
            return .none
        }
        return .close
    }

    // MARK: ending an exchange

    /// The connection takes no further request: the answer queued now is its last (an error that
    /// leaves the framing in doubt, an answer cut short, an exchange that does not keep the
    /// connection alive).
    mutating func onLastAnswer() {
        switch phase {
        case .closed, .lingering: return
        case .handshaking, .idle, .readingHead, .exchange, .connectAnswered, .closingAfterWrite: phase = .closingAfterWrite
        }
    }

    /// The exchange's answer is complete (queued for the client). `noMoreRequests`: the client has shut
    /// down its side and every request it sent has been taken. Answers whether the exchange is over
    /// now: its request was read whole, or the connection takes nothing more (the rest of a body the
    /// upstream did not wait for is read and dropped until the request's end).
    mutating func onResponseDone(noMoreRequests: Bool) -> Bool {
        guard hasExchange else { return false }
        exchange.onResponseDone()
        if !exchange.keepAlive || noMoreRequests { onLastAnswer() }
        return exchange.requestBodyDone || isClosingAfterWrite
    }

    enum FailureAction: Equatable {
        /// The answer had started and cannot be replaced: close.
        case close
        /// The exchange answers with the error (`Connection.respond`); the connection closes after it.
        case answerInExchange
        /// The error goes alone (no exchange, or its answer is complete); the connection closes after it.
        case answerAlone
    }

    /// A request failed in a way that ends the connection: it cannot be parsed, its body is over the
    /// limit or cannot be spooled, or the client went silent in it.
    mutating func onRequestFailed() -> FailureAction {
        if hasExchange {
            if exchange.responseStarted && !exchange.responseDone { return .close }
            exchange.onConnectionClosing()
            if !exchange.responseDone { return .answerInExchange }
        }
        onLastAnswer()
        return .answerAlone
    }

    /// The upstream failed after the answer had started: the exchange ends here, and the connection
    /// closes short of the announced end once what was sent is written.
    mutating func onAnswerCut() {
        hasExchange = false
        onLastAnswer()
    }

    /// A forward-proxy CONNECT for a route's host is answered 200 (queued in the exchange in
    /// progress): when the exchange is over and the 200 written, the connection switches into TLS,
    /// and every request in the tunnel must name `pin`'s host.
    mutating func onConnectAnswered(_ pin: TunnelPin) {
        self.pin = pin
    }

    enum AfterExchange: Equatable {
        /// Parse on: the next pipelined request, if any, on the next turn.
        case readNext
        /// The connection closes once the answer is written.
        case closeAfterWrite
        /// A CONNECT's 200 is the last answer in plain HTTP: TLS starts once it is written.
        case awaitTunnelTLS
    }

    /// Both halves of the exchange are over. `noMoreRequests`: the client has shut down its side and
    /// every request it sent has been taken.
    mutating func onExchangeFinished(now: Double, noMoreRequests: Bool) -> AfterExchange {
        hasExchange = false
        switch phase {
        case .exchange: break
        case .handshaking, .idle, .readingHead, .connectAnswered, .closingAfterWrite, .lingering, .closed: return .closeAfterWrite
        }
        requestEnded = false
        if noMoreRequests {
            phase = .closingAfterWrite
            return .closeAfterWrite
        }
        // The keep-alive wait (or the wait for the tunnel's handshake) starts now (client_idle_timeout).
        lastClientByte = now
        if awaitsTunnel {
            phase = .connectAnswered
            return .awaitTunnelTLS
        }
        phase = .idle
        return .readNext
    }

    // MARK: writing

    /// Bytes began to wait for the client (none were waiting): `client_send_timeout` counts from now.
    mutating func onOutputWaiting(now: Double) {
        lastClientWrite = now
    }

    /// The client took bytes of the answer.
    mutating func onClientTook(now: Double) {
        lastClientWrite = now
    }

    enum WrittenAction: Equatable {
        case none
        case close
        /// Shut writing down and read and drop what the client still sends until the deadline.
        case linger
        /// A CONNECT's 200 is out: the TLS session made for the tunnel takes the socket, and its
        /// handshake begins (the connection is now `handshaking`, speaking TLS, pinned).
        case startTunnelTLS
    }

    /// Everything queued for the client has been written. `unparsedInput`: client bytes wait unread.
    mutating func onOutputWritten(now: Double, unparsedInput: Bool = false) -> WrittenAction {
        switch phase {
        case .closingAfterWrite:
            if peerHalfClosed { return .close }
            phase = .lingering(until: now + FixedLimits.lingerSeconds)
            return .linger
        case .connectAnswered:
            // Bytes that came before the 200 were sent before the client could know the tunnel
            // exists: they are not TLS for it.
            if unparsedInput { return .close }
            phase = .handshaking
            speaksTLS = true
            return .startTunnelTLS
        case .handshaking, .idle, .readingHead, .exchange, .lingering, .closed:
            return .none
        }
    }

    // MARK: TLS

    /// The handshake is done: requests are read as on a plain connection.
    mutating func onHandshakeDone() {
        guard isHandshaking else { return }
        phase = .idle
    }

    enum HandshakeFailureAction: Equatable {
        case close
        /// Plain HTTP came to a TLS listener: say so in plain HTTP (a 400), as nginx does, then close.
        case answerPlainlyThenClose
    }

    /// The handshake failed; `notTLS`: the client's first bytes were not TLS at all. Inside a
    /// forward-proxy tunnel the client asked for TLS itself: nothing is answered in plain HTTP.
    func onHandshakeFailed(notTLS: Bool) -> HandshakeFailureAction {
        notTLS && pin == nil ? .answerPlainlyThenClose : .close
    }

    /// OpenSSL must write before it can read on: the socket's writability is waited for.
    mutating func onTLSWantsWrite() {
        tlsWantsWrite = true
    }

    /// The socket is writable again while OpenSSL wanted to write: reading goes on.
    mutating func onTLSCanWrite() {
        tlsWantsWrite = false
    }

    mutating func onClosed() {
        phase = .closed
        hasExchange = false
    }

    // MARK: time and drain

    /// The `limits:` that bound a client connection in time (docs/CONTRACT.md).
    struct Timeouts {
        var clientHeaderTimeout: Double
        var clientIdleTimeout: Double
        var clientSendTimeout: Double
    }

    enum TickAction: Equatable {
        case none
        /// The client took no byte of the answer for `client_send_timeout` (nginx's `send_timeout`): close.
        case sendTimedOut
        /// The head took longer than `client_header_timeout`, or the client went silent in it: 408.
        case requestTimeout
        /// An idle keep-alive connection, or a lingering one whose time is up: close.
        case close
        /// One of the exchange's own timeouts ran out (`ExchangeMachine.onTick`).
        case exchange(ExchangeMachine.TimeoutAction)
    }

    /// What the connection knows of the exchange's surroundings at a tick (its buffers and timers).
    struct ExchangeSurroundings {
        /// An upstream connection is being made or carries this exchange.
        var upstreamActive = false
        /// So much of the body waits for the upstream that the client is not being read.
        var bodyBacklogged = false
        var waitingForToken = false
    }

    func onTick(
        now: Double, pendingOut: Int, _ surroundings: ExchangeSurroundings = .init(), _ limits: Timeouts,
        _ exchangeLimits: ExchangeMachine.Timeouts
    ) -> TickAction {
        switch phase {
        case .closed:
            return .none
        case .lingering(let until):
            return now >= until ? .close : .none
        case .handshaking, .idle, .readingHead, .exchange, .connectAnswered, .closingAfterWrite:
            break
        }
        if pendingOut > 0 && now - lastClientWrite > limits.clientSendTimeout { return .sendTimedOut }
        if hasExchange {
            let side = ExchangeMachine.ClientSide(
                lastClientByte: lastClientByte, upstreamActive: surroundings.upstreamActive,
                bodyBacklogged: surroundings.bodyBacklogged, waitingForToken: surroundings.waitingForToken)
            let action = exchange.onTick(now: now, side, exchangeLimits)
            if case .none = action { return .none }
            return .exchange(action)
        }
        switch phase {
        case .readingHead(let since):
            if now - since > limits.clientHeaderTimeout || now - lastClientByte > limits.clientIdleTimeout { return .requestTimeout }
            return .none
        case .handshaking, .idle, .connectAnswered:
            return pendingOut == 0 && now - lastClientByte > limits.clientIdleTimeout ? .close : .none
        case .exchange, .closingAfterWrite, .lingering, .closed:
            return .none
        }
    }

    /// The server drains: an idle connection closes now (true); a busy one after its current answer,
    /// which no longer keeps the connection alive.
    mutating func onDrain(parserIdle: Bool, unparsedInput: Bool) -> Bool {
        if hasExchange {
            exchange.onConnectionClosing()
            return false
        }
        return parserIdle && !unparsedInput && phase != .closingAfterWrite
    }
}
