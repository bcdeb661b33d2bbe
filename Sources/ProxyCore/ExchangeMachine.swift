import Config
import HTTP1

/// The state and decisions of one exchange (docs/ENGINE.md, "One exchange"), with no I/O and no
/// buffers: the connection tells it what happened (events in: the `on…` methods) and does what it
/// answers (actions out). It lives in the connection's state (`ConnectionMachine.exchange`) for the
/// exchange's life. `Exchange` holds the bytes; `UpstreamSide` does the sending,
/// reading and writing; ProxyCoreTests drive it through the 401 hold, replays, retries on a fresh
/// connection, timeouts and upgrades. The single rules it applies are in `ExchangeRules`.
struct ExchangeMachine {
    static let maxHeld401Body = FixedLimits.held401Body

    enum Phase: Equatable {
        /// No final answer yet: waiting for a token, connecting, sending, or waiting for the head.
        case awaitingAnswer
        /// An upstream 401 (with this much of its body) is held while a refresh and one retry are
        /// tried (CONTRACT point 3).
        case holding401(bodyBytes: Int)
        /// The answer is going to the client (the upstream's, or the proxy's own).
        case answering
        /// 101 Switching Protocols: both connections are a byte tunnel.
        case tunnel
    }

    // What the request is (fixed).
    let isHEAD: Bool
    let isIdempotent: Bool
    let hasBody: Bool
    let clientVersion: HTTPVersion
    /// `Upgrade` asked for (RFC 9110 §7.8): a 101 makes a tunnel.
    let wantsUpgrade: Bool

    private(set) var phase: Phase = .awaitingAnswer
    /// The client connection stays open after this exchange.
    private(set) var keepAlive: Bool
    /// How the answer is framed for the client (set when it starts).
    private(set) var framing: ExchangeRules.ClientFraming = .none
    private(set) var responseDone = false

    // The request body.
    private(set) var requestBodyDone: Bool
    /// A copy of the whole body is being kept for a retry (`forward.retry_body_limit`).
    private(set) var replayKept = false
    /// The rest of the client's body is read and dropped (the upstream answered without it); the
    /// client connection closes after the answer.
    private(set) var bodyRefused = false
    var replayComplete: Bool { replayKept && requestBodyDone }

    /// How a chunked request body goes up (CONTRACT point 8, `forward.request_buffering`).
    enum BodyBuffering: Equatable {
        /// As the client framed it, streamed.
        case off
        /// The request waits upstream-side while the chunked body arrives, up to `limit` bytes.
        case waiting(limit: Int)
        /// Past the memory limit, the body goes on arriving into a file, up to `limit` bytes
        /// (`forward.request_buffering_disk`).
        case spooling(limit: Int)
        /// All of it arrived within the limit: it goes with Content-Length.
        case whole
    }
    private(set) var bodyBuffering: BodyBuffering
    var isWaitingForBody: Bool {
        switch bodyBuffering {
        case .waiting, .spooling: return true
        case .off, .whole: return false
        }
    }
    /// `forward.request_buffering_disk` (0: off).
    private let spoolLimit: Int
    /// The proxy answers the client's `Expect: 100-continue` itself, and the Expect field does not
    /// go upstream (`ExchangeRules.answersContinue`).
    let answersContinue: Bool

    // The token and the tries.
    private(set) var tokenInjected = false
    private(set) var sentGeneration: UInt64?
    /// The request's one retry after a 401 has been taken (a held 401 was read whole and a new token
    /// asked for): a second 401 goes to the client. The access log's `retried_401` is another fact,
    /// that a retry went up (`Exchange.record`).
    private(set) var retryAfter401Used = false
    /// A failed reused connection was replaced by a fresh one once (RFC 9110 §9.2.2).
    private(set) var retriedOnFresh = false

    // This try.
    /// Some body byte went up on this try or an earlier one: a retry needs the replay copy.
    private(set) var bodyOnWire = false
    private(set) var anyByteWritten = false
    /// This try sends no more: a final answer came before the body was wanted, or sending failed.
    private(set) var sendStopped = false
    private(set) var responseBytesSeen = 0
    private(set) var finalHeadArrived = false
    /// The upstream is not read while the client has too much of the answer waiting.
    private(set) var receivePaused = false
    private(set) var tryStartedAt = 0.0
    private(set) var lastUpstreamWrite = 0.0
    private(set) var lastUpstreamByte = 0.0

