import Basics
import Config

/// What a CONNECT gets (CONTRACT.md "HTTPS for clients", docs/FORWARD-PROXY.md).
enum ConnectDecision: Equatable, Sendable {
    /// `200 Connection established`, then the proxy's own TLS handshake for `host`, and that
    /// route's requests in the tunnel.
    case intercept(route: Int, host: String, port: Int)
    /// `other_hosts: tunnel`: bytes both ways to `host:port`, once its addresses pass
    /// ``ForwardProxyRules/tunnelRefusal(resolved:)``.
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
    /// - any other name follows `otherHosts`; a tunnel goes to port 443 only.
    static func decide(connectTarget: String, table: RouteTable, otherHosts: ForwardProxyConfiguration.OtherHosts) -> ConnectDecision {
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
            guard port == httpsPort else { return .refuse("a tunnel to a host no route names goes to port \(httpsPort) only") }
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

    /// Whether a tunnel may not connect to `address` (4 or 16 raw bytes, network order): it is
    /// loopback (127.0.0.0/8, ::1), unspecified (0.0.0.0/8, ::), link-local (169.254.0.0/16,
    /// fe80::/10: where cloud metadata servers answer) or EC2's IPv6 metadata address
    /// `fd00:ec2::254`, also when an IPv6 address carries an IPv4 one (::ffff:a.b.c.d, RFC 4291
    /// §2.5.5). Any other length is refused too.
    static func isForbiddenTunnelAddress(_ address: [UInt8]) -> Bool {
        forbiddenKind(address) != nil
    }

    /// A refusal message when any of a host's resolved addresses is forbidden, or it has none
    /// (CONTRACT.md: "refused when any address it resolves to is loopback, link-local …"): the
    /// caller connects only to the addresses it checked here, never resolving again, so that a
    /// second answer cannot point somewhere else (DNS rebinding).
    static func tunnelRefusal(resolved: [[UInt8]]) -> String? {
        guard !resolved.isEmpty else { return "the host resolves to no address" }
        for address in resolved {
            if let kind = forbiddenKind(address) { return "the host resolves to \(kind), where a tunnel may not go" }
        }
        return nil
    }

    /// What makes `address` forbidden, in words; nil when a tunnel may go there.
    static func forbiddenKind(_ address: [UInt8]) -> String? {
        switch address.count {
        case 4:
            return forbiddenIPv4Kind(address[0], address[1])
        case 16:
            let zeroPrefix = address[0..<10].allSatisfy { $0 == 0 }
            // ::ffff:a.b.c.d, IPv4-mapped (RFC 4291 §2.5.5.2): the socket reaches a.b.c.d.
            if zeroPrefix, address[10] == 0xFF, address[11] == 0xFF { return forbiddenIPv4Kind(address[12], address[13]) }
            if zeroPrefix, address[10] == 0, address[11] == 0 {
                if address[12..<15].allSatisfy({ $0 == 0 }), address[15] <= 1 {
                    return address[15] == 0 ? "an unspecified address" : "a loopback address"
                }
                // ::a.b.c.d, IPv4-compatible (RFC 4291 §2.5.5.1, deprecated): judged as a.b.c.d.
                return forbiddenIPv4Kind(address[12], address[13])
            }
            // 64:ff9b::a.b.c.d, the NAT64 well-known prefix (RFC 6052 §2.1): judged as a.b.c.d.
            if address[0..<12].elementsEqual([0x00, 0x64, 0xFF, 0x9B, 0, 0, 0, 0, 0, 0, 0, 0]) { return forbiddenIPv4Kind(address[12], address[13]) }
            if address[0] == 0xFE, address[1] & 0xC0 == 0x80 { return "a link-local address" }
            if address.elementsEqual(ec2MetadataIPv6) { return "a cloud metadata address" }
            return nil
        default:
            return "an address that is neither IPv4 nor IPv6"
        }
    }

    /// `fd00:ec2::254`.
    static let ec2MetadataIPv6: [UInt8] = [0xFD, 0x00, 0x0E, 0xC2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x02, 0x54]

    /// An IPv4 address's first two bytes decide (RFC 6890: 0.0.0.0/8 "this network", 127.0.0.0/8
    /// loopback, 169.254.0.0/16 link-local).
    static func forbiddenIPv4Kind(_ first: UInt8, _ second: UInt8) -> String? {
        switch (first, second) {
        case (0, _): return "an unspecified address"
        case (127, _): return "a loopback address"
        case (169, 254): return "a link-local address"
        case (_, _): return nil
        }
    }
}
