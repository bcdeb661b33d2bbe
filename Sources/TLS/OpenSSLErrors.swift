internal import COpenSSL

/// OpenSSL's per-thread error queue, read as numbers (library, reason) and never as text.
enum OpenSSLErrors {
    /// The oldest error on this thread's queue; empties the queue so that no stale entry misleads
    /// the next call on this thread.
    static func takeOldest() -> (library: Int32, reason: Int32) {
        let code = ERR_get_error()
        ERR_clear_error()
        return (ERR_GET_LIB(code), ERR_GET_REASON(code))
    }

    static func setup(_ call: String) -> TLSSetupError {
        let (library, reason) = takeOldest()
        return .openSSL(call: call, library: library, reason: reason)
    }

    /// What an SSL_ERROR_SSL means for the session, by OpenSSL's reason code; nil: the peer ended the
    /// connection without close_notify (OpenSSL 3 reports that as an error; HTTP/1.1 frames its own
    /// messages, so a truncation is seen there).
    static func failure(library: Int32, reason: Int32) -> TLSFailure? {
        guard library == ERR_LIB_SSL else { return .protocolError(library: library, reason: reason) }
        switch reason {
        case SSL_R_UNEXPECTED_EOF_WHILE_READING: return nil
        case SSL_R_UNSUPPORTED_PROTOCOL, SSL_R_TLSV1_ALERT_PROTOCOL_VERSION: return .noSharedVersion
        case SSL_R_NO_SHARED_CIPHER: return .noSharedCipher
        case SSL_R_NO_APPLICATION_PROTOCOL: return .noApplicationProtocol
        case SSL_R_PEER_DID_NOT_RETURN_A_CERTIFICATE: return .clientCertificateMissing
        case SSL_R_CERTIFICATE_VERIFY_FAILED: return .clientCertificateRejected
        case SSL_R_TLSV1_ALERT_UNKNOWN_CA, SSL_R_SSLV3_ALERT_BAD_CERTIFICATE, SSL_R_SSLV3_ALERT_CERTIFICATE_UNKNOWN:
            return .certificateRefusedByClient
        case SSL_R_HTTP_REQUEST, SSL_R_HTTPS_PROXY_REQUEST, SSL_R_WRONG_VERSION_NUMBER: return .notTLS
        default: return .protocolError(library: library, reason: reason)
        }
    }
}
