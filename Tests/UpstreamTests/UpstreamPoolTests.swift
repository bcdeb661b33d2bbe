import TestSupport
import Testing

@testable import Upstream

/// The pool driven event by event, as `UpstreamConnector` drives it, with stand-ins for connections:
/// no sockets, time passed in.
private final class Fake: Equatable, CustomStringConvertible {
    let name: String
    init(_ name: String) { self.name = name }
    var description: String { name }
    static func == (a: Fake, b: Fake) -> Bool { a === b }
}

/// What the connector is told to do with a connection given back, comparable in `#expect`.
private enum Kept: Equatable {
    case watch
    case watchAndRetire(Fake)
    case retire(UpstreamRetirement)
}

extension UpstreamPool.Lease where Connection == Fake {
    /// The idle connection handed out, or nil when a new one is to be made.
    fileprivate var using: Fake? {
        if case .use(let c) = self { return c }
        return nil
    }
    /// The expired connections to close before connecting, or nil when an idle one is handed out.
    fileprivate var connectRetiring: [Fake]? {
        if case .connect(let retiring) = self { return retiring }
        return nil
    }
}

extension UpstreamPool.Release where Connection == Fake {
    fileprivate var kept: Kept {
        switch self {
        case .watch: return .watch
        case .watchAndRetire(let oldest): return .watchAndRetire(oldest)
        case .retire(let reason): return .retire(reason)
        }
    }
}

private func pool(maxIdle: Int = 8, idleTimeout: Double = 60) -> UpstreamPool<Fake> {
    UpstreamPool(maxIdle: maxIdle, idleTimeout: idleTimeout)
}

/// A pool that holds `connections` idle, released in turn: the first at time 1, the next at 2, and so on.
private func poolHolding(_ connections: Fake...) -> UpstreamPool<Fake> {
    var p = pool()
    for (index, connection) in connections.enumerated() { _ = p.release(connection, now: Double(index + 1)) }
    return p
}

@Suite struct UpstreamPoolLIFOTests {
    @Test func anEmptyPoolSaysConnectANewOne() {
        var p = pool()
        #expect(p.lease(now: 0).connectRetiring == [])
    }

    @Test func theMostRecentlyReleasedConnectionIsHandedOutFirst() {
        var p = pool()
        let (a, b, c) = (Fake("a"), Fake("b"), Fake("c"))
        #expect(p.release(a, now: 1).kept == .watch)
        #expect(p.release(b, now: 2).kept == .watch)
        #expect(p.release(c, now: 3).kept == .watch)
        #expect(p.lease(now: 4).using == c)
        #expect(p.lease(now: 4).using == b)
        #expect(p.lease(now: 4).using == a)
        #expect(p.lease(now: 4).connectRetiring == [])
    }

    @Test func aConnectionUsedAgainGoesBackOnTopWithItsIdleTimeRestarted() {
        var p = pool(idleTimeout: 60)
        let (a, b) = (Fake("a"), Fake("b"))
        _ = p.release(a, now: 0)
        _ = p.release(b, now: 10)
        #expect(p.lease(now: 20).using == b)
        _ = p.release(b, now: 50)
        #expect(p.tick(now: 60) == [a])
        #expect(p.lease(now: 100).using == b)
        #expect(p.idleCount == 0)
    }
}

@Suite struct UpstreamPoolBoundTests {
    @Test func beyondTheBoundTheOldestIdleConnectionCloses() {
        var p = pool(maxIdle: 2)
        let (a, b, c) = (Fake("a"), Fake("b"), Fake("c"))
        #expect(p.release(a, now: 1).kept == .watch)
        #expect(p.release(b, now: 2).kept == .watch)
        #expect(p.release(c, now: 3).kept == .watchAndRetire(a))
        #expect(p.idleCount == 2)
        #expect(p.lease(now: 4).using == c)
        #expect(p.lease(now: 4).using == b)
        #expect(p.lease(now: 4).connectRetiring == [])
    }

