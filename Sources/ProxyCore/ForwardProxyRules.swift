import Basics
import Config

/// What a CONNECT gets (CONTRACT.md "HTTPS for clients", docs/FORWARD-PROXY.md).
enum ConnectDecision: Equatable, Sendable {
    /// `200 Connection established`, then the proxy's own TLS handshake for `host`, and that
    /// route's requests in the tunnel.
    case intercept(route: Int, host: String, port: Int)
    /// `other_hosts: tunnel`: bytes both ways to `host:port`, once its addresses pass
    /// ``ForwardProxyRules/tunnelRefusal(resolved:egress:)``.
    case tunnel(host: String, port: Int)
    /// 403 `forbidden_target` with this message; it names the host only once the host is a valid
    /// name (at most 253 bytes of letters, digits, `-` and `.`), never the raw target.
    case refuse(String)
}

/// The forward proxy's decisions, pure: which CONNECT is answered and how, and the pin that keeps
/// a tunnel to the host its CONNECT named (CONNECT host = TLS server name = `Host`). No I/O; the
/// callers perform what these decide.
enum ForwardProxyRules {
    /// The port a tunnel to a host no route names may go to, and the port that a route's host
    /// without one, and a `Host` field without one inside the tunnel, mean: the tunnel carries https.
    static let httpsPort = 443

    // MARK: CONNECT

    /// `connectTarget`: CONNECT's request-target as it came, authority-form `host:port` (RFC 9110
    /// §9.3.6, RFC 9112 §3.2.3). The rules, in order:
    /// - the target must be a host name and a port (1–65535, decimal, no sign, no leading zero);
    ///   no userinfo, percent-encoding, spaces or other bytes; the name is letters, digits, `-` and
    ///   `.` (RFC 1123 §2.1; an IDN comes as its `xn--` A-label), labels of 1–63 bytes that neither
    ///   start nor end with `-`, 253 bytes in all; lowercased, one trailing dot dropped;
    /// - an IP literal is refused whatever `other_hosts` says: `[…]`, and every name whose last
    ///   label is a number (`127.1`, `0x7f.1`, `2130706433`), which resolvers read as IPv4;
    /// - a name a `host` route gives is intercepted when the port is the route's (443 when the
    ///   route gives none), else refused;
    /// - any other name follows `otherHosts`; a tunnel goes to a name and port `egress.tunnelHosts`
    ///   allows, or without that list to port 443 only.
    static func decide(
        connectTarget: String, table: RouteTable, otherHosts: ForwardProxyConfiguration.OtherHosts, egress: EgressPolicy = EgressPolicy()
    ) -> ConnectDecision {
        let target = Array(connectTarget.utf8)
        let span: Authority.Span<Int>
        switch Authority.parse(target, port: portRule) {
        case .success(let parsed): span = parsed
        case .failure(.missingPort), .failure(.badPort): return .refuse("CONNECT needs host:port (RFC 9110 §9.3.6)")
        case .failure(.unclosedBracket), .failure(.notIPv6InBrackets), .failure(.textAfterBracket):
            return .refuse("CONNECT to an IP address is not allowed; name the host")
        case .failure(.noHost), .failure(.ipv6WithoutBrackets), .failure(.hostByte):
            return .refuse("CONNECT needs a host name of letters, digits, - and . (RFC 1123 §2.1)")
        }
        guard let port = span.port else { return .refuse("CONNECT needs host:port (RFC 9110 §9.3.6)") }
        let hostPart = target[span.host]
        if span.isIPv6Literal || isIPv4Literal(hostPart) {
            return .refuse("CONNECT to an IP address is not allowed; name the host")
        }
        guard let name = hostName(hostPart) else {
            return .refuse("CONNECT needs a host name of letters, digits, - and . (RFC 1123 §2.1)")
        }
        let host = String(decoding: name, as: UTF8.self)
        let route = name.withUnsafeBufferPointer { table.hostRoute(forName: $0, port: port, defaultPort: httpsPort) }
        switch route {
        case .route(let index):
            return .intercept(route: index, host: host, port: port)
        case .otherPort:
            return .refuse("\(host) is served on another port than \(port)")
        case .unnamed:
            break
        }
        switch otherHosts {
        case .refuse:
            return .refuse("no route names \(host)")
        case .tunnel:
            guard egress.allowsTunnel(host: host, port: port) else {
                guard egress.tunnelHosts != nil else { return .refuse("a tunnel to a host no route names goes to port \(httpsPort) only") }
                return .refuse("\(host):\(port) is not in forward_proxy.tunnel_hosts")
            }
            return .tunnel(host: host, port: port)
        }
    }

