import Basics
import Yams

/// Where `forward_proxy.other_hosts: tunnel` may go (CONTRACT.md "Programs in a sandbox", "Egress
/// policy"; docs/FORWARD-PROXY.md "Where a tunnel may go"): the names a CONNECT may open a tunnel
/// to (`tunnel_hosts`), and the addresses the name may not resolve to (`deny_addresses`). Pure; the
/// tunnel resolves the name and asks `deniedBlock` of every address before it connects to one.
public struct EgressPolicy: Sendable, Equatable {
    /// One entry of `tunnel_hosts`: `name`, `*.suffix` (one or more labels before the suffix) or
    /// either with `:port` (without one: 443, the tunnel carries https).
    public struct TunnelHost: Sendable, Equatable, CustomStringConvertible {
        /// Lowercased, without a trailing dot; for `*.example.com`, `example.com`.
        public let name: String
        public let wildcard: Bool
        public let port: Int?

        /// `host`: a CONNECT's name, lowercased and without a trailing dot (`ForwardProxyRules.hostName`).
        public func allows(host: String, port: Int) -> Bool {
            guard (self.port ?? EgressPolicy.tunnelPort) == port else { return false }
            guard wildcard else { return host == name }
            return host.utf8.count > name.utf8.count + 1 && host.hasSuffix("." + name)
        }

        public var description: String { (wildcard ? "*." : "") + name + (port.map { ":\($0)" } ?? "") }
    }

    /// The port a tunnel goes to when `tunnel_hosts` does not name one.
    public static let tunnelPort = 443

    /// nil: any name is tunnelled (to port 443 only), as without the key.
    public var tunnelHosts: [TunnelHost]? = nil
    /// Every address a tunnel's name resolves to is checked against these; `[]` allows all.
    public var denyAddresses: [AddressBlock] = EgressPolicy.defaultDenyAddresses

    public init() {}

    /// Whether a CONNECT to `host:port` (a name no route has) may become a tunnel.
    public func allowsTunnel(host: String, port: Int) -> Bool {
        guard let tunnelHosts else { return port == Self.tunnelPort }
        return tunnelHosts.contains { $0.allows(host: host, port: port) }
    }

    /// The block of `denyAddresses` that holds `address` (4 or 16 bytes), or nil when a tunnel may
    /// go there. An IPv6 address that carries an IPv4 one is judged by that one too: IPv4-mapped
    /// `::ffff:a.b.c.d` (RFC 4291 §2.5.5.2, which a dual-stack socket reaches as IPv4), the deprecated
    /// IPv4-compatible `::a.b.c.d` (§2.5.5.1) and NAT64's `64:ff9b::a.b.c.d` (RFC 6052 §2.1). An
    /// address of any other length is refused by the first block (or allowed with no block at all).
    public func deniedBlock(_ address: [UInt8]) -> AddressBlock? {
        guard address.count == 4 || address.count == 16 else { return denyAddresses.first }
        if let block = denyAddresses.first(where: { $0.contains(address) }) { return block }
        guard let embedded = Self.embeddedIPv4(address) else { return nil }
        return denyAddresses.first { $0.contains(embedded) }
    }

    /// The IPv4 address an IPv6 address carries in its last 4 bytes, when its first 12 say it does.
    public static func embeddedIPv4(_ address: [UInt8]) -> [UInt8]? {
        guard address.count == 16 else { return nil }
        let head = address[0..<12]
        let mapped: [UInt8] = [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF]
        let compatible = [UInt8](repeating: 0, count: 12)
        let nat64: [UInt8] = [0x00, 0x64, 0xFF, 0x9B, 0, 0, 0, 0, 0, 0, 0, 0]
        guard head.elementsEqual(mapped) || head.elementsEqual(compatible) || head.elementsEqual(nat64) else { return nil }
        return Array(address[12..<16])
    }

    /// `deny_addresses: default`, CONTRACT.md's list: "this network", the private ranges (RFC 1918,
    /// fc00::/7), shared address space (RFC 6598), loopback, link-local (where cloud metadata servers
    /// answer), IETF protocol assignments, benchmarking, multicast and reserved, the unspecified
    /// address, and EC2's IPv6 metadata address. `::ffff:0:0/96` and `64:ff9b::/96` are in the list
    /// by their embedded address (`deniedBlock`), not as blocks: NAT64 to a public address is an
    /// IPv6-only network's way out.
    public static let defaultDenyAddresses: [AddressBlock] = [
        "0.0.0.0/8", "10.0.0.0/8", "100.64.0.0/10", "127.0.0.0/8", "169.254.0.0/16", "172.16.0.0/12", "192.0.0.0/24",
        "192.168.0.0/16", "198.18.0.0/15", "224.0.0.0/3", "::/128", "::1/128", "fc00::/7", "fe80::/10", "ff00::/8", "fd00:ec2::254/128",
    ].map { try! AddressBlock($0) }
}

