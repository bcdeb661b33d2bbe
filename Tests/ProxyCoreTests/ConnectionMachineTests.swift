import Config
import Testing

@testable import ProxyCore

private let limits = ConnectionMachine.Timeouts(clientHeaderTimeout: 10, clientIdleTimeout: 60, clientSendTimeout: 30)

/// One client connection driven event by event, as `Connection` drives it, checking what the machine
/// tells the connection to do.
@Suite struct ConnectionMachineTests {
    @Test func aKeepAliveRequestGoesIdleReadingHeadExchangeAndBackToIdle() {
        var m = ConnectionMachine(now: 0)
        #expect(m.phase == .idle && m.parsesRequests && m.readsRequests)
        m.onClientBytes(now: 1)
        #expect(m.phase == .readingHead(since: 1))
        m.onRequestHead()
        #expect(m.phase == .exchange && m.parsesRequests)
        m.onRequestEnded()
        #expect(!m.parsesRequests, "a pipelined request waits for this answer")
        #expect(m.readsRequests, "but is read into the buffer meanwhile")
        #expect(m.onExchangeFinished(now: 5, noMoreRequests: false) == .readNext)
        #expect(m.phase == .idle && m.parsesRequests && m.lastClientByte == 5)
        m.onPipelinedBytesWaiting(now: 6)
        #expect(m.phase == .readingHead(since: 6))
    }

    @Test func theHeadTimeoutRunsFromItsFirstByteAndTheIdleTimeoutFromTheLastOne() {
        var m = ConnectionMachine(now: 0)
        m.onClientBytes(now: 100)
        #expect(m.onTick(now: 110, pendingOut: 0, inExchange: false, limits) == .none, "exactly the limit is allowed")
        #expect(m.onTick(now: 110.1, pendingOut: 0, inExchange: false, limits) == .requestTimeout)
        var slow = ConnectionMachine(now: 0)
        slow.onClientBytes(now: 0)
        let patient = ConnectionMachine.Timeouts(clientHeaderTimeout: 1000, clientIdleTimeout: 60, clientSendTimeout: 30)
        #expect(slow.onTick(now: 60.5, pendingOut: 0, inExchange: false, patient) == .requestTimeout)
    }

    @Test func anIdleConnectionClosesAfterTheIdleTimeoutUnlessAnAnswerWaits() {
        let m = ConnectionMachine(now: 0)
        #expect(m.onTick(now: 59, pendingOut: 0, inExchange: false, limits) == .none)
        #expect(m.onTick(now: 61, pendingOut: 0, inExchange: false, limits) == .close)
        #expect(m.onTick(now: 29, pendingOut: 10, inExchange: false, limits) == .none)
    }

    @Test func aClientThatTakesNothingOfTheAnswerIsClosedAfterTheSendTimeout() {
        var m = ConnectionMachine(now: 0)
        m.onRequestHead()
        m.onOutputWaiting(now: 10)
        #expect(m.onTick(now: 39, pendingOut: 5, inExchange: true, limits) == .tickExchange)
        #expect(m.onTick(now: 41, pendingOut: 5, inExchange: true, limits) == .sendTimedOut)
        m.onClientTook(now: 40)
        #expect(m.onTick(now: 41, pendingOut: 5, inExchange: true, limits) == .tickExchange)
    }

    @Test func aLastAnswerIsWrittenThenTheConnectionLingersAndClosesWhenItsTimeIsUp() {
        var m = ConnectionMachine(now: 0)
        m.onRequestHead()
        m.onLastAnswer()
        #expect(m.isClosingAfterWrite && !m.parsesRequests && !m.readsRequests)
        #expect(m.onExchangeFinished(now: 1, noMoreRequests: false) == .closeAfterWrite)
        #expect(m.onOutputWritten(now: 2) == .linger)
        #expect(m.phase == .lingering(until: 2 + FixedLimits.lingerSeconds))
        #expect(m.onTick(now: 3, pendingOut: 0, inExchange: false, limits) == .none)
        #expect(m.onTick(now: 2 + FixedLimits.lingerSeconds, pendingOut: 0, inExchange: false, limits) == .close)
        #expect(m.onOutputWritten(now: 5) == .none, "lingering once")
    }

