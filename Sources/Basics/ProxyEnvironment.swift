import Synchronization

/// The proxy curl would use for one URL scheme, read from the environment (CONTRACT.md: upstream
/// calls honour HTTPS_PROXY / HTTP_PROXY / NO_PROXY as curl does), except that a variable naming
/// one of tokenproxy's own listen addresses is passed over: the proxy never sends its own upstream
/// or identity-provider calls to itself (as after `export HTTPS_PROXY=http://127.0.0.1:8080` in
/// the shell that starts it). The upstream transport gives the result to libcurl explicitly; the
/// identity providers' client does so when a variable was passed over.
public struct ProxyEnvironment: Sendable, Equatable {
    /// A variable passed over: it names one of tokenproxy's own listen addresses.
    public struct Ignored: Sendable, Equatable {
        /// The variable's name (`HTTPS_PROXY`, …).
        public let name: String
        /// The variable's value, user info included: mask it before logging.
        public let value: String
        /// The own listen address it names, `host:port`.
        public let ownAddress: String

        public init(name: String, value: String, ownAddress: String) {
            self.name = name
            self.value = value
            self.ownAddress = ownAddress
        }
    }

    /// The proxy URL; empty for none.
    public let proxy: String
    /// Where `proxy` came from (a variable's name), nil for none.
    public let source: String?
    /// Hosts that bypass the proxy (curl's NO_PROXY syntax); empty for none.
    public let noProxy: String
    /// The variables passed over, in the order curl reads them.
    public let ignored: [Ignored]

    public init(proxy: String, source: String? = nil, noProxy: String) {
        self.proxy = proxy
        self.source = source
        self.noProxy = noProxy
        ignored = []
    }

    /// As curl reads them: `http_proxy` in lower case only (the upper-case name can be set by a CGI
    /// request's `Proxy:` header), `https_proxy` or `HTTPS_PROXY`, then `all_proxy` or `ALL_PROXY`;
    /// a variable that names one of `own` is passed over, and the next one read.
    public init(scheme: String, environment: (String) -> String?, own: OwnListenAddresses = OwnListenAddresses.current) {
        let names = URLScheme(scheme) == .https ? ["https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"] : ["http_proxy", "all_proxy", "ALL_PROXY"]
        var found: (String, String)?
        var ignored: [Ignored] = []
        for name in names {
            guard let value = environment(name), !value.isEmpty else { continue }
            if let address = own.named(byProxy: value) {
                ignored.append(Ignored(name: name, value: value, ownAddress: address))
                continue
            }
            found = (value, name)
            break
        }
        proxy = found?.0 ?? ""
        source = found?.1
        noProxy = environment("no_proxy") ?? environment("NO_PROXY") ?? ""
        self.ignored = ignored
    }

    /// The host (lowercased, without brackets or a trailing dot) and port a proxy variable's value
    /// names, as curl reads it: `[scheme://][user[:password]@]host[:port][/…]`; no scheme is
    /// `http`; no port is 443 for an `https` proxy and 1080 for any other (curl's default).
    public static func hostAndPort(ofProxy value: String) -> (host: String, port: Int)? {
        var rest = Substring(value)
        var scheme = URLScheme.http
        if let split = URLScheme.split(rest) {
            // socks5h and any other scheme take curl's default port, as http does.
            if URLScheme(split.scheme) == .https { scheme = .https }
            rest = split.rest
        }
        var authority = rest.prefix { $0 != "/" && $0 != "?" && $0 != "#" }
        if let at = authority.lastIndex(of: "@") { authority = authority[authority.index(after: at)...] }
        guard let parts = try? Authority.parts(of: authority, port: .init(required: false, emptyIsDefault: true)) else { return nil }
        return (normalizedHost(parts.host), parts.port ?? (scheme == .https ? scheme.defaultPort : 1080))
    }
}

/// tokenproxy's own TCP listen addresses (the proxy listener, the routes' own, the admin
/// listener), as bound: a proxy variable naming one of them is passed over (`ProxyEnvironment`).
/// One set per process, `current`, which `serve` fills before the token threads start and again
/// once the listeners are bound (a port 0 is known only then), and on every reload.
public struct OwnListenAddresses: Sendable, Equatable {
    /// Each listener's host (an IP literal or a name, normalized) and port.
    private var listeners: [Authority] = []
    /// This machine's interface addresses (IP literals, normalized): a wildcard listener (`0.0.0.0`,
    /// `::`) takes connections to every one of them.
    private var localAddresses: [String] = []

    /// `listeners`: host (an IP literal without brackets, or a name) and port of each.
    public init(listeners: [(host: String, port: Int)] = [], localAddresses: [String] = []) {
        self.listeners = listeners.map { Authority(host: normalizedHost($0.host), port: $0.port) }
        self.localAddresses = localAddresses.map(normalizedHost)
    }

    /// No listener: a command that serves nothing, where proxy variables are read as curl reads them.
    public var isEmpty: Bool { listeners.isEmpty }

    private static let shared = Mutex(OwnListenAddresses())

    /// The process's own listen addresses (none until `serve` sets them: the other commands listen nowhere).
    public static var current: OwnListenAddresses {
        get { shared.withLock { $0 } }
        set { shared.withLock { $0 = newValue } }
    }

    /// The own listen address (`host:port`) that a proxy variable's value names, nil when none.
    /// A listener on a specific address is named by that address, and a loopback one also by
    /// `localhost` (which resolves to loopback, RFC 6761 §6.3); a wildcard listener by every local
    /// address: loopback, the unspecified address itself, `localhost`, and this machine's
    /// interface addresses. Names other than `localhost` are not resolved.
    public func named(byProxy value: String) -> String? {
        guard let target = ProxyEnvironment.hostAndPort(ofProxy: value) else { return nil }
        let host = target.host
        for listener in listeners where listener.port == target.port {
            let reaches: Bool
            if Self.isUnspecified(listener.host) {
                reaches = Self.isLoopback(host) || Self.isUnspecified(host) || localAddresses.contains(host)
            } else if Self.isLoopback(listener.host) && Self.isLocalhostName(host) {
                reaches = true
            } else {
                reaches = listener.host == host
            }
            if reaches { return listener.description }
        }
        return nil
    }

    private static func isUnspecified(_ host: String) -> Bool {
        host == "0.0.0.0" || host == "::" || host == "0:0:0:0:0:0:0:0" || host.isEmpty || host == "*"
    }

    private static func isLocalhostName(_ host: String) -> Bool {
        host == "localhost" || host.hasSuffix(".localhost")
    }

    /// `localhost`, `::1`, or a dotted IPv4 address in 127.0.0.0/8 (RFC 1122 §3.2.1.3).
    private static func isLoopback(_ host: String) -> Bool {
        if isLocalhostName(host) || host == "::1" || host == "0:0:0:0:0:0:0:1" { return true }
        let parts = host.split(separator: ".", omittingEmptySubsequences: false)
        return parts.count == 4 && parts[0] == "127" && parts.allSatisfy { !$0.isEmpty && $0.count <= 3 && $0.allSatisfy { ("0"..."9").contains($0) } }
    }
}

/// A host as the two sides compare it: lowercased, without brackets or one trailing dot.
private func normalizedHost(_ host: String) -> String {
    var h = Substring(host.lowercased())
    if h.first == "[" && h.last == "]" { h = h.dropFirst().dropLast() }
    return String(decoding: withoutTrailingDot(h.utf8), as: UTF8.self)
}