    /// A port as a CONNECT target and a `Host` field in a tunnel write it: 1–65535, and no leading
    /// zero (RFC 3986 §3.2.3 allows one, but no client sends it, and refusing it leaves one spelling
    /// per port). Computed: a stored static costs a lazy-initialisation check on every use.
    static var portRule: Authority.PortRule { Authority.PortRule(required: false, lowest: 1, allowsLeadingZero: false) }

    /// `digits` as a port under `portRule`.
    static func port<C: Collection>(_ digits: C) -> Int? where C.Element == UInt8 {
        Authority.port(digits, rule: portRule)
    }

    /// `bytes` lowercased without one trailing dot, when it is a host name (RFC 1123 §2.1: letters,
    /// digits and `-`, in labels of 1–63 bytes that do not start or end with `-`, 253 in all);
    /// nil otherwise. `_` is refused too: no public CA may put it in a certificate's name.
    static func hostName(_ bytes: ArraySlice<UInt8>) -> [UInt8]? {
        let name = bytes.last == UInt8(ascii: ".") ? bytes.dropLast() : bytes
        guard !name.isEmpty, name.count <= 253 else { return nil }
        var lowered: [UInt8] = []
        lowered.reserveCapacity(name.count)
        var labelLength = 0
        var previous = UInt8(ascii: ".")
        for b in name {
            let c = asciiLower(b)
            switch c {
            case UInt8(ascii: "."):
                guard labelLength > 0, previous != UInt8(ascii: "-") else { return nil }
                labelLength = 0
            case UInt8(ascii: "-"):
                guard labelLength > 0 else { return nil }
                labelLength += 1
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"):
                labelLength += 1
            default:
                return nil
            }
            guard labelLength <= 63 else { return nil }
            lowered.append(c)
            previous = c
        }
        guard labelLength > 0, previous != UInt8(ascii: "-") else { return nil }
        return lowered
    }

    /// Whether a resolver would read `host` as an IPv4 address: its last label (one trailing dot
    /// aside) is decimal digits, or `0x` and hex digits, as inet_aton(3) and the WHATWG URL
    /// standard's "ends in a number" take `127.1`, `0x7f.0.0.1`, `017700000001` and `2130706433`.
    /// No top-level domain is a number (RFC 3696 §2), so no name is lost.
    static func isIPv4Literal(_ host: ArraySlice<UInt8>) -> Bool {
        let name = host.last == UInt8(ascii: ".") ? host.dropLast() : host
        let last = name[((name.lastIndex(of: UInt8(ascii: ".")).map { $0 + 1 }) ?? name.startIndex)...]
        guard !last.isEmpty else { return false }
        let isDigit = { (b: UInt8) in b >= UInt8(ascii: "0") && b <= UInt8(ascii: "9") }
        if last.allSatisfy(isDigit) { return true }
        guard last.count >= 2, last.first == UInt8(ascii: "0"), asciiLower(last[last.startIndex + 1]) == UInt8(ascii: "x") else { return false }
        return last.dropFirst(2).allSatisfy { isDigit($0) || (asciiLower($0) >= UInt8(ascii: "a") && asciiLower($0) <= UInt8(ascii: "f")) }
    }

    // MARK: The pin

    /// Whether a ClientHello's server name (RFC 6066 §3) may open the tunnel to `tunnelHost`: none
    /// at all (a client that sends no SNI gets the CONNECT host's certificate), or the same name,
    /// ASCII case and one trailing dot aside. Another name fails the handshake.
    static func serverNameAllowed(_ sni: String?, tunnelHost: String) -> Bool {
        guard let sni else { return true }
        return sameName(sni.utf8, tunnelHost.utf8)
    }

