import CSystem
import Glibc
import Synchronization

/// Where a socket listens or a peer sits, in the contract's log form.
public enum SocketAddress: Equatable, Sendable, CustomStringConvertible {
    case ipv4(String, port: Int)
    case ipv6(String, port: Int)
    case unix(String)

    public var description: String {
        switch self {
        case .ipv4(let host, let port): return "\(host):\(port)"
        case .ipv6(let host, let port): return "[\(host)]:\(port)"
        case .unix(let path): return "unix:\(path)"
        }
    }

    /// The address without a port ("127.0.0.1", "::1"), or "" for unix peers; for X-Forwarded-For.
    public var host: String {
        switch self {
        case .ipv4(let h, _), .ipv6(let h, _): return h
        case .unix: return ""
        }
    }

    public var port: Int? {
        switch self {
        case .ipv4(_, let p), .ipv6(_, let p): return p
        case .unix: return nil
        }
    }

    static func from(_ storage: UnsafePointer<sockaddr_storage>) -> SocketAddress {
        switch Int32(storage.pointee.ss_family) {
        case AF_INET:
            return storage.withMemoryRebound(to: sockaddr_in.self, capacity: 1) {
                .ipv4(text(AF_INET, $0.pointee.sin_addr, INET_ADDRSTRLEN), port: Int(UInt16(bigEndian: $0.pointee.sin_port)))
            }
        case AF_INET6:
            return storage.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) {
                .ipv6(text(AF_INET6, $0.pointee.sin6_addr, INET6_ADDRSTRLEN), port: Int(UInt16(bigEndian: $0.pointee.sin6_port)))
            }
        default:
            return .unix("")
        }
    }

    /// inet_ntop(3) of an `in_addr` or `in6_addr`.
    private static func text<Address>(_ family: Int32, _ address: Address, _ capacity: Int32) -> String {
        var text = [CChar](repeating: 0, count: Int(capacity))
        withUnsafeBytes(of: address) { _ = inet_ntop(family, $0.baseAddress, &text, socklen_t(text.count)) }
        return text.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
    }
}

extension SocketAddress {
    /// This machine's interface addresses, IPv4 and IPv6, as text (getifaddrs(3)): what a listener
    /// on the unspecified address (`0.0.0.0`, `::`) takes connections to.
    public static func localInterfaceAddresses() -> [String] {
        var list: UnsafeMutablePointer<ifaddrs>?
        guard getifaddrs(&list) == 0, let first = list else { return [] }
        defer { freeifaddrs(first) }
        var result: [String] = []
        var node: UnsafeMutablePointer<ifaddrs>? = first
        while let current = node {
            if let address = current.pointee.ifa_addr {
                switch Int32(address.pointee.sa_family) {
                case AF_INET:
                    result.append(address.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { text(AF_INET, $0.pointee.sin_addr, INET_ADDRSTRLEN) })
                case AF_INET6:
                    result.append(address.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { text(AF_INET6, $0.pointee.sin6_addr, INET6_ADDRSTRLEN) })
                default:
                    break
                }
            }
            node = current.pointee.ifa_next
        }
        return result
    }
}

/// IP address literals (inet_pton): the address's bytes, or nil when the text is not one.
public enum IPAddress {
    public static func v4(_ text: String) -> [UInt8]? {
        var addr = in_addr()
        guard inet_pton(AF_INET, text, &addr) == 1 else { return nil }
        return withUnsafeBytes(of: &addr) { Array($0) }
    }

    public static func v6(_ text: String) -> [UInt8]? {
        var addr = in6_addr()
        guard inet_pton(AF_INET6, text, &addr) == 1 else { return nil }
        return withUnsafeBytes(of: &addr) { Array($0) }
    }
}

/// A bound, listening, non-blocking socket. Sendable: its state is the descriptor, fixed at birth,
/// and whether it is closed, an atomic flag.
public final class ListeningSocket: Sendable {
    public let fd: Int32
    public let address: SocketAddress
    /// A unix socket's file, which `close` removes when it is still the one this socket made.
    private let socketFile: SocketFile?
    private let closed = Atomic<Bool>(false)

