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
