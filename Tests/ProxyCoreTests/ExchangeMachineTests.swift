import HTTP1
import Testing

@testable import ProxyCore

/// One exchange driven event by event, as `UpstreamLeg` drives it, checking what the
/// machine tells the connection to do.
private func machine(_ head: String, draining: Bool = false, requestBuffering: Int = 0, spoolLimit: Int = 0) -> ExchangeMachine {
    var parser = RequestParser(limits: ParserLimits(maxHeaderBytes: 8192, maxBodyBytes: 0))
    let bytes = Array(head.utf8)
    let (_, event) = bytes.withUnsafeBytes { parser.parse($0) }
    guard case .head(let parsed)? = event else { fatalError("not a request head: \(head)") }
    return ExchangeMachine(head: parsed, draining: draining, requestBuffering: requestBuffering, spoolLimit: spoolLimit)
}

private let get = "GET /a HTTP/1.1\r\nHost: x\r\n\r\n"
private let post = "POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\n"
private let expectingPost = "POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n"
private let upgrade = "GET /ws HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n"

extension ExchangeMachine {
    /// A try with token generation `g` whose head (and `bodyBytes` of body) went up.
    fileprivate mutating func sendAll(generation g: UInt64? = 1, body: Bool = false, now: Double = 0) {
        onTryStarted(tokenGeneration: g, now: now)
        onSent(reachedBody: false, now: now)
        if body {
            onSent(reachedBody: true, now: now)
            onRequestBodyEnded()
        }
    }

    fileprivate mutating func head(_ status: Int, _ framing: ResponseBodyFraming = .contentLength(2), canChange: Bool = true) -> HeadAction {
        onFinalHead(status: status, upstreamFraming: framing, tokenCanChange: canChange, refusingGoodTokens: false)
    }
}

@Suite struct ExchangeMachineUnauthorizedTests {
    @Test func a401IsHeldRefreshedAndRetriedOnceThenTheSecondGoesOnAndGuardsAgainstStorms() {
        var m = machine(get)
        m.sendAll(generation: 1)
        #expect(m.head(401) == .hold401)
        #expect(m.onAnswerBody(count: 2) == .hold)
        #expect(
            m.onAnswerEnded(trailingBytes: false, parserSaysClose: false, bytesWaitingToGoUp: 0)
                == (reuseConnection: true, next: .retryWithNewToken(staleGeneration: 1)))
        #expect(!m.responseStarted)
        #expect(m.onTokenArrived(.valid(generation: 2)) == .send(isRetryAfter401: true))
        m.sendAll(generation: 2)
        #expect(m.head(401) == .relay(.length(2), startStormGuard: true))
        #expect(m.responseStarted)
    }

    @Test func theSameTokenAgainReleasesTheHeld401AndStartsTheStormGuard() {
        var m = machine(get)
        m.sendAll(generation: 7)
        #expect(m.head(401) == .hold401)
        _ = m.onAnswerEnded(trailingBytes: false, parserSaysClose: false, bytesWaitingToGoUp: 0)
        #expect(m.onTokenArrived(.valid(generation: 7)) == .releaseHeld401(startStormGuard: true))
        #expect(m.onTokenArrived(.none) == .releaseHeld401(startStormGuard: false))
        #expect(m.onTokenArrived(.loginRequired) == .loginRequired)
    }

    @Test func withoutAHeld401NoTokenMeans503() {
        let m = machine(get)
        #expect(m.onTokenArrived(.none) == .unavailable)
        #expect(m.onTokenArrived(.valid(generation: 3)) == .send(isRetryAfter401: false))
    }

    @Test func aStaticTokenOrTheClientsOwnAuthorizationIsNeverRetried() {
        var m = machine(get)
        m.sendAll(generation: 1)
        #expect(m.head(401, canChange: false) == .relay(.length(2), startStormGuard: false))
        var own = machine(get)
        own.sendAll(generation: nil)
        #expect(own.head(401) == .relay(.length(2), startStormGuard: false))
    }

    @Test func aBig401BodyIsPassedOnInsteadOfHeld() {
        var m = machine(get)
        m.sendAll()
        #expect(m.head(401, .contentLength(100_000)) == .hold401)
        #expect(m.onAnswerBody(count: ExchangeMachine.maxHeld401Body) == .hold)
        #expect(m.onAnswerBody(count: 1) == .releaseHeldThenRelay)
        #expect(m.startAnswering(status: 401, upstreamFraming: .contentLength(100_000)) == .length(100_000))
        #expect(m.onAnswerBody(count: 10) == .relay)
    }

    @Test func aBodySentButNotKeptCannotBeReplayed() {
        var m = machine(post)
        m.sendAll(body: true)
        #expect(m.head(401) == .relay(.length(2), startStormGuard: false))

        var kept = machine(post)
        kept.onReplayKept(true)
        kept.sendAll(body: true)
        #expect(kept.head(401) == .hold401)
    }

    @Test func a401BeforeTheBodyWentUpIsRetriedWithNothingToReplay() {
        var m = machine(expectingPost)
        m.onTryStarted(tokenGeneration: 1, now: 0)
        m.onSent(reachedBody: false, now: 0)
        #expect(m.head(401) == .hold401)
        #expect(m.sendStopped)
        let (reuse, next) = m.onAnswerEnded(trailingBytes: false, parserSaysClose: false, bytesWaitingToGoUp: 0)
        #expect(!reuse)  // the body the client still sends was never written: this connection's framing is unknown
        #expect(next == .retryWithNewToken(staleGeneration: 1))
    }

    @Test func a401HeldWhenTheUpstreamBreaksIsA502NotACut() {
        var m = machine(get)
        m.sendAll()
        #expect(m.head(401) == .hold401)
        #expect(m.onBroken() == .badGateway)
        #expect(!m.responseStarted)
    }
}