    @Test func aClientThatHalfClosedIsClosedRightAfterItsAnswer() {
        var m = ConnectionMachine(now: 0)
        m.onRequestHead()
        m.onRequestEnded()
        #expect(m.onClientFinishedSending(inExchange: true, requestBodyDone: true, pendingOut: 0) == .none)
        #expect(!m.readsRequests)
        #expect(m.onExchangeFinished(now: 1, noMoreRequests: true) == .closeAfterWrite)
        #expect(m.onOutputWritten(now: 1) == .close, "no lingering: the client sends nothing more")
    }

    @Test func aClientThatHalfClosesMidRequestIsClosedAtOnce() {
        var m = ConnectionMachine(now: 0)
        m.onRequestHead()
        #expect(m.onClientFinishedSending(inExchange: true, requestBodyDone: false, pendingOut: 0) == .close)
    }

    @Test func aHalfCloseBetweenRequestsClosesUnlessAnAnswerIsStillGoingOut() {
        var idle = ConnectionMachine(now: 0)
        #expect(idle.onClientFinishedSending(inExchange: false, requestBodyDone: true, pendingOut: 0) == .close)
        var inHead = ConnectionMachine(now: 0)
        inHead.onClientBytes(now: 1)
        #expect(inHead.onClientFinishedSending(inExchange: false, requestBodyDone: true, pendingOut: 0) == .close)
        var writing = ConnectionMachine(now: 0)
        #expect(writing.onClientFinishedSending(inExchange: false, requestBodyDone: true, pendingOut: 7) == .none)
        #expect(writing.isClosingAfterWrite)
        #expect(writing.onOutputWritten(now: 1) == .close)
    }

    @Test func aTunnelClosesWithEitherSide() {
        var clientSide = ConnectionMachine(now: 0)
        clientSide.onRequestHead()
        clientSide.onTunnel()
        #expect(!clientSide.parsesRequests)
        #expect(clientSide.onTick(now: 1, pendingOut: 0, inExchange: true, limits) == .tickExchange)
        #expect(clientSide.onClientFinishedSending(inExchange: true, requestBodyDone: true, pendingOut: 0) == .closeTunnel)

        var upstreamSide = ConnectionMachine(now: 0)
        upstreamSide.onRequestHead()
        upstreamSide.onTunnel()
        upstreamSide.onTunnelUpstreamClosed()
        #expect(upstreamSide.isClosingAfterWrite)
        #expect(upstreamSide.onOutputWritten(now: 1) == .close, "what the upstream sent goes out, then the connection closes")
    }

    @Test func aDrainClosesOnlyAnIdleConnection() {
        var m = ConnectionMachine(now: 0)
        #expect(m.closesAtDrain(inExchange: false, parserIdle: true, unparsedInput: false))
        #expect(!m.closesAtDrain(inExchange: true, parserIdle: true, unparsedInput: false))
        #expect(!m.closesAtDrain(inExchange: false, parserIdle: false, unparsedInput: false), "a head in progress is answered")
        #expect(!m.closesAtDrain(inExchange: false, parserIdle: true, unparsedInput: true))
        m.onLastAnswer()
        #expect(!m.closesAtDrain(inExchange: false, parserIdle: true, unparsedInput: false), "its last answer goes out first")
    }

    @Test func aClosedConnectionDecidesNothingMore() {
        var m = ConnectionMachine(now: 0)
        m.onClosed()
        #expect(m.isClosed && !m.parsesRequests && !m.readsRequests)
        #expect(m.onTick(now: 1000, pendingOut: 9, inExchange: false, limits) == .none)
        m.onLastAnswer()
        #expect(m.isClosed)
    }
}
