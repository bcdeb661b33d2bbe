internal import Curl
import Sockets

/// Why an upstream connection was closed; one counter per case in the loop's metrics.
public enum UpstreamRetirement: Int, CaseIterable, Sendable {
    /// Idle for `limits.upstream_keepalive_timeout`.
    case idleTimeout
    /// Given back to a pool that already held `limits.upstream_keepalive` idle connections: the
    /// oldest goes.
    case overBound
    /// The upstream closed it, or said it would (`Connection: close`, HTTP/1.0 without keep-alive,
    /// a body delimited by the close; RFC 9112 §9.6).
    case closedByUpstream
    /// Bytes arrived that no request asked for, while idle or after a response's end (RFC 9112
    /// §9.3: the next response could not be matched to its request).
    case unreadBytes
    /// The loop drains (SIGTERM): idle connections close at once, the others after their exchange.
    case drain
    /// An exchange ended without leaving it clean: an error, a timeout, a request not wholly
    /// written, the client gone, a tunnel's end.
    case broken

    /// The label a metric series carries for it.
    public var label: String {
        switch self {
        case .idleTimeout: return "idle_timeout"
        case .overBound: return "over_bound"
        case .closedByUpstream: return "closed_by_upstream"
        case .unreadBytes: return "unread_bytes"
        case .drain: return "drain"
        case .broken: return "broken"
        }
    }

    /// Why a connection whose response ended is not reusable: bytes after the response come
    /// first (the upstream talks out of turn whatever it announced), then the upstream's own close.
    public static func afterResponse(unreadBytes: Bool, upstreamCloses: Bool) -> UpstreamRetirement {
        if unreadBytes { return .unreadBytes }
        if upstreamCloses { return .closedByUpstream }
        return .broken
    }
}

/// The idle upstream connections of one event loop, as bookkeeping and nothing else (docs/ENGINE.md,
/// "The pool"): LIFO, so the warmest connection is reused first and the coldest ones time out;
/// at most `maxIdle`; each closed after `idleTimeout`; one the upstream closed (or talked on) while
/// idle is never handed out. Events come in (a request wants a connection, an exchange left one
/// clean, an idle one stirred, the clock ticked, the loop drains) and actions go out, which
/// `UpstreamConnector` performs on the sockets. Time is passed in. Generic over the connection so
/// that the unit tests need no sockets; a connection is known by its identity.
struct UpstreamPool<Connection: AnyObject> {
    let maxIdle: Int
    let idleTimeout: Double
    /// Idle connections and since when, the most recently used last.
    private var idle: [(connection: Connection, since: Double)] = []
    /// Once draining, a connection given back is closed instead of kept.
    private(set) var isDraining = false

    init(maxIdle: Int, idleTimeout: Double) {
        self.maxIdle = maxIdle
        self.idleTimeout = idleTimeout
    }

    var idleCount: Int { idle.count }

    /// What a request that wants a connection does.
    enum Lease {
        /// Send on this idle connection (its new owner's interest replaces the idle watch).
        case use(Connection)
        /// Connect a new one, after closing these, whose idle timeout had run out (`.idleTimeout`).
        case connect(retiring: [Connection])
    }

    /// What the connector does with a connection whose exchange left it clean.
    enum Release {
        /// Kept idle: watch it for readability (any event means the upstream closed it or talks
        /// out of turn).
        case watch
        /// Kept idle and watched as above, and this oldest one closes (`.overBound`).
        case watchAndRetire(Connection)
        /// Not kept: close it.
        case retire(UpstreamRetirement)
    }

    private func expired(_ since: Double, now: Double) -> Bool {
        now - since >= idleTimeout
    }

    /// A request wants a connection: the most recently used idle one still within its idle timeout.
    @inline(__always)
    mutating func lease(now: Double) -> Lease {
        guard let newest = idle.popLast() else { return .connect(retiring: []) }
        guard expired(newest.since, now: now) else { return .use(newest.connection) }
        // The newest is the last to expire: every idle connection has.
        let all = idle.map(\.connection) + [newest.connection]
        idle.removeAll(keepingCapacity: true)
        return .connect(retiring: all)
    }

    /// An exchange ended and left `connection` clean (the whole request written, the whole
    /// response read, nothing after it, no close announced: RFC 9112 §9.3).
    @inline(__always)
    mutating func release(_ connection: Connection, now: Double) -> Release {
        if isDraining { return .retire(.drain) }
        if maxIdle == 0 { return .retire(.overBound) }
        idle.append((connection, now))
        guard idle.count > maxIdle else { return .watch }
        return .watchAndRetire(idle.removeFirst().connection)
    }

    /// An idle connection became readable: the upstream hung up (`hungUp`), or sent bytes nobody
    /// asked for. Either way it is done, and never handed out.
    mutating func stirred(_ connection: Connection, hungUp: Bool) -> UpstreamRetirement {
        if let i = idle.lastIndex(where: { $0.connection === connection }) { idle.remove(at: i) }
        return hungUp ? .closedByUpstream : .unreadBytes
    }

    /// The clock ticked: the idle connections whose idle timeout ran out, to close (`.idleTimeout`).
    mutating func tick(now: Double) -> [Connection] {
        let count = idle.prefix { expired($0.since, now: now) }.count
        guard count > 0 else { return [] }
        let stale = idle[..<count].map(\.connection)
        idle.removeFirst(count)
        return stale
    }