    /// No exchange: what `ConnectionMachine` holds between exchanges, never asked anything.
    init() {
        spoolLimit = 0
        answersContinue = false
        isHEAD = false
        isIdempotent = false
        hasBody = false
        clientVersion = .http1_1
        wantsUpgrade = false
        keepAlive = false
        requestBodyDone = true
        bodyBuffering = .off
    }

    /// `requestBuffering`: `forward.request_buffering` (0: off); `spoolLimit`:
    /// `forward.request_buffering_disk` (0: off); `signingBodyLimit`: a SigV4 route's body is read
    /// whole first up to this (`forward.retry_body_limit`; nil: not such a route);
    /// `signingMayStreamUnsigned`: that route's service takes `UNSIGNED-PAYLOAD` for a streamed body.
    @inline(__always)
    init(
        head: borrowing RequestHead, draining: Bool, requestBuffering: Int = 0, spoolLimit: Int = 0, signingBodyLimit: Int? = nil,
        signingMayStreamUnsigned: Bool = false
    ) {
        isHEAD = head.method == "HEAD"
        isIdempotent = ExchangeRules.isIdempotent(head.method)
        hasBody = head.framing != .none
        clientVersion = head.version
        // Most requests name no connection option: the list is not walked (nor retained) for them.
        wantsUpgrade = !head.connectionOptions.isEmpty && head.connectionOptions.contains("upgrade") && head.first("upgrade") != nil
        keepAlive = head.keepAlive && !draining
        requestBodyDone = !hasBody
        if let signingBodyLimit {
            // Its hash goes in the head (CONTRACT.md "AWS credentials and SigV4 signing"); it is held in memory only.
            self.spoolLimit = 0
            answersContinue = false
            bodyBuffering =
                ExchangeRules.holdsBodyToSign(
                    framing: head.framing, wantsUpgrade: wantsUpgrade, expectsContinue: head.expectContinue,
                    mayStreamUnsigned: signingMayStreamUnsigned,
                    streamsAsFramed: signingMayStreamUnsigned && SigV4RequestSigner.declaresUnsignedTrailer(head), limit: signingBodyLimit)
                ? .waiting(limit: signingBodyLimit) : .off
            return
        }
        self.spoolLimit = spoolLimit
        let buffers = ExchangeRules.buffersChunkedBody(chunked: head.framing == .chunked, wantsUpgrade: wantsUpgrade, limit: requestBuffering)
        bodyBuffering = buffers ? .waiting(limit: requestBuffering) : .off
        answersContinue = ExchangeRules.answersContinue(expectsContinue: head.expectContinue, buffersBody: buffers)
    }

    var responseStarted: Bool {
        switch phase {
        case .answering, .tunnel: return true
        case .awaitingAnswer, .holding401: return false
        }
    }

    var isTunnel: Bool { phase == .tunnel }
    var isHolding401: Bool {
        if case .holding401 = phase { return true }
        return false
    }

    // MARK: the request going up

    /// A try begins: the request goes (again) with this token (nil: the client's own Authorization).
    /// What was sent on an earlier try is sent again from the replay copy.
    mutating func onTryStarted(tokenGeneration: UInt64?, now: Double) {
        tokenInjected = tokenGeneration != nil
        sentGeneration = tokenGeneration
        phase = .awaitingAnswer
        bodyOnWire = false
        anyByteWritten = false
        sendStopped = false
        responseBytesSeen = 0
        finalHeadArrived = false
        receivePaused = false
        tryStartedAt = now
        lastUpstreamWrite = now
    }

    /// Bytes went up; `reachedBody`: some of them were body.
    mutating func onSent(reachedBody: Bool, now: Double) {
        anyByteWritten = true
        if reachedBody { bodyOnWire = true }
        lastUpstreamWrite = now
    }

    /// The upstream stopped taking bytes (it may have answered first: the answer is read then).
    mutating func onSendFailed() {
        sendStopped = true
    }

    enum BufferingAction: Equatable {
        /// Go on waiting for the body.
        case keepWaiting
        /// Send the request now: with the chunks as they came (`whole: false`, the body outgrew the
        /// limit), or with Content-Length (`whole: true`, all of it is at hand).
        case send(whole: Bool)
        /// The body outgrew memory: move what came into a spool file and go on waiting there.
        case spill
        /// The body was not being waited for.
        case none
    }

    /// `total` bytes of a chunked body are at hand and the request waits for them.
    mutating func onBodyBuffered(total: Int) -> BufferingAction {
        switch bodyBuffering {
        case .waiting(let limit):
            guard total > limit else { return .keepWaiting }
            if spoolLimit > limit {
                bodyBuffering = .spooling(limit: spoolLimit)
                return .spill
            }
        case .spooling(let limit):
            guard total > limit else { return .keepWaiting }
        case .off, .whole:
            return .none
        }
        bodyBuffering = .off
        return .send(whole: false)
    }

