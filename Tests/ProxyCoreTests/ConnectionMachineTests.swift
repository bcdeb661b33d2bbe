import Config
import HTTP1
import Testing

@testable import ProxyCore

private let limits = ConnectionMachine.Timeouts(clientHeaderTimeout: 10, clientIdleTimeout: 60, clientSendTimeout: 30)
private let exchangeLimits = ExchangeMachine.Timeouts(upstreamTimeout: 60, upstreamIdleTimeout: 30, clientIdleTimeout: 60)

/// The machine of an exchange for `head` (a GET by default), as `Connection.open` makes it.
private func exchange(_ head: String = "GET /a HTTP/1.1\r\nHost: x\r\n\r\n") -> ExchangeMachine {
    var parser = RequestParser(limits: ParserLimits(maxHeaderBytes: 8192, maxBodyBytes: 0))
    let bytes = Array(head.utf8)
    let (_, event) = bytes.withUnsafeBytes { parser.parse($0) }
    guard case .head(let parsed)? = event else { fatalError("not a request head: \(head)") }
    return ExchangeMachine(head: parsed, draining: false)
}

private let post = "POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\n"

extension ConnectionMachine {
    fileprivate func onTick(now: Double, pendingOut: Int, _ limits: Timeouts) -> TickAction {
        onTick(now: now, pendingOut: pendingOut, ExchangeSurroundings(), limits, exchangeLimits)
    }
}

/// One client connection driven event by event, as `Connection` drives it, checking what the machine
/// tells the connection to do.
@Suite struct ConnectionMachineTests {
    @Test func aKeepAliveRequestGoesIdleReadingHeadExchangeAndBackToIdle() {
        var m = ConnectionMachine(now: 0)
        #expect(m.phase == .idle && m.parsesRequests && m.readsRequests)
        m.onClientBytes(now: 1)
        #expect(m.phase == .readingHead(since: 1))
        m.onRequestHead(exchange())
        #expect(m.phase == .exchange && m.parsesRequests && m.hasExchange)
        let r1 = m.onRequestEnded()
        #expect(!r1, "its answer has not gone yet")
        #expect(!m.parsesRequests, "a pipelined request waits for this answer")
        #expect(m.readsRequests, "but is read into the buffer meanwhile")
        #expect(m.onExchangeFinished(now: 5, noMoreRequests: false) == .readNext)
        #expect(m.phase == .idle && m.parsesRequests && m.lastClientByte == 5 && !m.hasExchange)
        m.onPipelinedBytesWaiting(now: 6)
        #expect(m.phase == .readingHead(since: 6))
    }

    @Test func theHeadTimeoutRunsFromItsFirstByteAndTheIdleTimeoutFromTheLastOne() {
        var m = ConnectionMachine(now: 0)
        m.onClientBytes(now: 100)
        #expect(m.onTick(now: 110, pendingOut: 0, limits) == .none, "exactly the limit is allowed")
        #expect(m.onTick(now: 110.1, pendingOut: 0, limits) == .requestTimeout)
        var slow = ConnectionMachine(now: 0)
        slow.onClientBytes(now: 0)
        let patient = ConnectionMachine.Timeouts(clientHeaderTimeout: 1000, clientIdleTimeout: 60, clientSendTimeout: 30)
        #expect(slow.onTick(now: 60.5, pendingOut: 0, patient) == .requestTimeout)
    }

    @Test func anIdleConnectionClosesAfterTheIdleTimeoutUnlessAnAnswerWaits() {
        let m = ConnectionMachine(now: 0)
        #expect(m.onTick(now: 59, pendingOut: 0, limits) == .none)
        #expect(m.onTick(now: 61, pendingOut: 0, limits) == .close)
        #expect(m.onTick(now: 29, pendingOut: 10, limits) == .none)
    }

    @Test func aClientThatTakesNothingOfTheAnswerIsClosedAfterTheSendTimeout() {
        var m = ConnectionMachine(now: 0)
        m.onRequestHead(exchange())
        m.onOutputWaiting(now: 10)
        m.onClientBytes(now: 10)
        #expect(m.onTick(now: 39, pendingOut: 5, limits) == .none)
        #expect(m.onTick(now: 41, pendingOut: 5, limits) == .sendTimedOut)
        m.onClientTook(now: 40)
        #expect(m.onTick(now: 41, pendingOut: 5, limits) == .none)
    }

