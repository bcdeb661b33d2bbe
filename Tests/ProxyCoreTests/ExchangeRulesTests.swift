import HTTP1
import Testing

@testable import ProxyCore

@Suite struct ClientFramingTests {
    @Test(arguments: [204, 304, 100, 103])
    func bodilessStatusesHaveNoBodyWhateverTheUpstreamSays(_ status: Int) {
        #expect(ExchangeRules.clientFraming(isHEAD: false, clientVersion: .http1_1, status: status, upstream: .contentLength(10)) == .none)
    }

    @Test func aResponseToHeadHasNoBody() {
        #expect(ExchangeRules.clientFraming(isHEAD: true, clientVersion: .http1_1, status: 200, upstream: .chunked) == .none)
    }

    @Test func aKnownLengthIsKept() {
        #expect(ExchangeRules.clientFraming(isHEAD: false, clientVersion: .http1_0, status: 200, upstream: .contentLength(5)) == .length(5))
    }

    @Test(arguments: [ResponseBodyFraming.chunked, .untilClose])
    func unknownLengthsAreChunkedForHttp11AndCloseDelimitedForHttp10(_ upstream: ResponseBodyFraming) {
        #expect(ExchangeRules.clientFraming(isHEAD: false, clientVersion: .http1_1, status: 200, upstream: upstream) == .chunked)
        #expect(ExchangeRules.clientFraming(isHEAD: false, clientVersion: .http1_0, status: 200, upstream: upstream) == .close)
    }
}

@Suite struct FreshConnectionRetryTests {
    static let safe = ExchangeRules.FailedTry(
        isIdempotent: true, connectionWasReused: true, alreadyRetriedOnFreshConnection: false, anyByteWritten: true,
        body: .init(onWire: false, replayComplete: false))

    @Test func anIdempotentRequestOnAReusedConnectionIsRetried() {
        #expect(ExchangeRules.retriesOnFreshConnection(Self.safe))
    }

    @Test func aFreshConnectionsFailureIsNotRetried() {
        var t = Self.safe
        t.connectionWasReused = false
        #expect(!ExchangeRules.retriesOnFreshConnection(t))
    }

    @Test func onlyOnce() {
        var t = Self.safe
        t.alreadyRetriedOnFreshConnection = true
        #expect(!ExchangeRules.retriesOnFreshConnection(t))
    }

    @Test func aPostIsRetriedOnlyWhenNoneOfItWasWritten() {
        var t = Self.safe
        t.isIdempotent = ExchangeRules.isIdempotent("POST")
        #expect(!ExchangeRules.retriesOnFreshConnection(t))
        t.anyByteWritten = false
        #expect(ExchangeRules.retriesOnFreshConnection(t))
    }

    @Test func aBodyAlreadySentNeedsTheWholeReplay() {
        var t = Self.safe
        t.isIdempotent = ExchangeRules.isIdempotent("PUT")
        t.body.onWire = true
        #expect(!ExchangeRules.retriesOnFreshConnection(t))
        t.body.replayComplete = true
        #expect(ExchangeRules.retriesOnFreshConnection(t))
    }
}

@Suite struct UnauthorizedTests {
    static let first = ExchangeRules.Unauthorized(
        tokenInjected: true, alreadyRetried: false, tokenCanChange: true, refusingGoodTokens: false,
        body: .init(onWire: false, replayComplete: false))

    @Test func aFirst401IsHeldForARefreshAndOneRetry() {
        #expect(ExchangeRules.onUnauthorized(Self.first) == .holdAndRetry)
    }

    @Test func aSecond401GoesToTheClientAndStartsTheStormGuard() {
        var u = Self.first
        u.alreadyRetried = true
        #expect(ExchangeRules.onUnauthorized(u) == .passOn(startStormGuard: true))
    }

    @Test func theClientsOwnAuthorizationIsNotRetried() {
        var u = Self.first
        u.tokenInjected = false
        #expect(ExchangeRules.onUnauthorized(u) == .passOn(startStormGuard: false))
    }

    @Test func aStaticTokenOrTheStormGuardPassesItOn() {
        var u = Self.first
        u.tokenCanChange = false
        #expect(ExchangeRules.onUnauthorized(u) == .passOn(startStormGuard: false))
        u = Self.first
        u.refusingGoodTokens = true
        #expect(ExchangeRules.onUnauthorized(u) == .passOn(startStormGuard: false))
    }

    @Test func a401Before100IsRetriedWhateverTheBodysSize() {
        let u = Self.first  // a body, none of it sent, none kept
        #expect(ExchangeRules.onUnauthorized(u) == .holdAndRetry)
    }

    @Test func aBodyPartlySentIsRetriedOnlyFromAWholeReplay() {
        var u = Self.first
        u.body.onWire = true
        #expect(ExchangeRules.onUnauthorized(u) == .passOn(startStormGuard: false))
        u.body.replayComplete = true
        #expect(ExchangeRules.onUnauthorized(u) == .holdAndRetry)
    }
}

@Suite struct ConnectionReuseTests {
    static let clean = ExchangeRules.Ended(trailingBytes: false, parserSaysClose: false, sendStopped: false, requestBodyDone: true, bytesWaitingToGoUp: 0)

    @Test func aCleanExchangeLeavesTheConnectionReusable() {
        #expect(ExchangeRules.connectionReusable(Self.clean))
    }

    @Test func anythingUnfinishedRetiresIt() {
        var e = Self.clean
        e.trailingBytes = true
        #expect(!ExchangeRules.connectionReusable(e))
        e = Self.clean
        e.parserSaysClose = true
        #expect(!ExchangeRules.connectionReusable(e))
        e = Self.clean
        e.sendStopped = true
        #expect(!ExchangeRules.connectionReusable(e))
        e = Self.clean
        e.requestBodyDone = false
        #expect(!ExchangeRules.connectionReusable(e))
        e = Self.clean
        e.bytesWaitingToGoUp = 1
        #expect(!ExchangeRules.connectionReusable(e))
    }
}