    /// No spool file could be made: the body streams as it would without one.
    mutating func onSpoolUnavailable() -> BufferingAction {
        bodyBuffering = .off
        return .send(whole: false)
    }

    /// A copy of the whole body is (no longer) being kept for a retry.
    mutating func onReplayKept(_ kept: Bool) {
        replayKept = kept
    }

    /// The client has too much of the answer waiting: the upstream is not read until it catches up.
    mutating func onClientBacklogged() {
        receivePaused = true
    }

    mutating func onClientCaughtUp() {
        receivePaused = false
    }

    /// The client connection closes after this exchange (a drain, or an error on the connection).
    mutating func onConnectionClosing() {
        keepAlive = false
    }

    @discardableResult
    mutating func onRequestBodyEnded() -> BufferingAction {
        requestBodyDone = true
        guard isWaitingForBody else { return .none }
        bodyBuffering = .whole
        return .send(whole: true)
    }

    mutating func onAnswerBytes(_ n: Int, now: Double) {
        responseBytesSeen += n
        lastUpstreamByte = now
    }

    // MARK: the answer's head

    enum HeadAction: Equatable {
        /// Relay the head framed so (and start the 30 s guard against refresh storms first when asked).
        case relay(ExchangeRules.ClientFraming, startStormGuard: Bool)
        /// Hold the 401: its body is kept, the token refreshed, and the request sent again.
        case hold401
        /// Send the 101 to the client and join both connections.
        case startTunnel
        /// The answer cannot be used.
        case broken(String)
    }

    /// A final answer's head arrived. `tokenCanChange`: the source can give another token;
    /// `refusingGoodTokens`: a fresh token was refused within the last 30 s (CONTRACT point 3);
    /// `refusesToken`: the answer refuses the token and is handled as a 401 (`ExchangeRules.refusesToken`
    /// and `AWSRefusal` decide; nil: a 401 only).
    mutating func onFinalHead(
        status: Int, upstreamFraming: ResponseBodyFraming, tokenCanChange: Bool, refusingGoodTokens: Bool, refusesToken: Bool? = nil
    ) -> HeadAction {
        finalHeadArrived = true
        // A final answer before any of the body went up (`Expect: 100-continue`, RFC 9110 §10.1.1):
        // the body is not sent on this connection.
        if hasBody && !requestBodyDone && !bodyOnWire { sendStopped = true }
        if status == 101 {
            guard wantsUpgrade else { return .broken("101 Switching Protocols to a request that asked for no upgrade") }
            phase = .tunnel
            keepAlive = false
            return .startTunnel
        }
        var startStormGuard = false
        if refusesToken ?? (status == 401) {
            let action = ExchangeRules.onUnauthorized(
                .init(
                    tokenInjected: tokenInjected, alreadyRetried: retryAfter401Used, tokenCanChange: tokenCanChange,
                    refusingGoodTokens: refusingGoodTokens, body: sentBody))
            switch action {
            case .holdAndRetry:
                phase = .holding401(bodyBytes: 0)
                return .hold401
            case .passOn(let guardStorm):
                startStormGuard = guardStorm
            }
        }
        return .relay(startAnswering(status: status, upstreamFraming: upstreamFraming), startStormGuard: startStormGuard)
    }

    /// The answer starts going to the client (the upstream's head, or a held 401 released).
    mutating func startAnswering(status: Int, upstreamFraming: ResponseBodyFraming) -> ExchangeRules.ClientFraming {
        phase = .answering
        if sendStopped && !requestBodyDone { refuseRestOfBody() }
        framing = ExchangeRules.clientFraming(
            isHEAD: isHEAD, clientVersion: clientVersion, status: status, upstream: upstreamFraming)
        if case .close = framing { keepAlive = false }
        return framing
    }

    // MARK: the answer's body and end

    enum BodyAction: Equatable {
        case relay
        /// Kept with the held 401.
        case hold
        /// Too big to hold: the held 401 goes to the client as it came, then these bytes.
        case releaseHeldThenRelay
    }

    mutating func onAnswerBody(count: Int) -> BodyAction {
        guard case .holding401(let held) = phase else { return .relay }
        if held + count <= Self.maxHeld401Body {
            phase = .holding401(bodyBytes: held + count)
            return .hold
        }
        return .releaseHeldThenRelay
    }

