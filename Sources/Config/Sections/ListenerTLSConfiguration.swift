/// `tls:` of a listener (CONTRACT.md "HTTPS for clients"): at the top for `listen`, or in a route
/// with its own `match.listen`. The listener then speaks TLS 1.2 and 1.3 with ALPN http/1.1.
public struct ListenerTLSConfiguration: Sendable, Equatable {
    /// Absolute paths. The pair is read again when either file changes (new handshakes only).
    public var certFile: String
    public var keyFile: String
    /// Set: a client certificate signed by this CA is required (mTLS).
    public var clientCAFile: String? = nil
    public init(certFile: String, keyFile: String) {
        self.certFile = certFile
        self.keyFile = keyFile
    }
}

extension ListenerTLSConfiguration {
    static let keys = ["cert_file", "key_file", "client_ca_file"]

    /// `tls:` at the top or in a route. The files must be readable now; the key file must not be
    /// readable by group or others (CONTRACT.md "HTTPS for clients": refused by `check` and `serve`).
    static func parse(_ s: YAMLSection, in load: LoadContext) -> ListenerTLSConfiguration? {
        load.found.collect { try s.rejectUnknownKeys(keys) }
        let certFile = load.found.collect { () throws -> String? in
            guard let path = try load.existingFile(s, "cert_file") else {
                throw ConfigurationError(keyPath: s.path("cert_file"), reason: "required when tls: is present: the certificate chain (PEM)")
            }
            return path
        }
        let keyFile = load.found.collect { () throws -> String? in
            guard let path = try load.privateKeyFile(s, "key_file") else {
                throw ConfigurationError(keyPath: s.path("key_file"), reason: "required when tls: is present: the certificate's private key (PEM)")
            }
            return path
        }
        let clientCAFile = load.found.collect { try load.existingFile(s, "client_ca_file") }
        guard let certFile, let keyFile else { return nil }
        var tls = ListenerTLSConfiguration(certFile: certFile, keyFile: keyFile)
        tls.clientCAFile = clientCAFile
        return tls
    }
}
