import Sockets

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
    /// `tunnel_hosts` and `deny_addresses`: where `other_hosts: tunnel` may go.
    public var egress = EgressPolicy()
    public init(caCertFile: String, caKeyFile: String) {
        self.caCertFile = caCertFile
        self.caKeyFile = caKeyFile
    }
}

extension ForwardProxyConfiguration {
    static let keys = ["ca_cert_file", "ca_key_file", "leaf_lifetime", "other_hosts"] + EgressPolicy.keys
    /// CONTRACT.md: a host certificate lives at least 2 h.
    static let shortestLeafLifetime: Double = 2 * 3600

    /// `forward_proxy:`. `storePath`: the top-level `store.path`, whose folder keeps a CA made at the first start.
    static func parse(_ s: YAMLSection, storePath: String, in load: LoadContext) -> ForwardProxyConfiguration? {
        load.found.collect { try s.rejectUnknownKeys(keys) }
        let folder = AtomicFile.parentFolder(of: storePath)
        var forward = ForwardProxyConfiguration(caCertFile: folder + "/forward-proxy-ca.pem", caKeyFile: folder + "/forward-proxy-ca-key.pem")
        let cert = load.found.collect { try load.laterFile(s, "ca_cert_file") }
        let key = load.found.collect { try load.privateKeyFile(s, "ca_key_file", mustExist: false) }
        switch (cert, key) {
        case (let cert?, let key?):
            forward.caCertFile = cert
            forward.caKeyFile = key
            forward.caConfigured = true
        case (nil, nil):
            break
        case (_?, nil):
            if !s.has("ca_key_file") {
                load.found.record(ConfigurationError(keyPath: s.path("ca_key_file"), reason: "required with ca_cert_file: the CA's private key (PEM)"))
            }
        case (nil, _?):
            if !s.has("ca_cert_file") {
                load.found.record(ConfigurationError(keyPath: s.path("ca_cert_file"), reason: "required with ca_key_file: the CA's certificate (PEM)"))
            }
        }
        load.found.collect {
            guard let lifetime = try s.duration("leaf_lifetime") else { return }
            guard lifetime >= shortestLeafLifetime else {
                throw ConfigurationError(
                    keyPath: s.path("leaf_lifetime"), reason: "must be at least 2h (host certificates are renewed with a quarter of it left)")
            }
            forward.leafLifetime = lifetime
        }
        if let choice = load.found.collect({ try s.choice("other_hosts", OtherHosts.self) }) { forward.otherHosts = choice }
        forward.egress = EgressPolicy.parse(s, otherHosts: forward.otherHosts, in: load)
        return forward
    }
}