    /// A socket file's path and identity (device and inode, stat(2)).
    struct SocketFile: Sendable {
        let path: String
        let device: UInt64
        let inode: UInt64
    }

    private init(fd: Int32, address: SocketAddress, socketFile: SocketFile? = nil) {
        self.fd = fd
        self.address = address
        self.socketFile = socketFile
    }

    deinit { close() }

    /// Stops listening, once; safe from any thread. Connections still waiting in the backlog are
    /// reset and new ones refused (listen(2)); a unix socket's file is removed first, so a client
    /// finds no socket at all. The caller makes sure that no event loop watches `fd` any more: the
    /// number may be reused at once.
    public func close() {
        guard !closed.exchange(true, ordering: .acquiringAndReleasing) else { return }
        if let file = socketFile {
            // Only our own file: another process may have replaced it since (a second instance).
            var st = stat()
            if lstat(file.path, &st) == 0, UInt64(st.st_dev) == file.device, UInt64(st.st_ino) == file.inode {
                unlink(file.path)
            }
        }
        Syscall.close(fd)
    }

    /// Binds `host:port` ("127.0.0.1", "::1", "localhost"). With `reusePort`, several loops can
    /// each bind the same port and the kernel spreads connections over them. `exclusive` first
    /// makes sure that no other socket listens on the port: SO_REUSEPORT alone would share it
    /// silently with another process of the same user (socket(7)) instead of failing with EADDRINUSE.
    public static func tcp(host: String, port: Int, reusePort: Bool, exclusive: Bool = false, backlog: Int32 = 1024) throws -> ListeningSocket {
        let literal = host == "localhost" ? "127.0.0.1" : host
        let isV6 = literal.contains(":")
        if exclusive, reusePort, port != 0 {
            // Bound without SO_REUSEPORT, the probe fails where anything already listens; SO_REUSEADDR
            // keeps connections in TIME_WAIT on the port from counting (socket(7)).
            _ = try tcp(host: host, port: port, reusePort: false, backlog: 1)
        }
        let fd = Int32(
            try Syscall.retrying("socket") {
                Int(socket(isV6 ? AF_INET6 : AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0))
            })
        do {
            try Syscall.setOption(fd, SOL_SOCKET, SO_REUSEADDR, 1)
            if reusePort { try Syscall.setOption(fd, SOL_SOCKET, SO_REUSEPORT, 1) }
            if isV6 {
                try Syscall.setOption(fd, Int32(IPPROTO_IPV6), IPV6_V6ONLY, 1)
                var sin6 = sockaddr_in6()
                sin6.sin6_family = sa_family_t(AF_INET6)
                sin6.sin6_port = UInt16(port).bigEndian
                guard inet_pton(AF_INET6, literal, &sin6.sin6_addr) == 1 else { throw SocketError("inet_pton", errno: EINVAL) }
                try bind(fd, to: &sin6)
            } else {
                var sin = sockaddr_in()
                sin.sin_family = sa_family_t(AF_INET)
                sin.sin_port = UInt16(port).bigEndian
                guard inet_pton(AF_INET, literal, &sin.sin_addr) == 1 else { throw SocketError("inet_pton", errno: EINVAL) }
                try bind(fd, to: &sin)
            }
            _ = try Syscall.retrying("listen") { Int(Glibc.listen(fd, backlog)) }
            var storage = sockaddr_storage()
            var len = socklen_t(MemoryLayout<sockaddr_storage>.size)
            _ = try Syscall.retrying("getsockname") {
                Int(
                    withUnsafeMutablePointer(to: &storage) {
                        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &len) }
                    })
            }
            return ListeningSocket(fd: fd, address: withUnsafePointer(to: &storage) { SocketAddress.from($0) })
        } catch {
            Syscall.close(fd)
            throw error
        }
    }

    /// Binds a unix socket at `path`, replacing a stale socket file: never another kind of file, and
    /// never a socket that a live process still listens on (that is EADDRINUSE, as for a TCP port).
    public static func unix(path: String, mode: UInt32, backlog: Int32 = 1024) throws -> ListeningSocket {
        var sun = sockaddr_un()
        sun.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        guard bytes.count < MemoryLayout.size(ofValue: sun.sun_path) else { throw SocketError("bind (path too long)", errno: ENAMETOOLONG) }
        withUnsafeMutableBytes(of: &sun.sun_path) { raw in
            raw.copyBytes(from: bytes)
            raw[bytes.count] = 0
        }
        var st = stat()
        if lstat(path, &st) == 0 {
            guard (st.st_mode & S_IFMT) == S_IFSOCK else { throw SocketError("bind (\(path) exists and is not a socket)", errno: EEXIST) }
            guard !acceptsConnections(&sun) else { throw SocketError("bind (another process listens on \(path))", errno: EADDRINUSE) }
            unlink(path)
        }
        let fd = Int32(
            try Syscall.retrying("socket") {
                Int(socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0))
            })
        var bound = false
        do {
            try bind(fd, to: &sun)
            bound = true
            _ = try Syscall.retrying("chmod") { Int(chmod(path, mode_t(mode))) }
            _ = try Syscall.retrying("stat") { Int(lstat(path, &st)) }
            _ = try Syscall.retrying("listen") { Int(Glibc.listen(fd, backlog)) }
            let file = SocketFile(path: path, device: UInt64(st.st_dev), inode: UInt64(st.st_ino))
            return ListeningSocket(fd: fd, address: .unix(path), socketFile: file)
        } catch {
            if bound { unlink(path) }
            Syscall.close(fd)
            throw error
        }
    }

    /// bind(2) to a `sockaddr_in`, `sockaddr_in6` or `sockaddr_un`.
    private static func bind<Address>(_ fd: Int32, to address: inout Address) throws {
        _ = try Syscall.retrying("bind") {
            Int(
                withUnsafePointer(to: &address) {
                    $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.bind(fd, $0, socklen_t(MemoryLayout<Address>.size)) }
                })
        }
    }

    /// Whether something listens on the unix socket at `address`: a connection attempt that is not
    /// refused (ECONNREFUSED: a stale file; EAGAIN: a live listener with a full backlog, unix(7)).
    private static func acceptsConnections(_ address: inout sockaddr_un) -> Bool {
        let probe = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard probe >= 0 else { return false }
        defer { Syscall.close(probe) }
        let (r, failure) = Syscall.uninterrupted {
            Int(
                withUnsafePointer(to: &address) {
                    $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(probe, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
                })
        }
        return r == 0 || failure == EAGAIN
    }

    public enum Accepted {
        case connection(fd: Int32, peer: SocketAddress)
        case none
        /// EMFILE/ENFILE and the like: the caller should back off briefly.
        case failed(SocketError)
    }

    /// Accepts one connection, already non-blocking and close-on-exec.
    public func accept() -> Accepted {
        var storage = sockaddr_storage()
        var len = socklen_t(MemoryLayout<sockaddr_storage>.size)
        while true {
            let (accepted, failure) = Syscall.uninterrupted {
                Int(
                    withUnsafeMutablePointer(to: &storage) {
                        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                            tp_accept4(fd, $0, &len, Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue))
                        }
                    })
            }
            let cfd = Int32(accepted)
            if cfd >= 0 {
                if storage.ss_family == sa_family_t(AF_INET) || storage.ss_family == sa_family_t(AF_INET6) {
                    try? Syscall.setOption(cfd, Int32(IPPROTO_TCP), TCP_NODELAY, 1)
                }
                let peer: SocketAddress = storage.ss_family == sa_family_t(AF_UNIX) ? .unix("") : withUnsafePointer(to: &storage) { SocketAddress.from($0) }
                return .connection(fd: cfd, peer: peer)
            }
            switch failure {
            case ECONNABORTED: continue
            case EAGAIN, EWOULDBLOCK: return .none
            default: return .failed(SocketError("accept4", errno: failure))
            }
        }
    }
}
