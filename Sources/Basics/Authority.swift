/// A host and port as a URL's authority and a Host field write them (RFC 3986 §3.2.2: an IPv6
/// literal goes in brackets), and the default ports of http and https (RFC 9110 §4.2.1, §4.2.2).
/// Reading one is in AuthorityParsing.swift.
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