    @Test func aBoundOfZeroKeepsNoConnection() {
        var p = pool(maxIdle: 0)
        let a = Fake("a")
        #expect(p.release(a, now: 1).kept == .retire(.overBound))
        #expect(p.idleCount == 0)
        #expect(p.lease(now: 1).connectRetiring == [])
    }
}

@Suite struct UpstreamPoolIdleTimeoutTests {
    @Test func aConnectionIdleJustUnderTheTimeoutIsHandedOut() {
        var p = pool(idleTimeout: 60)
        let a = Fake("a")
        _ = p.release(a, now: 100)
        #expect(p.tick(now: 159.5) == [])
        #expect(p.lease(now: 159.5).using == a)
    }

    @Test func aConnectionIdleForExactlyTheTimeoutIsClosedNotHandedOut() {
        var p = pool(idleTimeout: 60)
        let a = Fake("a")
        _ = p.release(a, now: 100)
        #expect(p.lease(now: 160).connectRetiring == [a])
        #expect(p.idleCount == 0)
    }

    @Test func theTickClosesExactlyTheConnectionsWhoseTimeoutRanOut() {
        var p = pool(idleTimeout: 60)
        let (a, b, c) = (Fake("a"), Fake("b"), Fake("c"))
        _ = p.release(a, now: 0)
        _ = p.release(b, now: 30)
        _ = p.release(c, now: 50)
        #expect(p.tick(now: 59.5) == [])
        #expect(p.tick(now: 60) == [a])
        #expect(p.tick(now: 95) == [b])
        #expect(p.idleCount == 1)
        #expect(p.lease(now: 95).using == c)
    }

    @Test func whenTheNewestHasExpiredEveryIdleConnectionClosesAndANewOneIsMade() {
        var p = pool(idleTimeout: 60)
        let (a, b) = (Fake("a"), Fake("b"))
        _ = p.release(a, now: 0)
        _ = p.release(b, now: 10)
        #expect(p.lease(now: 70).connectRetiring == [a, b])
        #expect(p.idleCount == 0)
        #expect(p.tick(now: 1000) == [])
    }
}

@Suite struct UpstreamPoolStirredTests {
    @Test func anIdleConnectionTheUpstreamClosedIsNeverHandedOut() {
        let (a, b) = (Fake("a"), Fake("b"))
        var p = poolHolding(a, b)
        #expect(p.stirred(b, hungUp: true) == .closedByUpstream)
        #expect(p.lease(now: 3).using == a)
        #expect(p.lease(now: 3).connectRetiring == [])
    }

    @Test func bytesNobodyAskedForRetireAnIdleConnectionAsUnread() {
        let (a, b, c) = (Fake("a"), Fake("b"), Fake("c"))
        var p = poolHolding(a, b, c)
        #expect(p.stirred(b, hungUp: false) == .unreadBytes)
        #expect(p.lease(now: 4).using == c)
        #expect(p.lease(now: 4).using == a)
    }

    @Test func aStirredConnectionThatIsNotIdleLeavesThePoolAsItWas() {
        var p = pool()
        let (a, stranger) = (Fake("a"), Fake("stranger"))
        _ = p.release(a, now: 1)
        #expect(p.stirred(stranger, hungUp: true) == .closedByUpstream)
        #expect(p.idleCount == 1)
        #expect(p.lease(now: 2).using == a)
    }

    @Test func aConnectionClosedWhileIdleNeverTimesOutLater() {
        var p = pool(idleTimeout: 60)
        let a = Fake("a")
        _ = p.release(a, now: 0)
        _ = p.stirred(a, hungUp: true)
        #expect(p.tick(now: 60) == [])
    }
}

@Suite struct UpstreamPoolDrainTests {
    @Test func drainingClosesEveryIdleConnectionOldestFirst() {
        let (a, b) = (Fake("a"), Fake("b"))
        var p = poolHolding(a, b)
        #expect(p.drain() == [a, b])
        #expect(p.isDraining)
        #expect(p.idleCount == 0)
        #expect(p.tick(now: 1000) == [])
    }