    /// Whether a request inside the tunnel to `tunnelHost:tunnelPort` may go on (false: 421
    /// `misdirected_request`, RFC 9110 §15.5.20). `hostField`: the `Host` field's value, `name` or
    /// `name:port` (no port: 443, the tunnel carries https); nil is no claim (HTTP/1.1's missing
    /// Host is the parser's 400). `absolute`: an absolute-form target's authority as
    /// `RequestTarget` gives it (host without brackets; no port: the scheme's, http or https). When
    /// both are present, both must name the tunnel's host and port.
    static func pin(hostField: String?, absolute: (host: String, port: Int?, scheme: String)?, tunnelHost: String, tunnelPort: Int) -> Bool {
        if let hostField, !hostFieldNames(hostField, tunnelHost: tunnelHost, tunnelPort: tunnelPort) { return false }
        if let absolute {
            guard let scheme = URLScheme(absolute.scheme), scheme == .http || scheme == .https else { return false }
            guard (absolute.port ?? scheme.defaultPort) == tunnelPort, sameName(absolute.host.utf8, tunnelHost.utf8) else { return false }
        }
        return true
    }

    /// A `Host` value (RFC 9110 §7.2: uri-host [":" port]) that names `tunnelHost:tunnelPort`. A
    /// bracketed IPv6 literal keeps its colons out of the port; it never equals a tunnel's host,
    /// which is a name. An empty port, a port with a leading zero or a sign is garbage: false.
    /// Reads the value in place (a request in a tunnel makes no copy of it here).
    static func hostFieldNames(_ value: String, tunnelHost: String, tunnelPort: Int) -> Bool {
        var value = value
        return value.withUTF8 { bytes in
            guard case .success(let span) = Authority.parse(bytes, port: portRule), !span.isIPv6Literal else { return false }
            return (span.port ?? httpsPort) == tunnelPort && sameName(bytes[span.host], tunnelHost.utf8)
        }
    }

    /// Two host names that are the same name: ASCII case folds, one trailing dot on either side
    /// is ignored, and an empty name equals nothing.
    static func sameName<A: BidirectionalCollection, B: BidirectionalCollection>(_ a: A, _ b: B) -> Bool
    where A.Element == UInt8, B.Element == UInt8 {
        let left = withoutTrailingDot(a)
        return !left.isEmpty && asciiCaseInsensitiveEquals(left, withoutTrailingDot(b))
    }

    // MARK: Where a tunnel may go

    /// Why a tunnel to a resolved name is not made (`ByteTunnel`): the CONNECT's answer, and the
    /// reason an audit record gives (CONTRACT "Programs in a sandbox": `deny_address`).
    enum TunnelRefusal: Equatable, Sendable {
        /// The name resolves to no address: 502.
        case noAddress
        /// `address` is in `block` of `deny_addresses`: 403 `forbidden_target`.
        case deniedAddress(address: [UInt8], block: AddressBlock)

        var error: ProxyError {
            switch self {
            case .noAddress: return .badGateway("the host resolves to no address")
            // The address stays out of the answer: the sandbox learns no internal address from it.
            case .deniedAddress: return .refusedConnect("the host resolves to an address where a tunnel may not go (deny_addresses)")
            }
        }

        /// The audit log's `reason`.
        var auditReason: String {
            switch self {
            case .noAddress: return error.code
            case .deniedAddress: return "deny_address"
            }
        }
    }

    /// The refusal when a host has no address or **any** of its addresses is denied (CONTRACT.md:
    /// "refused when any address it resolves to is in deny_addresses"): the caller connects only to
    /// the addresses it checked here, never resolving again, so that a second answer cannot point
    /// somewhere else (DNS rebinding); and "any", not "the first", so that a name answering with a
    /// public address and a link-local one cannot reach the metadata server.
    static func tunnelRefusal(resolved: [[UInt8]], egress: EgressPolicy) -> TunnelRefusal? {
        guard !resolved.isEmpty else { return .noAddress }
        for address in resolved {
            if let block = egress.deniedBlock(address) { return .deniedAddress(address: address, block: block) }
        }
        return nil
    }
}