@Suite struct ExchangeMachineAnswerTests {
    @Test func aFinalAnswerBeforeTheBodyRefusesTheRestAndClosesTheClientConnection() {
        var m = machine(expectingPost)
        m.onTryStarted(tokenGeneration: nil, now: 0)
        m.onSent(reachedBody: false, now: 0)
        #expect(m.head(417) == .relay(.length(2), startStormGuard: false))
        #expect(m.bodyRefused)
        #expect(!m.keepAlive)
        #expect(
            m.onAnswerEnded(trailingBytes: false, parserSaysClose: false, bytesWaitingToGoUp: 0)
                == (reuseConnection: false, next: .complete(refusedBody: true)))
    }

    @Test func aCleanExchangeLeavesTheConnectionForThePool() {
        var m = machine(post)
        m.sendAll(body: true)
        #expect(m.head(200) == .relay(.length(2), startStormGuard: false))
        #expect(
            m.onAnswerEnded(trailingBytes: false, parserSaysClose: false, bytesWaitingToGoUp: 0)
                == (reuseConnection: true, next: .complete(refusedBody: false)))
        #expect(m.keepAlive)
        #expect(!m.onAnswerEnded(trailingBytes: true, parserSaysClose: false, bytesWaitingToGoUp: 0).reuseConnection)
        #expect(!m.onAnswerEnded(trailingBytes: false, parserSaysClose: true, bytesWaitingToGoUp: 0).reuseConnection)
    }

    @Test func aCloseDelimitedAnswerToAnHTTP10ClientEndsTheConnection() {
        var m = machine("GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
        m.sendAll()
        #expect(m.keepAlive)
        #expect(m.head(200, .untilClose) == .relay(.close, startStormGuard: false))
        #expect(!m.keepAlive)
    }

    @Test func aFailureAfterTheAnswerStartedCutsTheConnection() {
        var m = machine(get)
        m.sendAll()
        _ = m.head(200)
        #expect(m.onBroken() == .cut)
        #expect(!m.keepAlive)
    }

    @Test func drainingClosesAfterTheAnswer() {
        #expect(!machine(get, draining: true).keepAlive)
    }
}

@Suite struct ExchangeMachineFreshConnectionTests {
    @Test func aGetOnAReusedConnectionThatClosedIsRetriedOnceOnAFreshOne() {
        var m = machine(get)
        m.sendAll()
        #expect(m.onClosedBeforeAnswer(connectionWasReused: true) == .retryOnFreshConnection)
        m.sendAll()
        #expect(m.onClosedBeforeAnswer(connectionWasReused: true) == .badGateway)
    }

    @Test func notAfterAnswerBytesNorOnAFreshConnection() {
        var m = machine(get)
        m.sendAll()
        m.onAnswerBytes(3, now: 0)
        #expect(m.onClosedBeforeAnswer(connectionWasReused: true) == .badGateway)
        var fresh = machine(get)
        fresh.sendAll()
        #expect(fresh.onClosedBeforeAnswer(connectionWasReused: false) == .badGateway)
    }

