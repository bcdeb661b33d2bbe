import Basics

extension RouteTable {
    /// Which `host` route a name and port belong to, whatever the path: what a CONNECT to
    /// `name:port` reaches (CONTRACT.md "HTTPS for clients", docs/FORWARD-PROXY.md).
    public enum HostRoute: Equatable, Sendable {
        /// The route's index in `Configuration.routes`: the first entry in `match`'s order (exact
        /// names, then `*.` names, the longest first) whose name and port both fit.
        case route(Int)
        /// A route names the host, but none on this port.
        case otherPort
        /// No `host` route names it.
        case unnamed
    }

    /// `name`: a host name without its port; ASCII capitals fold, and one trailing dot on either
    /// side is ignored (`api.example.com.` is `api.example.com`, RFC 1034 §3.1). `defaultPort`: the
    /// port an entry without one means (443 for a CONNECT: the tunnel carries https). Compares
    /// bytes, the way `match` does; a `path_prefix` does not matter here.
    public func hostRoute(forName name: UnsafeBufferPointer<UInt8>, port: Int, defaultPort: Int) -> HostRoute {
        let bare = withoutTrailingDot(name[...])
        var named = false
        for entry in exact where asciiCaseInsensitiveEquals(withoutTrailingDot(entry.name[...]), bare) {
            if (entry.port ?? defaultPort) == port { return .route(entry.route) }
            named = true
        }
        for entry in wildcard {
            // `.example.com` (from `*.example.com`) needs at least one label before it.
            let suffix = withoutTrailingDot(entry.name[...])
            guard suffix.count < bare.count, asciiCaseInsensitiveEquals(suffix, bare[(bare.endIndex - suffix.count)...]) else { continue }
            if (entry.port ?? defaultPort) == port { return .route(entry.route) }
            named = true
        }
        return named ? .otherPort : .unnamed
    }

    /// Convenience for tests and the command line.
    public func hostRoute(forName name: String, port: Int, defaultPort: Int) -> HostRoute {
        Array(name.utf8).withUnsafeBufferPointer { hostRoute(forName: $0, port: port, defaultPort: defaultPort) }
    }
}

extension RouteTable {
    /// The name a route with `upstream: "https://{host}"` sends its request to: the request's host
    /// (Host, an absolute-form authority or the CONNECT host) without its port and trailing dot,
    /// lower-cased; nil when it is not a DNS name (RFC 1035 §2.3.1: labels of 1 to 63 letters, digits,
    /// `-` and `_`, 253 bytes at most). A `*.` name only checks the suffix: what comes before it could
    /// be anything a client wrote, and must not change where the connection goes (`a/b?.s3.…`).
    public static func requestHostName(_ host: String) -> String? {
        let (name, _) = splitPort(Array(host.utf8)[...])
        let bare = withoutTrailingDot(name)
        guard !bare.isEmpty, bare.count <= 253 else { return nil }
        var labelLength = 0
        for byte in bare {
            if byte == UInt8(ascii: ".") {
                guard labelLength > 0 else { return nil }
                labelLength = 0
                continue
            }
            let allowed =
                (byte >= UInt8(ascii: "a") && byte <= UInt8(ascii: "z")) || (byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z"))
                || (byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9")) || byte == UInt8(ascii: "-") || byte == UInt8(ascii: "_")
            guard allowed else { return nil }
            labelLength += 1
            guard labelLength <= 63 else { return nil }
        }
        guard labelLength > 0 else { return nil }
        return String(decoding: bare.map(asciiLower), as: UTF8.self)
    }
}
