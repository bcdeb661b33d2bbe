internal import COpenSSL

/// One server-side TLS connection, driven by an event loop over a non-blocking socket: each call does
/// what it can without blocking and says which readiness to wait for (`wantRead`, `wantWrite`).
///
/// OpenSSL reads and writes the socket itself (SSL_set_fd) rather than through memory BIOs: one copy
/// and one system call per record instead of two copies and a pump between buffers, and no
/// second buffer per connection. Its socket writes use write(2), not send with MSG_NOSIGNAL, so the
/// process must ignore SIGPIPE (tokenproxy does, in main.swift).
///
/// Reads: after `done`, read again until `wantRead` before waiting for epoll; OpenSSL may hold
/// decrypted bytes that the socket no longer shows (docs/ENGINE.md, "Bytes on the wire").
/// Writes: after `wantWrite`, call `write` again with the same bytes (they may have moved).
/// Not thread-safe: one thread drives a session.
public final class TLSSession {
    let ssl: OpaquePointer
    /// The socket; the caller owns it and closes it after the session is done with.
    public let fd: Int32
    private let serverNameHook: ServerNameHook?
    /// A refusal decided in a callback, reported instead of OpenSSL's generic "callback failed".
    private var refusal: TLSFailure?
    /// After a fatal error no close_notify may be sent (SSL_shutdown(3)).
    private var broken = false

    init(context: OpaquePointer, fd: Int32, pair: CertificatePair, serverNameHook: ServerNameHook?) throws(TLSSetupError) {
        guard let ssl = SSL_new(context) else { throw OpenSSLErrors.setup("SSL_new") }
        self.ssl = ssl
        self.fd = fd
        self.serverNameHook = serverNameHook
        SSL_set_accept_state(ssl)
        guard SSL_set_fd(ssl, fd) == 1 else { throw OpenSSLErrors.setup("SSL_set_fd") }
        guard use(pair) else { throw OpenSSLErrors.setup("SSL_use_cert_and_key") }
        _ = tp_ssl_set_app_data(ssl, Unmanaged.passUnretained(self).toOpaque())
    }

    deinit { SSL_free(ssl) }

    /// The session an OpenSSL callback is about (set in init; the session outlives its SSL).
    static func of(_ ssl: OpaquePointer) -> TLSSession? {
        tp_ssl_get_app_data(ssl).map { Unmanaged<TLSSession>.fromOpaque($0).takeUnretainedValue() }
    }

    private func use(_ pair: CertificatePair) -> Bool {
        SSL_use_cert_and_key(ssl, pair.certificate, pair.key, pair.chain, 1) == 1
    }

    /// The SNI callback's work (RFC 6066 §3): ask the hook, switch the pair, or refuse.
    func chooseCertificate(alert: UnsafeMutablePointer<Int32>?) -> Int32 {
        guard let serverNameHook else { return SSL_TLSEXT_ERR_OK }
        let name = serverName
        switch serverNameHook(name) {
        case .useDefault:
            return SSL_TLSEXT_ERR_OK
        case .use(let pair):
            if use(pair) { return SSL_TLSEXT_ERR_OK }
            refusal = .certificateUnusable
            alert?.pointee = SSL_AD_INTERNAL_ERROR
            return SSL_TLSEXT_ERR_ALERT_FATAL
        case .refuse:
            refusal = .serverNameRefused(name)
            alert?.pointee = SSL_AD_UNRECOGNIZED_NAME
            return SSL_TLSEXT_ERR_ALERT_FATAL
        }
    }

    public func handshake() -> TLSStep {
        ERR_clear_error()
        let result = SSL_do_handshake(ssl)
        if result == 1 { return .done }
        return outcome(of: result)
    }

    /// Decrypted bytes into `buffer`; `closed` at the peer's close_notify or end of the socket.
    public func read(into buffer: UnsafeMutableRawBufferPointer) -> TLSTransfer {
        guard buffer.count > 0 else { return .done(0) }
        return transfer { SSL_read_ex(ssl, buffer.baseAddress, buffer.count, $0) }
    }

    /// Encrypts and sends bytes; `done(n)` may be short of the whole (partial writes are on).
    public func write(_ bytes: UnsafeRawBufferPointer) -> TLSTransfer {
        guard bytes.count > 0 else { return .done(0) }
        return transfer { SSL_write_ex(ssl, bytes.baseAddress, bytes.count, $0) }
    }

