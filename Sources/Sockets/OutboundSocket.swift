import Glibc

/// One address a name resolved to: its raw bytes (4 for IPv4, 16 for IPv6), for checks and `connect`.
public struct ResolvedAddress: Equatable, Sendable, CustomStringConvertible {
    public let bytes: [UInt8]
    public let port: Int

    public var description: String {
        var text = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN))
        let family = bytes.count == 4 ? AF_INET : AF_INET6
        bytes.withUnsafeBytes { _ = inet_ntop(family, $0.baseAddress, &text, socklen_t(text.count)) }
        let host = text.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
        return bytes.count == 4 ? "\(host):\(port)" : "[\(host)]:\(port)"
    }
}

/// Name resolution and outbound TCP connections that do not block an event loop once made.
public enum OutboundSocket {
    /// Every TCP address `host` resolves to, through the system resolver (`/etc/hosts`, then DNS:
    /// getaddrinfo(3)). Blocks: call it off the event loops. Empty when the name does not resolve.
    public static func resolve(_ host: String, port: Int) -> [ResolvedAddress] {
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var list: UnsafeMutablePointer<addrinfo>?
        guard getaddrinfo(host, String(port), &hints, &list) == 0, let first = list else { return [] }
        defer { freeaddrinfo(first) }
        var addresses: [ResolvedAddress] = []
        var cursor: UnsafeMutablePointer<addrinfo>? = first
        while let entry = cursor {
            if let raw = entry.pointee.ai_addr {
                switch entry.pointee.ai_family {
                case AF_INET:
                    raw.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { a in
                        addresses.append(ResolvedAddress(bytes: withUnsafeBytes(of: a.pointee.sin_addr) { Array($0) }, port: port))
                    }
                case AF_INET6:
                    raw.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { a in
                        addresses.append(ResolvedAddress(bytes: withUnsafeBytes(of: a.pointee.sin6_addr) { Array($0) }, port: port))
                    }
                default:
                    break
                }
            }
            cursor = entry.pointee.ai_next
        }
        var unique: [ResolvedAddress] = []
        for address in addresses where !unique.contains(address) { unique.append(address) }
        return unique
    }

    /// A non-blocking socket connecting to `address`: done or in progress (wait until writable, then
    /// `connectError`). Throws when the socket cannot even be made or the connect fails at once.
    public static func connect(to address: ResolvedAddress) throws(SocketError) -> Int32 {
        let family = address.bytes.count == 4 ? AF_INET : AF_INET6
        let fd = Int32(
            try Syscall.retrying("socket") {
                Int(socket(family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0))
            })
        var result: Int32
        if family == AF_INET {
            var a = sockaddr_in()
            a.sin_family = sa_family_t(AF_INET)
            a.sin_port = UInt16(address.port).bigEndian
            withUnsafeMutableBytes(of: &a.sin_addr) { $0.copyBytes(from: address.bytes) }
            result = start(fd, &a)
        } else {
            var a = sockaddr_in6()
            a.sin6_family = sa_family_t(AF_INET6)
            a.sin6_port = UInt16(address.port).bigEndian
            withUnsafeMutableBytes(of: &a.sin6_addr) { $0.copyBytes(from: address.bytes) }
            result = start(fd, &a)
        }
        if result != 0 && errno != EINPROGRESS {
            let e = errno
            Syscall.close(fd)
            throw SocketError("connect", errno: e)
        }
        return fd
    }

    /// connect(2) with a `sockaddr_in` or `sockaddr_in6`.
    private static func start<Address>(_ fd: Int32, _ address: inout Address) -> Int32 {
        withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, socklen_t(MemoryLayout<Address>.size)) }
        }
    }

    /// After a connecting socket became writable: nil when connected, else the reason (SO_ERROR).
    public static func connectError(_ fd: Int32) -> String? {
        var value: Int32 = 0
        var length = socklen_t(MemoryLayout<Int32>.size)
        guard getsockopt(fd, SOL_SOCKET, SO_ERROR, &value, &length) == 0 else { return Syscall.describe(errno: errno) }
        return value == 0 ? nil : Syscall.describe(errno: value)
    }
}
