import Testing

@testable import ProxyCore

/// A byte relay driven event by event, as `ByteRelay` drives it: a CONNECT tunnel carries TCP's
/// half-close through, a 101's tunnel closes both sides once what the ended side sent has gone.
@Suite struct RelayMachineTests {
    static let timeouts = RelayMachine.Timeouts(idle: 60, clientSend: nil)

    static func machine(_ halfClose: RelayMachine.HalfClose, _ timeouts: RelayMachine.Timeouts = timeouts) -> RelayMachine {
        RelayMachine(halfClose: halfClose, timeouts: timeouts, highWater: 100, now: 0)
    }

    @Test func aSideIsReadOnlyWhileTheOtherHasRoom() {
        var m = Self.machine(.propagate)
        #expect(m.reads(.client) && m.reads(.upstream))
        m.onRead(from: .client, pendingThere: 100, now: 1)
        #expect(!m.reads(.client), "a full buffer toward the upstream stops reading the client")
        #expect(m.reads(.upstream))
        let roomMade = m.onWritten(to: .upstream, pending: 99, now: 2)
        #expect(roomMade == .none)
        #expect(m.reads(.client), "room again")
    }

    @Test func aConnectTunnelCarriesAHalfCloseThroughAndEndsWhenBothSidesHaveEnded() {
        var m = Self.machine(.propagate)
        m.onRead(from: .client, pendingThere: 10, now: 1)
        m.onReadEnded(.client)
        #expect(!m.reads(.client))
        let whileWaiting = m.afterWrite(to: .upstream)
        #expect(whileWaiting == .none, "the client's last bytes still wait")
        let onceWritten = m.onWritten(to: .upstream, pending: 0, now: 2)
        #expect(onceWritten == .shutdownWrite, "then the upstream sees the end")
        #expect(m.upstream.writeShut)
        #expect(m.reads(.upstream), "the other direction goes on")
        m.onRead(from: .upstream, pendingThere: 5, now: 3)
        let replyWritten = m.onWritten(to: .client, pending: 0, now: 4)
        #expect(replyWritten == .none)
        m.onReadEnded(.upstream)
        let bothEnded = m.afterWrite(to: .client)
        #expect(bothEnded == .end)
        #expect(m.isOver && !m.reads(.client) && !m.reads(.upstream))
    }

    @Test func aHalfCloseIsCarriedOnce() {
        var m = Self.machine(.propagate)
        m.onReadEnded(.upstream)
        let first = m.afterWrite(to: .client)
        #expect(first == .shutdownWrite)
        let second = m.afterWrite(to: .client)
        #expect(second == .none)
    }

    @Test func anUpgradeTunnelClosesOnceWhatTheEndedSideSentHasGone() {
        var upstreamEnds = Self.machine(.closeBoth)
        upstreamEnds.onRead(from: .upstream, pendingThere: 7, now: 1)
        upstreamEnds.onReadEnded(.upstream)
        #expect(!upstreamEnds.reads(.client), "nothing the client sends matters any more")
        let whileWaiting = upstreamEnds.afterWrite(to: .client)
        #expect(whileWaiting == .none)
        let onceWritten = upstreamEnds.onWritten(to: .client, pending: 0, now: 2)
        #expect(onceWritten == .end, "what the upstream sent goes out, then both close")

        var clientEnds = Self.machine(.closeBoth)
        clientEnds.onReadEnded(.client)
        #expect(!clientEnds.reads(.upstream))
        let atOnce = clientEnds.afterWrite(to: .upstream)
        #expect(atOnce == .end, "nothing waits for the upstream: both close now")
    }

    @Test func silenceBothWaysEndsTheRelayAfterTheIdleTimeout() {
        var m = Self.machine(.closeBoth, .init(idle: 30, clientSend: nil))
        m.onRead(from: .upstream, pendingThere: 5, now: 10)
        let written = m.onWritten(to: .client, pending: 0, now: 10)
        #expect(written == .none)
        let endsAt39 = m.onTick(now: 39)
        #expect(!endsAt39)
        m.onRead(from: .client, pendingThere: 5, now: 20)
        let endsAt45 = m.onTick(now: 45)
        #expect(!endsAt45, "a byte either way counts")
        let endsAt50 = m.onTick(now: 50)
        #expect(endsAt50)
        #expect(m.isOver)
    }

    @Test func aClientThatTakesNothingForTheSendTimeoutEndsTheRelay() {
        var m = Self.machine(.closeBoth, .init(idle: 60, clientSend: 10))
        m.onRead(from: .upstream, pendingThere: 50, now: 1)
        m.onRead(from: .client, pendingThere: 1, now: 8)
        let written = m.onWritten(to: .upstream, pending: 0, now: 8)
        #expect(written == .none)
        let endsAt10 = m.onTick(now: 10)
        #expect(!endsAt10)
        let endsAt12 = m.onTick(now: 12)
        #expect(endsAt12, "the client took none of what waited since 1")

        var noBound = Self.machine(.propagate, .init(idle: 60, clientSend: nil))
        noBound.onRead(from: .upstream, pendingThere: 50, now: 1)
        let endsAt59 = noBound.onTick(now: 59)
        #expect(!endsAt59, "a CONNECT tunnel has only its idle bound")
    }

    @Test func theClocksAreLookedAtEveryQuarterOfTheShortestBoundAtMostOnceASecond() {
        #expect(Self.machine(.propagate, .init(idle: 60, clientSend: nil)).checkInterval == 15)
        #expect(Self.machine(.closeBoth, .init(idle: 60, clientSend: 20)).checkInterval == 5)
        #expect(Self.machine(.closeBoth, .init(idle: 1, clientSend: 20)).checkInterval == 1)
    }

    @Test func aFailedWriteEndsTheRelay() {
        var m = Self.machine(.propagate)
        m.onWriteFailed()
        #expect(m.isOver && !m.reads(.client))
        let next = m.afterWrite(to: .client)
        #expect(next == .none, "nothing more to do")
        let endsAt100 = m.onTick(now: 100)
        #expect(!endsAt100)
    }
}