    @Test func aLastAnswerIsWrittenThenTheConnectionLingersAndClosesWhenItsTimeIsUp() {
        var m = ConnectionMachine(now: 0)
        m.onRequestHead(exchange())
        m.onLastAnswer()
        #expect(m.isClosingAfterWrite && !m.parsesRequests && !m.readsRequests)
        #expect(m.onExchangeFinished(now: 1, noMoreRequests: false) == .closeAfterWrite)
        #expect(m.onOutputWritten(now: 2) == .linger)
        #expect(m.phase == .lingering(until: 2 + FixedLimits.lingerSeconds))
        #expect(m.onTick(now: 3, pendingOut: 0, limits) == .none)
        #expect(m.onTick(now: 2 + FixedLimits.lingerSeconds, pendingOut: 0, limits) == .close)
        #expect(m.onOutputWritten(now: 5) == .none, "lingering once")
    }

    @Test func aClientThatHalfClosedIsClosedRightAfterItsAnswer() {
        var m = ConnectionMachine(now: 0)
        m.onRequestHead(exchange())
        _ = m.onRequestEnded()
        #expect(m.onClientFinishedSending(pendingOut: 0) == .none)
        #expect(!m.readsRequests)
        #expect(m.onExchangeFinished(now: 1, noMoreRequests: true) == .closeAfterWrite)
        #expect(m.onOutputWritten(now: 1) == .close, "no lingering: the client sends nothing more")
    }

    @Test func aClientThatHalfClosesMidRequestIsClosedAtOnce() {
        var m = ConnectionMachine(now: 0)
        m.onRequestHead(exchange(post))
        #expect(m.onClientFinishedSending(pendingOut: 0) == .close, "the body can never arrive whole")
        var whole = ConnectionMachine(now: 0)
        var get = exchange()
        whole.onRequestHead(get)
        #expect(whole.onClientFinishedSending(pendingOut: 0) == .none, "a request without a body is answered")
        get.onRequestBodyEnded()
        #expect(get.requestBodyDone)
    }

    @Test func aHalfCloseBetweenRequestsClosesUnlessAnAnswerIsStillGoingOut() {
        var idle = ConnectionMachine(now: 0)
        #expect(idle.onClientFinishedSending(pendingOut: 0) == .close)
        var inHead = ConnectionMachine(now: 0)
        inHead.onClientBytes(now: 1)
        #expect(inHead.onClientFinishedSending(pendingOut: 0) == .close)
        var writing = ConnectionMachine(now: 0)
        #expect(writing.onClientFinishedSending(pendingOut: 7) == .none)
        #expect(writing.isClosingAfterWrite)
        #expect(writing.onOutputWritten(now: 1) == .close)
    }

    @Test func aDrainClosesOnlyAnIdleConnection() {
        var m = ConnectionMachine(now: 0)
        let drained1 = m.onDrain(parserIdle: true, unparsedInput: false)
        #expect(drained1)
        let drained2 = m.onDrain(parserIdle: false, unparsedInput: false)
        #expect(!drained2, "a head in progress is answered")
        let drained3 = m.onDrain(parserIdle: true, unparsedInput: true)
        #expect(!drained3)
        m.onLastAnswer()
        let drained4 = m.onDrain(parserIdle: true, unparsedInput: false)
        #expect(!drained4, "its last answer goes out first")
    }

    @Test func aDrainLetsTheExchangeInProgressFinishWithoutKeepAlive() {
        var m = ConnectionMachine(now: 0)
        m.onRequestHead(exchange())
        #expect(m.exchange.keepAlive)
        let drained5 = m.onDrain(parserIdle: true, unparsedInput: false)
        #expect(!drained5)
        #expect(m.exchange.keepAlive == false, "its answer says close")
    }

