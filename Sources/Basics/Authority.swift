/// A host and port as a URL's authority and a Host field write them (RFC 3986 §3.2.2: an IPv6
/// literal goes in brackets), and the default ports of http and https (RFC 9110 §4.2.1, §4.2.2).
/// Reading one is in AuthorityParsing.swift; the URL schemes are below.
public struct Authority: Sendable, Equatable, CustomStringConvertible {
    /// Without brackets: an IPv6 literal is the one host with colons.
    public var host: String
    public var port: Int

    @inlinable
    public init(host: String, port: Int) {
        self.host = host
        self.port = port
    }

    /// `host` as it goes before a `:port`: in brackets when it is an IPv6 literal.
    @inlinable
    public static func bracketed(_ host: String) -> String {
        host.utf8.contains(UInt8(ascii: ":")) ? "[\(host)]" : host
    }

    /// 443 for https; 80 for http, for no scheme (an origin-form request target) and for any other.
    @inlinable
    public static func defaultPort(scheme: String?) -> Int {
        guard let scheme, URLScheme(scheme) == .https else { return URLScheme.http.defaultPort }
        return URLScheme.https.defaultPort
    }

    /// `host:port`, `[v6]:port`.
    public var description: String { "\(Self.bracketed(host)):\(port)" }

    /// A Host field's value (RFC 9110 §7.2): without the port when it is `scheme`'s default.
    public func omittingDefaultPort(of scheme: String) -> String {
        port == Self.defaultPort(scheme: scheme) ? Self.bracketed(host) : description
    }
}

/// The URL schemes the proxy reads, compared ASCII case aside (RFC 3986 §3.1): http and https
/// (RFC 9110 §4.2.1, §4.2.2) for upstreams, identity providers and proxy variables; redis and
/// rediss (their IANA registrations) for the fleet store.
public enum URLScheme: String, Sendable, CaseIterable {
    case http, https, redis, rediss

    /// `text` as one of these schemes, ASCII case aside; nil for any other.
    public init?<S: StringProtocol>(_ text: S) {
        guard let known = Self.allCases.first(where: { asciiCaseInsensitiveEquals($0.rawValue.utf8, text.utf8) }) else { return nil }
        self = known
    }

    /// The port an authority without one means.
    @inlinable
    public var defaultPort: Int {
        switch self {
        case .http: 80
        case .https: 443
        case .redis, .rediss: 6379
        }
    }

    /// Whether the connection is TLS.
    @inlinable
    public var isTLS: Bool {
        switch self {
        case .http, .redis: false
        case .https, .rediss: true
        }
    }

    /// `url`'s scheme as written and what follows its `://` (RFC 3986 §3); nil without `://`.
    public static func split(_ url: Substring) -> (scheme: Substring, rest: Substring)? {
        guard let separator = url.firstRange(of: "://") else { return nil }
        return (url[..<separator.lowerBound], url[separator.upperBound...])
    }
}
