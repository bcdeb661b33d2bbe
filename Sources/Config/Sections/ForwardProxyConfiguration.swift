/// `forward_proxy:` (CONTRACT.md "HTTPS for clients"): CONNECT to a `host` route's name is answered
/// and the proxy ends TLS itself with a certificate for that host signed by this CA.
public struct ForwardProxyConfiguration: Sendable, Equatable {
    /// What a CONNECT to a host that no route names gets.
    public enum OtherHosts: String, Sendable, Equatable, CaseIterable {
        /// 403 `forbidden_target`.
        case refuse
        /// Bytes both ways to the host's port 443, untouched (no TLS ends in the proxy).
        case tunnel
    }
    /// Absolute paths of the CA pair; when the file names neither, the made CA's place:
    /// `forward-proxy-ca.pem` and `forward-proxy-ca-key.pem` in the folder of `store.path`.
    public var caCertFile: String
    public var caKeyFile: String
    /// Whether the file named the pair (false: made at the first start when absent).
    public var caConfigured: Bool = false
    /// Seconds; at least 2 h (default 24 h).
    public var leafLifetime: Double = 24 * 3600
    public var otherHosts: OtherHosts = .refuse
    public init(caCertFile: String, caKeyFile: String) {
        self.caCertFile = caCertFile
        self.caKeyFile = caKeyFile
    }
}
