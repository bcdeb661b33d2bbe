import Config
import Sockets
import Synchronization
import TLS

/// A listener that could not be bound or watched. `serve` reports it and exits 1; the contract's
/// `listening on` line is never logged for it.
public struct ListenerError: Error, CustomStringConvertible, Sendable {
    /// The address as configured (`127.0.0.1:8080`, `unix:/run/tokenproxy.sock`).
    public let address: String
    public let isAdmin: Bool
    public let reason: String

    public var description: String { "cannot listen on \(isAdmin ? "the admin address " : "")\(address): \(reason)" }
}

/// The sockets of one proxy listen address: one per loop on a TCP port (SO_REUSEPORT; with port 0
/// the others bind the port the first one got), one shared by every loop on a unix socket.
final class ListenerGroup: @unchecked Sendable {
    let configured: ListenAddress
    /// The route of a route's own listener; nil for the shared one.
    let ownRoute: String?
    let sockets: [ListeningSocket]
    let interest: Interest
    /// The listener's TLS (`tls:`), nil when it speaks plain HTTP; a reload may set, change or clear it.
    private let tlsState = Mutex<ListenerTLS?>(nil)
    var address: SocketAddress { sockets[0].address }

    var tls: ListenerTLS? {
        get { tlsState.withLock { $0 } }
        set { tlsState.withLock { $0 = newValue } }
    }

    init(_ listen: ListenAddress, ownRoute: String?, loops count: Int, unixMode: UInt32) throws {
        configured = listen
        self.ownRoute = ownRoute
        var sockets: [ListeningSocket] = []
        var interest: Interest = .accept
        do {
            switch listen {
            case .tcp(let host, let port):
                let first = try ListeningSocket.tcp(host: host, port: port, reusePort: true, exclusive: true)
                sockets.append(first)
                for _ in 1..<max(count, 1) {
                    sockets.append(try ListeningSocket.tcp(host: host, port: first.address.port ?? port, reusePort: true))
                }
            case .unix(let path):
                sockets.append(try ListeningSocket.unix(path: path, mode: unixMode))
                if count > 1 { interest = [.accept, .exclusive] }
            }
        } catch {
            for socket in sockets { socket.close() }
            throw ListenerError(address: "\(listen)", isAdmin: false, reason: "\(error)")
        }
        self.sockets = sockets
        self.interest = interest
    }

    /// The same bound sockets, now the listener of `route` (a reload renamed the route that owns
    /// the address, or gave it to another; nothing is bound again).
    private init(handing group: ListenerGroup, to route: String?) {
        configured = group.configured
        ownRoute = route
        sockets = group.sockets
        interest = group.interest
        tls = group.tls
    }

    func handed(to route: String?) -> ListenerGroup { ListenerGroup(handing: self, to: route) }

    /// Whether both groups are the same sockets (one was handed to another route).
    func sharesSockets(with other: ListenerGroup) -> Bool { sockets[0] === other.sockets[0] }

    func socket(forLoop i: Int) -> ListeningSocket { sockets.count == 1 ? sockets[0] : sockets[i] }
    func close() { for socket in sockets { socket.close() } }
}
