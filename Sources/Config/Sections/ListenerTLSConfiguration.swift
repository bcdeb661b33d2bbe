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