    enum AfterAnswer: Equatable {
        /// The answer is complete; `refusedBody`: the client was still sending a body the upstream
        /// did not wait for (what is queued of it is dropped, the connection closes after the answer).
        case complete(refusedBody: Bool)
        /// The held 401 was read whole: refresh and send the request again.
        case retryWithNewToken(staleGeneration: UInt64?)
        /// The held 401 cannot be retried after all (part of a body went up and is not kept).
        case releaseHeld401
    }

    /// The answer was read to its end. `reuseConnection`: RFC 9112 §9.3, the upstream connection
    /// goes back to the pool only when both messages ended cleanly on it.
    mutating func onAnswerEnded(trailingBytes: Bool, parserSaysClose: Bool, bytesWaitingToGoUp: Int)
        -> (reuseConnection: Bool, next: AfterAnswer)
    {
        let reuse = ExchangeRules.connectionReusable(
            .init(
                trailingBytes: trailingBytes, parserSaysClose: parserSaysClose, sendStopped: sendStopped,
                requestBodyDone: requestBodyDone, bytesWaitingToGoUp: bytesWaitingToGoUp))
        if isHolding401 {
            if !sentBody.canGoAgain { return (reuse, .releaseHeld401) }
            retryAfter401Used = true
            return (reuse, .retryWithNewToken(staleGeneration: sentGeneration))
        }
        if !requestBodyDone {
            refuseRestOfBody()
            return (reuse, .complete(refusedBody: true))
        }
        return (reuse, .complete(refusedBody: false))
    }

    enum Failure: Equatable {
        /// Nothing went to the client yet: answer 502.
        case badGateway
        /// The answer had started: the client connection closes short of its announced end.
        case cut
        /// Send the request again, once, on a fresh connection (RFC 9112 §9.3.1, RFC 9110 §9.2.2).
        case retryOnFreshConnection
    }

    private var sentBody: ExchangeRules.SentBody { .init(onWire: bodyOnWire, replayComplete: replayComplete) }

    /// The upstream connection closed before any byte of an answer.
    mutating func onClosedBeforeAnswer(connectionWasReused: Bool) -> Failure {
        let retry =
            !isHolding401 && responseBytesSeen == 0
            && ExchangeRules.retriesOnFreshConnection(
                .init(
                    isIdempotent: isIdempotent, connectionWasReused: connectionWasReused,
                    alreadyRetriedOnFreshConnection: retriedOnFresh, anyByteWritten: anyByteWritten, body: sentBody))
        if retry {
            retriedOnFresh = true
            return .retryOnFreshConnection
        }
        return onBroken()
    }

    /// The upstream's answer cannot be used (malformed, cut, silent).
    mutating func onBroken() -> Failure {
        if isHolding401 {
            phase = .awaitingAnswer
            return .badGateway
        }
        if responseStarted {
            keepAlive = false
            return .cut
        }
        return .badGateway
    }

    // MARK: the proxy's own answers and the end

    /// The proxy answers itself (an error). The connection closes after it when the error says so,
    /// or when a body it will not read leaves the framing in doubt.
    mutating func onProxyAnswer(closesConnection: Bool) {
        phase = .answering
        if closesConnection || (hasBody && !requestBodyDone) { keepAlive = false }
    }

    mutating func onResponseDone() {
        responseDone = true
    }

    private mutating func refuseRestOfBody() {
        bodyRefused = true
        keepAlive = false
    }

    // MARK: tokens

    enum TokenArrived: Equatable {
        case valid(generation: UInt64)
        case loginRequired
        /// No valid token (the refresh failed, or the wait ran out).
        case none
    }

    enum TokenAction: Equatable {
        /// Send (again) with the new token; `isRetryAfter401` is counted in the metrics.
        case send(isRetryAfter401: Bool)
        /// Pass the held 401 on as it came; `startStormGuard`: the refresh handed back the very
        /// credential the upstream refused, which counts as a refused retry (CONTRACT point 3).
        case releaseHeld401(startStormGuard: Bool)
        case loginRequired
        /// 503 `token_unavailable`.
        case unavailable
    }

    /// The wait for a token ended (CONTRACT point 3): a held 401 is retried only with another token.
    func onTokenArrived(_ token: TokenArrived) -> TokenAction {
        let retrying = isHolding401
        switch token {
        case .valid(let generation):
            if retrying && generation == sentGeneration { return .releaseHeld401(startStormGuard: true) }
            return .send(isRetryAfter401: retrying)
        case .loginRequired:
            return .loginRequired
        case .none:
            return retrying ? .releaseHeld401(startStormGuard: false) : .unavailable
        }
    }
}