extension EgressPolicy {
    static let keys = ["tunnel_hosts", "deny_addresses"]

    /// The two keys of `forward_proxy:` `s`; every bad entry is an error naming its index.
    static func parse(_ s: YAMLSection, otherHosts: ForwardProxyConfiguration.OtherHosts, in load: LoadContext) -> EgressPolicy {
        var policy = EgressPolicy()
        if let entries = load.found.collect({ try s.stringList("tunnel_hosts", example: "[pypi.org, \"*.githubusercontent.com\"]") }) {
            var hosts: [TunnelHost] = []
            for (i, entry) in entries.enumerated() {
                switch TunnelHost.parse(entry) {
                case .success(let host): hosts.append(host)
                case .failure(let why): load.found.record(ConfigurationError(keyPath: s.path("tunnel_hosts") + "[\(i)]", reason: why.description))
                }
            }
            policy.tunnelHosts = hosts
            if otherHosts != .tunnel {
                load.warnings.append("forward_proxy.tunnel_hosts: used only with other_hosts: tunnel; every CONNECT to a host no route names is refused")
            }
        }
        load.found.collect {
            guard let node = s.node("deny_addresses") else { return }
            if case .scalar(let scalar) = node, scalar.string == "default" { return }
            guard case .sequence = node else {
                throw ConfigurationError(
                    keyPath: s.path("deny_addresses"), reason: "expected default or a list of CIDRs such as [10.0.0.0/8, \"fc00::/7\"] ([] allows all)")
            }
            var blocks: [AddressBlock] = []
            for (i, text) in (try s.stringList("deny_addresses") ?? []).enumerated() {
                do throws(AddressBlock.ParseError) {
                    blocks.append(try AddressBlock(text.trimmingWhitespace()))
                } catch {
                    load.found.record(ConfigurationError(keyPath: s.path("deny_addresses") + "[\(i)]", reason: error.description))
                }
            }
            policy.denyAddresses = blocks
        }
        return policy
    }

    /// `deny_addresses` as `check` prints it.
    var denyDescription: String {
        if denyAddresses == Self.defaultDenyAddresses { return "default (" + denyAddresses.map(\.description).joined(separator: ", ") + ")" }
        return denyAddresses.isEmpty ? "[] (any address)" : "[" + denyAddresses.map(\.description).joined(separator: ", ") + "]"
    }
}

extension EgressPolicy.TunnelHost {
    struct ParseError: Error, CustomStringConvertible {
        let description: String
    }

    /// `name`, `*.name`, either with `:port`. The name is a DNS name (RFC 1123 §2.1: letters, digits
    /// and `-`, labels of 1–63 bytes, 253 in all), lowercased, one trailing dot dropped; not an IP
    /// address, which a CONNECT may never name.
    static func parse(_ text: String) -> Result<Self, ParseError> {
        var rest = Substring(text.trimmingWhitespace())
        var port: Int?
        if let colon = rest.lastIndex(of: ":") {
            let digits = rest[rest.index(after: colon)...]
            let decimal = !digits.isEmpty && digits.count <= 5 && digits.utf8.allSatisfy { $0 >= 0x30 && $0 <= 0x39 }
            guard decimal, let n = Int(digits), (1...65535).contains(n), digits.first != "0" else {
                return .failure(ParseError(description: "\"\(text)\": the port after : must be a number from 1 to 65535"))
            }
            port = n
            rest = rest[..<colon]
        }
        var wildcard = false
        if rest.hasPrefix("*.") {
            wildcard = true
            rest = rest.dropFirst(2)
        }
        if rest.hasSuffix(".") { rest = rest.dropLast() }
        let name = rest.lowercased()
        guard Self.isHostName(name) else {
            return .failure(
                ParseError(description: "\"\(text)\" is not a host name, *.name or either with :port (letters, digits, - and . in labels of 1 to 63)"))
        }
        if let last = name.split(separator: ".").last, last.allSatisfy(\.isNumber) {
            return .failure(ParseError(description: "\"\(text)\" is an IP address; a tunnel is opened to a name only"))
        }
        return .success(Self(name: name, wildcard: wildcard, port: port))
    }

    static func isHostName(_ name: String) -> Bool {
        guard !name.isEmpty, name.utf8.count <= 253 else { return false }
        return name.split(separator: ".", omittingEmptySubsequences: false).allSatisfy { label in
            (1...63).contains(label.utf8.count) && label.first != "-" && label.last != "-"
                && label.utf8.allSatisfy { ($0 >= 0x61 && $0 <= 0x7A) || ($0 >= 0x30 && $0 <= 0x39) || $0 == 0x2D }
        }
    }
}
