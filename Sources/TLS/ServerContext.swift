internal import COpenSSL
import Sockets

/// What an SNI hook answers for the server name of a ClientHello (RFC 6066 §3; nil: no SNI).
public enum ServerNameDecision: Sendable {
    /// The context's current certificate pair.
    case useDefault
    case use(CertificatePair)
    /// Fail the handshake with a fatal unrecognized_name alert (RFC 6066 §3).
    case refuse
}

/// Chooses the certificate for a server name. Runs on the thread that drives the session, inside
/// `handshake()`; it must not block (minting a leaf, about a millisecond, is fine).
public typealias ServerNameHook = (String?) -> ServerNameDecision

/// A TLS server's settings, shared by every connection of a listener and by every thread: TLS 1.2
/// and 1.3 only (RFC 8446, RFC 5246; older versions are deprecated by RFC 8996), ALPN offering
/// http/1.1 (RFC 7301), a certificate pair that can be replaced while connections live, and
/// optionally client certificates required against a CA (mTLS).
// @unchecked: the SSL_CTX is configured in init and only read after (OpenSSL allows SSL_new from any
// thread); the current pair is read and replaced under `lock`.
public final class TLSServerContext: @unchecked Sendable {
    let context: OpaquePointer
    private let lock = OSCondition()
    private var currentPair: CertificatePair
    /// True when a client certificate signed by `client_ca_file` is required.
    public let requiresClientCertificate: Bool

    public init(certificate: CertificatePair, clientCAFile: String? = nil) throws(TLSSetupError) {
        guard let context = SSL_CTX_new(TLS_server_method()) else { throw OpenSSLErrors.setup("SSL_CTX_new") }
        self.context = context
        currentPair = certificate
        requiresClientCertificate = clientCAFile != nil
        guard tp_ssl_ctx_set_versions(context, TLS1_2_VERSION, TLS1_3_VERSION) == 1 else {
            throw OpenSSLErrors.setup("SSL_CTX_set_min_proto_version")
        }
        tp_ssl_ctx_set_server_options(context)
        // Resumed sessions must come from this listener's clients (a session id context is required
        // with client verification, SSL_CTX_set_session_id_context(3)).
        let sessionContext: [UInt8] = Array("tokenproxy".utf8)
        _ = SSL_CTX_set_session_id_context(context, sessionContext, UInt32(sessionContext.count))
        SSL_CTX_set_alpn_select_cb(
            context,
            { _, selected, selectedLength, offered, offeredLength, _ in
                guard let selected, let selectedLength, let offered,
                    let start = ALPN.offsetOfHTTP11(in: UnsafeRawBufferPointer(start: offered, count: Int(offeredLength)))
                else { return SSL_TLSEXT_ERR_ALERT_FATAL }  // RFC 7301 §3.2: no_application_protocol
                selected.pointee = offered + start
                selectedLength.pointee = UInt8(ALPN.http11.count)
                return SSL_TLSEXT_ERR_OK
            }, nil)
        _ = tp_ssl_ctx_set_servername_cb(context) { ssl, alert, _ in
            guard let ssl, let session = TLSSession.of(ssl) else { return SSL_TLSEXT_ERR_OK }
            return session.chooseCertificate(alert: alert)
        }
        if let clientCAFile { try requireClientCertificates(signedBy: clientCAFile) }
    }

    /// The same, with the pair read from PEM files (`CertificatePair.load`).
    public convenience init(certificateFile: String, keyFile: String, clientCAFile: String? = nil) throws(TLSSetupError) {
        try self.init(certificate: CertificatePair.load(certificateFile: certificateFile, keyFile: keyFile), clientCAFile: clientCAFile)
    }

    deinit { SSL_CTX_free(context) }

    /// The pair new handshakes use.
    public var certificate: CertificatePair {
        lock.lock()
        defer { lock.unlock() }
        return currentPair
    }

    /// New handshakes use `pair`; sessions made before keep the pair they started with.
    public func replaceCertificate(_ pair: CertificatePair) {
        lock.lock()
        currentPair = pair
        lock.unlock()
    }

    /// Reads the pair again from its files (for a watcher that saw them change); on an error the
    /// current pair stays.
    public func reloadCertificate(certificateFile: String, keyFile: String) throws(TLSSetupError) {
        replaceCertificate(try CertificatePair.load(certificateFile: certificateFile, keyFile: keyFile))
    }

    /// A server session on `fd`, an accepted non-blocking socket the caller keeps owning (and closes
    /// after the session). `pair`: the session's certificate instead of the context's (the forward
    /// proxy's leaf for the CONNECT host); `serverName`, when given, chooses the certificate by SNI.
    public func makeSession(fd: Int32, pair: CertificatePair? = nil, serverName: ServerNameHook? = nil) throws(TLSSetupError) -> TLSSession {
        try TLSSession(context: context, fd: fd, pair: pair ?? certificate, serverNameHook: serverName)
    }

    /// RFC 8446 §4.3.2 / RFC 5246 §7.4.4: the server asks for a certificate, names the acceptable CAs,
    /// and fails the handshake when none comes or it does not verify against `path`.
    private func requireClientCertificates(signedBy path: String) throws(TLSSetupError) {
        _ = try CertificatePair.readFile(path)  // a missing or unreadable file says so, with its errno
        guard SSL_CTX_load_verify_locations(context, path, nil) == 1, let names = SSL_load_client_CA_file(path) else {
            ERR_clear_error()
            throw .unusableClientCA(path: path)
        }
        SSL_CTX_set_client_CA_list(context, names)
        SSL_CTX_set_verify(context, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nil)
    }
}
