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
        let r1 = m.onWritten(to: .upstream, pending: 99, now: 2)
        #expect(r1 == .none)
        #expect(m.reads(.client), "room again")
    }

    @Test func aConnectTunnelCarriesAHalfCloseThroughAndEndsWhenBothSidesHaveEnded() {
        var m = Self.machine(.propagate)
        m.onRead(from: .client, pendingThere: 10, now: 1)
        m.onReadEnded(.client)
        #expect(!m.reads(.client))
        let r2 = m.afterWrite(to: .upstream)
        #expect(r2 == .none, "the client's last bytes still wait")
        let r3 = m.onWritten(to: .upstream, pending: 0, now: 2)
        #expect(r3 == .shutdownWrite, "then the upstream sees the end")
        #expect(m.upstream.writeShut)
        #expect(m.reads(.upstream), "the other direction goes on")
        m.onRead(from: .upstream, pendingThere: 5, now: 3)
        let r4 = m.onWritten(to: .client, pending: 0, now: 4)
        #expect(r4 == .none)
        m.onReadEnded(.upstream)
        let r5 = m.afterWrite(to: .client)
        #expect(r5 == .end)
        #expect(m.isOver && !m.reads(.client) && !m.reads(.upstream))
    }

    @Test func aHalfCloseIsCarriedOnce() {
        var m = Self.machine(.propagate)
        m.onReadEnded(.upstream)
        let r6 = m.afterWrite(to: .client)
        #expect(r6 == .shutdownWrite)
        let r7 = m.afterWrite(to: .client)
        #expect(r7 == .none)
    }

    @Test func anUpgradeTunnelClosesOnceWhatTheEndedSideSentHasGone() {
        var upstreamEnds = Self.machine(.closeBoth)
        upstreamEnds.onRead(from: .upstream, pendingThere: 7, now: 1)
        upstreamEnds.onReadEnded(.upstream)
        #expect(!upstreamEnds.reads(.client), "nothing the client sends matters any more")
        let r8 = upstreamEnds.afterWrite(to: .client)
        #expect(r8 == .none)
        let r9 = upstreamEnds.onWritten(to: .client, pending: 0, now: 2)
        #expect(r9 == .end, "what the upstream sent goes out, then both close")

        var clientEnds = Self.machine(.closeBoth)
        clientEnds.onReadEnded(.client)
        #expect(!clientEnds.reads(.upstream))
        let r10 = clientEnds.afterWrite(to: .upstream)
        #expect(r10 == .end, "nothing waits for the upstream: both close now")
    }

    @Test func silenceBothWaysEndsTheRelayAfterTheIdleTimeout() {
        var m = Self.machine(.closeBoth, .init(idle: 30, clientSend: nil))
        m.onRead(from: .upstream, pendingThere: 5, now: 10)
        let r11 = m.onWritten(to: .client, pending: 0, now: 10)
        #expect(r11 == .none)
        let r12 = m.onTick(now: 39)
        #expect(!r12)
        m.onRead(from: .client, pendingThere: 5, now: 20)
        let r13 = m.onTick(now: 45)
        #expect(!r13, "a byte either way counts")
        let r14 = m.onTick(now: 50)
        #expect(r14)
        #expect(m.isOver)
    }

    @Test func aClientThatTakesNothingForTheSendTimeoutEndsTheRelay() {
        var m = Self.machine(.closeBoth, .init(idle: 60, clientSend: 10))
        m.onRead(from: .upstream, pendingThere: 50, now: 1)
        m.onRead(from: .client, pendingThere: 1, now: 8)
        let r15 = m.onWritten(to: .upstream, pending: 0, now: 8)
        #expect(r15 == .none)
        let r16 = m.onTick(now: 10)
        #expect(!r16)
        let r17 = m.onTick(now: 12)
        #expect(r17, "the client took none of what waited since 1")

        var noBound = Self.machine(.propagate, .init(idle: 60, clientSend: nil))
        noBound.onRead(from: .upstream, pendingThere: 50, now: 1)
        let r18 = noBound.onTick(now: 59)
        #expect(!r18, "a CONNECT tunnel has only its idle bound")
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
        let r19 = m.afterWrite(to: .client)
        #expect(r19 == .none, "nothing more to do")
        let r20 = m.onTick(now: 100)
        #expect(!r20)
    }
}
