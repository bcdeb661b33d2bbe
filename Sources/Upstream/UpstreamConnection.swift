internal import Curl
import Sockets

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