    @Test func theExchangesTimeoutsAreDecidedWithTheConnectionsClock() {
        var m = ConnectionMachine(now: 0)
        m.onClientBytes(now: 0)
        m.onRequestHead(exchange(post))
        // The client went silent in its body, before any answer: 408 (client_idle_timeout 60).
        #expect(m.onTick(now: 59, pendingOut: 0, limits) == .none)
        #expect(m.onTick(now: 61, pendingOut: 0, limits) == .exchange(.requestTimeout))
        m.onClientBytes(now: 60)
        #expect(m.onTick(now: 61, pendingOut: 0, limits) == .none, "the connection's last client byte counts")
        var waiting = ConnectionMachine.ExchangeSurroundings()
        waiting.waitingForToken = true
        #expect(m.onTick(now: 121, pendingOut: 0, waiting, limits, exchangeLimits) == .none, "not while it waits for a token")
        // The upstream's head is late: 504 (upstream_timeout 60 from the last byte written).
        m.exchange.onTryStarted(tokenGeneration: 1, now: 100)
        m.exchange.onRequestBodyEnded()
        var connected = ConnectionMachine.ExchangeSurroundings()
        connected.upstreamActive = true
        #expect(m.onTick(now: 161, pendingOut: 0, connected, limits, exchangeLimits) == .exchange(.gatewayTimeout))
    }

    @Test func anAnswerThatCameBeforeTheBodysEndEndsTheExchangeWithTheBody() {
        var m = ConnectionMachine(now: 0)
        m.onRequestHead(exchange(post))
        let r2 = m.onResponseDone(noMoreRequests: false)
        #expect(!r2, "the rest of the body is read first")
        m.exchange.onRequestBodyEnded()
        let r3 = m.onRequestEnded()
        #expect(r3, "the body's end ends the exchange")
        var get = ConnectionMachine(now: 0)
        get.onRequestHead(exchange())
        let r4 = get.onResponseDone(noMoreRequests: false)
        #expect(r4)
        #expect(get.phase == .exchange, "keep-alive: the next request is read after `onExchangeFinished`")
        var last = ConnectionMachine(now: 0)
        last.onRequestHead(exchange("GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"))
        let r5 = last.onResponseDone(noMoreRequests: false)
        #expect(r5)
        #expect(last.isClosingAfterWrite)
    }

    @Test func aFailedRequestIsAnsweredByItsExchangeAloneOrByClosing() {
        var none = ConnectionMachine(now: 0)
        none.onClientBytes(now: 0)
        let r6 = none.onRequestFailed()
        #expect(r6 == .answerAlone)
        #expect(none.isClosingAfterWrite)
        var waiting = ConnectionMachine(now: 0)
        waiting.onRequestHead(exchange(post))
        let r7 = waiting.onRequestFailed()
        #expect(r7 == .answerInExchange)
        #expect(waiting.exchange.keepAlive == false, "the exchange's answer closes the connection")
        var answering = ConnectionMachine(now: 0)
        answering.onRequestHead(exchange(post))
        answering.exchange.onTryStarted(tokenGeneration: 1, now: 0)
        _ = answering.exchange.onFinalHead(status: 200, upstreamFraming: .contentLength(2), tokenCanChange: true, refusingGoodTokens: false)
        let r8 = answering.onRequestFailed()
        #expect(r8 == .close, "an answer that started cannot be replaced")
        var answered = ConnectionMachine(now: 0)
        answered.onRequestHead(exchange(post))
        _ = answered.onResponseDone(noMoreRequests: false)
        let r9 = answered.onRequestFailed()
        #expect(r9 == .answerAlone, "the exchange's answer is complete: the error goes alone")
    }

    @Test func anAnswerCutShortEndsTheExchangeAndTheConnection() {
        var m = ConnectionMachine(now: 0)
        m.onRequestHead(exchange())
        m.onAnswerCut()
        #expect(!m.hasExchange && m.isClosingAfterWrite)
        #expect(m.onClientFinishedSending(pendingOut: 3) == .none)
    }

    @Test func aClosedConnectionDecidesNothingMore() {
        var m = ConnectionMachine(now: 0)
        m.onClosed()
        #expect(m.isClosed && !m.parsesRequests && !m.readsRequests)
        #expect(m.onTick(now: 1000, pendingOut: 9, limits) == .none)
        m.onLastAnswer()
        #expect(m.isClosed)
    }
}