    @Test func aConnectionGivenBackWhileDrainingIsClosed() {
        var p = pool()
        let a = Fake("a")
        #expect(p.drain() == [])
        #expect(p.release(a, now: 1).kept == .retire(.drain))
        #expect(p.lease(now: 1).connectRetiring == [])
    }
}

@Suite struct UpstreamRetirementTests {
    @Test func everyReasonHasItsOwnMetricLabel() {
        let labels = UpstreamRetirement.allCases.map(\.label)
        #expect(Set(labels).count == labels.count)
        #expect(labels.allSatisfy { $0.allSatisfy { $0.isLowercase || $0 == "_" } })
    }

    @Test func bytesAfterAResponseCountBeforeTheUpstreamsClose() {
        #expect(UpstreamRetirement.afterResponse(unreadBytes: true, upstreamCloses: true) == .unreadBytes)
        #expect(UpstreamRetirement.afterResponse(unreadBytes: false, upstreamCloses: true) == .closedByUpstream)
        #expect(UpstreamRetirement.afterResponse(unreadBytes: false, upstreamCloses: false) == .broken)
    }
}

/// Long random runs of events against a plain model of what the pool promises: every connection is
/// idle, in use or closed, never two of these; what is handed out is the most recently released
/// idle connection within its timeout; what closes is exactly what the model says.
@Suite struct UpstreamPoolModelTests {
    @Test(arguments: [(1, 0), (2, 1), (4, 7), (16, 42)])
    func randomEventsKeepEveryPromise(maxIdle: Int, seed: UInt64) {
        var random = SeededGenerator(state: seed)
        let timeout = 30.0
        var p = pool(maxIdle: maxIdle, idleTimeout: timeout)
        var idle: [(connection: Fake, since: Double)] = []  // the model, oldest first
        var inUse: [Fake] = []
        var closed = 0
        var made = 0
        var now = 0.0
        for _ in 0..<5_000 {
            now += Double(Int.random(in: 0...4, using: &random))
            switch Int.random(in: 0..<10, using: &random) {
            case 0..<4:
                switch p.lease(now: now) {
                case .use(let c):
                    let newest = idle.removeLast()
                    #expect(c === newest.connection && now - newest.since < timeout)
                    inUse.append(c)
                case .connect(let retiring):
                    #expect(idle.allSatisfy { now - $0.since >= timeout })
                    #expect(retiring.map(ObjectIdentifier.init) == idle.map { ObjectIdentifier($0.connection) })
                    closed += retiring.count
                    idle.removeAll()
                    made += 1
                    inUse.append(Fake("c\(made)"))
                }
            case 4..<8:
                guard !inUse.isEmpty else { continue }
                let c = inUse.remove(at: Int.random(in: 0..<inUse.count, using: &random))
                idle.append((c, now))
                switch p.release(c, now: now) {
                case .watch:
                    break
                case .watchAndRetire(let oldest):
                    #expect(oldest === idle.removeFirst().connection)
                    closed += 1
                case .retire:
                    Issue.record("released while not draining and with room, yet not kept")
                }
            case 8:
                guard !idle.isEmpty else { continue }
                let c = idle.remove(at: Int.random(in: 0..<idle.count, using: &random)).connection
                _ = p.stirred(c, hungUp: Bool.random(using: &random))
                closed += 1
            default:
                let expired = idle.prefix { now - $0.since >= timeout }.map { ObjectIdentifier($0.connection) }
                #expect(p.tick(now: now).map(ObjectIdentifier.init) == expired)
                idle.removeFirst(expired.count)
                closed += expired.count
            }
            #expect(p.idleCount == idle.count && idle.count <= maxIdle)
        }
        #expect(made == idle.count + inUse.count + closed)
        #expect(p.drain().map(ObjectIdentifier.init) == idle.map { ObjectIdentifier($0.connection) })
    }
}