    /// One SSL_read_ex or SSL_write_ex, which answers 1 and the byte count on success.
    @inline(__always)
    private func transfer(_ call: (UnsafeMutablePointer<Int>) -> Int32) -> TLSTransfer {
        ERR_clear_error()
        var count = 0
        let result = call(&count)
        if result == 1 { return .done(count) }
        return TLSTransfer(outcome(of: result))
    }

    /// Sends close_notify (RFC 8446 §6.1). It does not wait for the peer's: the caller closes the
    /// socket after `done` (a peer's close_notify is not required before closing).
    public func shutdown() -> TLSStep {
        if broken { return .closed }
        ERR_clear_error()
        let result = SSL_shutdown(ssl)
        if result >= 0 { return .done }
        return outcome(of: result)
    }

    /// True when OpenSSL holds decrypted bytes not yet read.
    public var hasBufferedInput: Bool { SSL_pending(ssl) > 0 }

    /// The SNI host name of the ClientHello (RFC 6066 §3), once it has arrived.
    public var serverName: String? {
        SSL_get_servername(ssl, Int32(TLSEXT_NAMETYPE_host_name)).map { String(cString: $0) }
    }

    /// The protocol ALPN chose (always "http/1.1" when the client offered ALPN), nil without ALPN.
    public var applicationProtocol: String? {
        var data: UnsafePointer<UInt8>?
        var length: UInt32 = 0
        SSL_get0_alpn_selected(ssl, &data, &length)
        guard let data, length > 0 else { return nil }
        return String(decoding: UnsafeBufferPointer(start: data, count: Int(length)), as: UTF8.self)
    }

    /// The subject of the certificate the client presented and the context verified (a listener
    /// with `client_ca_file`), as RFC 2253 writes a distinguished name (`CN=agent-1,O=Example`); nil
    /// without one. For the audit log's `client`.
    public var peerSubject: String? {
        guard let certificate = SSL_get1_peer_certificate(ssl) else { return nil }
        defer { X509_free(certificate) }
        guard let name = X509_get_subject_name(certificate), let bio = BIO_new(BIO_s_mem()) else { return nil }
        defer { BIO_free(bio) }
        guard tp_x509_name_print_rfc2253(bio, name) >= 0 else { return nil }
        var data: UnsafeMutablePointer<CChar>?
        let length = tp_bio_mem_data(bio, &data)
        guard let data, length > 0 else { return nil }
        return String(decoding: UnsafeRawBufferPointer(start: data, count: length), as: UTF8.self)
    }

    /// The negotiated version, after the handshake.
    public var version: TLSVersion? {
        switch SSL_version(ssl) {
        case TLS1_3_VERSION: .tls13
        case TLS1_2_VERSION: .tls12
        default: nil
        }
    }

    /// Why a call that answered `result` (not success) stopped: never `done`.
    private func outcome(of result: Int32) -> TLSStep {
        switch SSL_get_error(ssl, result) {
        case SSL_ERROR_WANT_READ:
            return .wantRead
        case SSL_ERROR_WANT_WRITE:
            return .wantWrite
        case SSL_ERROR_ZERO_RETURN:
            return .closed
        case SSL_ERROR_SYSCALL:
            // The socket ended or broke (EOF, ECONNRESET, EPIPE): a closed connection.
            broken = true
            ERR_clear_error()
            return .closed
        case SSL_ERROR_SSL:
            broken = true
            let (library, reason) = OpenSSLErrors.takeOldest()
            if let refusal { return .failed(refusal) }
            return OpenSSLErrors.failure(library: library, reason: reason).map { .failed($0) } ?? .closed
        case let other:
            // WANT_X509_LOOKUP and the like need callbacks this module does not install.
            broken = true
            ERR_clear_error()
            return .failed(.protocolError(library: 0, reason: other))
        }
    }
}

extension TLSTransfer {
    /// A read or write that stopped as `outcome(of:)` says.
    fileprivate init(_ step: TLSStep) {
        switch step {
        case .done: preconditionFailure("a stopped transfer is never done")
        case .wantRead: self = .wantRead
        case .wantWrite: self = .wantWrite
        case .closed: self = .closed
        case .failed(let failure): self = .failed(failure)
        }
    }
}