    @Test func aPostIsRetriedOnlyWhenNothingWasWritten() {
        var m = machine(post)
        m.sendAll(body: true)
        #expect(m.onClosedBeforeAnswer(connectionWasReused: true) == .badGateway)
        var unsent = machine(post)
        unsent.onTryStarted(tokenGeneration: 1, now: 0)
        #expect(unsent.onClosedBeforeAnswer(connectionWasReused: true) == .retryOnFreshConnection)
    }
}

@Suite struct ExchangeMachineUpgradeTests {
    @Test func a101ToAnUpgradeRequestMakesATunnel() {
        var m = machine(upgrade)
        #expect(m.wantsUpgrade)
        m.sendAll()
        #expect(m.head(101, .none) == .startTunnel)
        #expect(m.isTunnel)
        #expect(m.responseStarted)
        #expect(!m.keepAlive)
    }

    @Test func a101ToAnyOtherRequestIsBroken() {
        var m = machine(get)
        m.sendAll()
        guard case .broken = m.head(101, .none) else {
            Issue.record("a 101 nobody asked for must not make a tunnel")
            return
        }
        #expect(m.onBroken() == .badGateway)
    }

    @Test func anotherAnswerToAnUpgradeRequestIsAnOrdinaryAnswer() {
        var m = machine(upgrade)
        m.sendAll()
        #expect(m.head(200) == .relay(.length(2), startStormGuard: false))
        #expect(!m.isTunnel)
    }
}

@Suite struct ExchangeMachineTimeoutTests {
    static let limits = ExchangeMachine.Timeouts(upstreamTimeout: 60, upstreamIdleTimeout: 30, clientIdleTimeout: 20)

    static func side(lastClientByte: Double = 0, upstream: Bool = true, backlogged: Bool = false, waiting: Bool = false)
        -> ExchangeMachine.ClientSide
    {
        .init(lastClientByte: lastClientByte, upstreamActive: upstream, bodyBacklogged: backlogged, waitingForToken: waiting)
    }

    @Test func theHeadTimeoutCountsFromTheLastByteWrittenUp() {
        var m = machine(get)
        m.onTryStarted(tokenGeneration: 1, now: 100)
        #expect(m.onTick(now: 159, Self.side(), Self.limits) == .none)
        m.onSent(reachedBody: false, now: 150)  // a slow upload keeps the try alive
        #expect(m.onTick(now: 200, Self.side(), Self.limits) == .none)
        #expect(m.onTick(now: 211, Self.side(), Self.limits) == .gatewayTimeout)
        #expect(m.onTick(now: 211, Self.side(upstream: false), Self.limits) == .none)
    }

    @Test func silenceMidBodyCountsOnlyWhileTheClientKeepsUp() {
        var m = machine(get)
        m.sendAll(now: 0)
        _ = m.head(200, .chunked)
        m.onAnswerBytes(10, now: 5)
        #expect(m.onTick(now: 34, Self.side(lastClientByte: 34), Self.limits) == .none)
        #expect(m.onTick(now: 36, Self.side(lastClientByte: 36), Self.limits) == .silentMidBody)
        m.onClientBacklogged()  // the client is the slow side
        #expect(m.onTick(now: 36, Self.side(lastClientByte: 36), Self.limits) == .none)
    }

    @Test func aClientSilentMidBodyGets408BeforeTheAnswerAndACloseAfterIt() {
        var m = machine(post)
        m.onTryStarted(tokenGeneration: 1, now: 0)
        m.onSent(reachedBody: true, now: 0)
        #expect(m.onTick(now: 19, Self.side(), Self.limits) == .none)
        #expect(m.onTick(now: 21, Self.side(), Self.limits) == .requestTimeout)
        // Not while the upstream is the slow side, nor while the request waits for a token.
        #expect(m.onTick(now: 21, Self.side(backlogged: true), Self.limits) == .none)
        #expect(m.onTick(now: 21, Self.side(waiting: true), Self.limits) == .none)
        _ = m.head(200)
        #expect(m.onTick(now: 21, Self.side(), Self.limits) == .closeClient)
        m.onRequestBodyEnded()
        #expect(m.onTick(now: 21, Self.side(), Self.limits) == .none)
    }
}