    /// The loop drains: every idle connection, to close (`.drain`); from now on a connection given
    /// back is closed too.
    mutating func drain() -> [Connection] {
        isDraining = true
        let all = idle.map(\.connection)
        idle.removeAll()
        return all
    }
}

// MARK: the connector's pool of idle connections, and the connections it holds

/// The connector's side of its pool: an exchange takes an idle connection and gives it back.
extension UpstreamConnector {
    /// The most recently used idle connection still worth using, or nil: connect a new one.
    public func takeIdle() -> UpstreamConnection? {
        switch pool.lease(now: loop.now) {
        case .use(let connection):
            return connection
        case .connect(let expired):
            for connection in expired { connection.retire(.idleTimeout) }
            return nil
        }
    }

    /// Takes back a connection whose last exchange ended cleanly (a whole response read, the whole
    /// request written): kept idle, or closed as the pool says.
    public func putIdle(_ connection: UpstreamConnection) {
        connection.owner = nil
        connection.reused = true
        switch pool.release(connection, now: loop.now) {
        case .watch:
            // Watched while idle: any readiness means the upstream closed it (or sent something unasked).
            connection.setInterest(.read)
        case .watchAndRetire(let oldest):
            connection.setInterest(.read)
            oldest.retire(.overBound)
        case .retire(let reason):
            connection.retire(reason)
        }
    }

    /// An idle connection stirred: the upstream closed it, or talks out of turn. Either way it is done.
    /// (Out of line: the readiness handler it is called from stays small enough to inline.)
    @inline(never)
    func idleStirred(_ connection: UpstreamConnection, _ events: UInt32) {
        let hungUp = events & (ReadyEvents.peerClosed | ReadyEvents.failed) != 0
        connection.retire(pool.stirred(connection, hungUp: hungUp))
    }

    /// Closes idle connections past the idle timeout; runs a few times a second.
    public func sweepIdle() {
        for connection in pool.tick(now: loop.now) { connection.retire(.idleTimeout) }
    }

    /// Closes every idle connection, and from now on every connection given back (drain).
    public func closeIdle() {
        for connection in pool.drain() { connection.retire(.drain) }
    }
}

/// Who uses a connection now: told of its readiness on the loop's thread.
public protocol UpstreamConnectionOwner: AnyObject {
    func upstreamReady(_ events: UInt32)
}

/// One connection to the upstream that libcurl made. With TLS, every byte goes through
/// `curl_easy_send`/`curl_easy_recv` (libcurl holds the TLS session); over plain TCP, direct or
/// through an HTTP proxy's CONNECT tunnel, libcurl has nothing left to add after the connect, so the
/// bytes go straight to the socket (docs/ENGINE.md).
public final class UpstreamConnection: EventHandler {
    public let fd: Int32
    let easy: CurlEasy
    unowned let connector: UpstreamConnector
    let usesCurlIO: Bool
    /// Strong; the pool clears it when the connection goes idle.
    public var owner: UpstreamConnectionOwner?
    /// The connection carried an exchange before this one (a failure on it may be the upstream
    /// closing an idle connection as the request arrived: RFC 9112 §9.3.1 allows a retry).
    public internal(set) var reused = false
    private var interest: Interest = []
    public private(set) var isRetired = false

    init(fd: Int32, easy: CurlEasy, connector: UpstreamConnector, usesCurlIO: Bool) {
        self.fd = fd
        self.easy = easy
        self.connector = connector
        self.usesCurlIO = usesCurlIO
    }

    public func handleEvents(_ events: UInt32) {
        if let owner {
            owner.upstreamReady(events)
        } else {
            connector.idleStirred(self, events)
        }
    }

    public func setInterest(_ wanted: Interest) {
        guard !isRetired, wanted != interest else { return }
        interest = wanted
        connector.loop.modify(fd, wanted)
    }

    /// Sends what the connection takes now.
    public func send(_ bytes: UnsafeRawBufferPointer) -> IOResult {
        guard !isRetired else { return .closed }
        guard usesCurlIO else { return Syscall.write(fd, bytes) }
        switch easy.send(bytes) {
        case .done(let n): return .done(n)
        case .again: return .wouldBlock
        case .failed: return .closed
        }
    }

    /// Reads what has arrived. With TLS, call again until `.wouldBlock`: the TLS library may hold
    /// decrypted bytes that epoll cannot see.
    public func receive(into buffer: UnsafeMutableRawBufferPointer) -> IOResult {
        guard !isRetired else { return .closed }
        guard usesCurlIO else { return Syscall.read(fd, buffer) }
        switch easy.receive(into: buffer) {
        case .done(let n): return n == 0 ? .closed : .done(n)
        case .again: return .wouldBlock
        case .failed: return .closed
        }
    }

    /// The TLS library may hold bytes that epoll cannot see: read until `.wouldBlock`.
    public var buffersInternally: Bool { usesCurlIO }

    /// Closes the connection (not to be used again). Without a reason, the exchange on it did not
    /// leave it clean (`.broken`).
    public func retire(_ reason: UpstreamRetirement = .broken) {
        guard !isRetired else { return }
        isRetired = true
        owner = nil
        connector.retired(self, reason)
    }
}
