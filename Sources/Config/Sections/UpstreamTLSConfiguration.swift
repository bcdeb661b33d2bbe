import Basics

/// `upstream_tls:` (CONTRACT.md "The configuration file"): how the proxy verifies the upstream and
/// authenticates to it.
public struct UpstreamTLSConfiguration: Sendable, Equatable {
    public var caFile: String? = nil
    public var clientCertFile: String? = nil
    public var clientKeyFile: String? = nil
    public var insecureSkipVerify: Bool = false
    public init() {}
}

extension UpstreamTLSConfiguration {
    static func parse(_ s: YAMLSection, upstream: UpstreamURL?, in load: LoadContext) -> UpstreamTLSConfiguration {
        load.found.collect { try s.rejectUnknownKeys(Keys.sections["upstream_tls"]!) }
        var tls = UpstreamTLSConfiguration()
        tls.caFile = load.found.collect { try load.laterFile(s, "ca_file") }
        tls.clientCertFile = load.found.collect { try load.laterFile(s, "client_cert_file") }
        tls.clientKeyFile = load.found.collect { try load.privateKeyFile(s, "client_key_file", mustExist: false) }
        if tls.clientKeyFile != nil, tls.clientCertFile == nil, !s.has("client_cert_file") {
            load.found.record(ConfigurationError(keyPath: "upstream_tls.client_cert_file", reason: "required when client_key_file is set"))
        }
        tls.insecureSkipVerify = load.found.collect { try s.bool("insecure_skip_verify") } ?? false
        if tls.insecureSkipVerify {
            load.warnings.append("upstream_tls.insecure_skip_verify: the upstream's TLS certificate is not verified; use this only for tests")
        }
        if upstream?.urlScheme == .http, !s.presentKeys.isEmpty {
            load.warnings.append("upstream_tls: not used, the upstream is http")
        }
        return tls
    }
}