/// CONTRACT point 8, `forward.request_buffering`: a chunked body that ends within the limit goes up
/// whole with Content-Length; a longer one streams as it came; to `Expect: 100-continue` on such a
/// body the proxy answers 100 itself.
@Suite struct ExchangeMachineRequestBufferingTests {
    static let chunked = "POST /a HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"

    @Test func aChunkedBodyWithinTheLimitIsWaitedForAndGoesWhole() {
        var m = machine(Self.chunked, requestBuffering: 100)
        #expect(m.isWaitingForBody)
        #expect(m.onBodyBuffered(total: 60) == .keepWaiting)
        #expect(m.onBodyBuffered(total: 100) == .keepWaiting, "exactly the limit still fits")
        #expect(m.onRequestBodyEnded() == .send(whole: true))
        #expect(m.bodyBuffering == .whole && !m.isWaitingForBody)
    }

    @Test func aChunkedBodyOverTheLimitStreamsFromThere() {
        var m = machine(Self.chunked, requestBuffering: 100)
        #expect(m.onBodyBuffered(total: 101) == .send(whole: false))
        #expect(m.bodyBuffering == .off)
        #expect(m.onBodyBuffered(total: 500) == .none)
        #expect(m.onRequestBodyEnded() == .none)
    }

    /// `forward.request_buffering_disk`: past memory, the body is spilled to a file and still waited
    /// for, up to the spool's limit; beyond it, it streams.
    @Test func aChunkedBodyBeyondMemoryIsSpooledAndGoesWhole() {
        var m = machine(Self.chunked, requestBuffering: 100, spoolLimit: 1000)
        #expect(m.onBodyBuffered(total: 101) == .spill)
        #expect(m.bodyBuffering == .spooling(limit: 1000) && m.isWaitingForBody)
        #expect(m.onBodyBuffered(total: 1000) == .keepWaiting)
        #expect(m.onRequestBodyEnded() == .send(whole: true))
        #expect(m.bodyBuffering == .whole)
    }

    @Test func aChunkedBodyBeyondTheSpoolStreamsFromThere() {
        var m = machine(Self.chunked, requestBuffering: 100, spoolLimit: 1000)
        #expect(m.onBodyBuffered(total: 101) == .spill)
        #expect(m.onBodyBuffered(total: 1001) == .send(whole: false))
        #expect(m.bodyBuffering == .off && !m.isWaitingForBody)
        #expect(m.onRequestBodyEnded() == .none)
    }

    @Test func withoutASpoolFileTheBodyStreams() {
        var m = machine(Self.chunked, requestBuffering: 100, spoolLimit: 1000)
        #expect(m.onBodyBuffered(total: 101) == .spill)
        #expect(m.onSpoolUnavailable() == .send(whole: false))
        #expect(m.bodyBuffering == .off)
    }

    /// curl sends `Expect: 100-continue` with every upload over 1 MiB: the proxy answers 100 itself
    /// and buffers the body as it would without Expect (as nginx does, RFC 9110 §10.1.1).
    @Test func aChunkedBodyWithExpectIsAnsweredByTheProxyAndWaitedFor() {
        var m = machine("PUT /a HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nExpect: 100-continue\r\n\r\n", requestBuffering: 100)
        #expect(m.answersContinue && m.isWaitingForBody)
        #expect(m.onRequestBodyEnded() == .send(whole: true))
    }

    /// Not without buffering, nor for a Content-Length body (the upstream's 100 is relayed).
    @Test(arguments: [
        ("PUT /a HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nExpect: 100-continue\r\n\r\n", 0),
        ("PUT /a HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n", 100),
        ("PUT /a HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n", 100),
    ])
    func otherwiseTheProxyAnswersNo100(_ head: String, requestBuffering: Int) {
        #expect(!machine(head, requestBuffering: requestBuffering).answersContinue)
    }

    @Test(arguments: [
        "POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\n",
        "GET /a HTTP/1.1\r\nHost: x\r\n\r\n",
        "GET /ws HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nTransfer-Encoding: chunked\r\n\r\n",
    ])
    func otherRequestsAreNotWaitedFor(_ head: String) {
        var m = machine(head, requestBuffering: 100)
        #expect(!m.isWaitingForBody && m.bodyBuffering == .off)
        #expect(m.onRequestBodyEnded() == .none)
    }

    @Test func zeroTurnsItOff() {
        let m = machine(Self.chunked, requestBuffering: 0)
        #expect(m.bodyBuffering == .off)
    }
}
