import Sockets

/// What one step of a non-blocking TLS operation achieved, for an epoll loop to act on: `wantRead` and
/// `wantWrite` say which readiness to wait for before calling the same operation again.
public enum TLSStep: Equatable, Sendable {
    case done
    case wantRead
    case wantWrite
    /// The peer closed: close_notify, or the socket ended (before a ClientHello, this is no failed handshake).
    case closed
    case failed(TLSFailure)
}

/// The same for `read(into:)` and `write(_:)`: `done` carries the byte count.
public enum TLSTransfer: Equatable, Sendable {
    case done(Int)
    case wantRead
    case wantWrite
    case closed
    case failed(TLSFailure)
}

/// Why a handshake or a session failed, typed so that no decision reads a message text.
public enum TLSFailure: Error, Equatable, Sendable, CustomStringConvertible {
    /// The SNI hook refused the name (RFC 6066 §3: a fatal unrecognized_name alert).
    case serverNameRefused(String?)
    /// The client offers only versions below TLS 1.2 (RFC 8446 §4.2.1, RFC 8996).
    case noSharedVersion
    case noSharedCipher
    /// The client's ALPN list lacks http/1.1 (RFC 7301 §3.2: no_application_protocol).
    case noApplicationProtocol
    /// mTLS: the client sent no certificate, or one the client CA does not vouch for.
    case clientCertificateMissing
    case clientCertificateRejected
    /// The client refused our certificate (an alert such as unknown_ca: it does not trust the CA).
    case certificateRefusedByClient
    /// The bytes are no TLS record: plain HTTP on a TLS port, or noise.
    case notTLS
    /// The pair the SNI hook chose could not be used (its key does not match its certificate).
    case certificateUnusable
    /// Anything else OpenSSL reports, by its library and reason numbers (ERR_GET_LIB, ERR_GET_REASON).
    case protocolError(library: Int32, reason: Int32)

    public var description: String {
        switch self {
        case .serverNameRefused(let name): "server name refused: \(name ?? "(no SNI)")"
        case .noSharedVersion: "no shared TLS version (TLS 1.2 or 1.3 required)"
        case .noSharedCipher: "no shared cipher"
        case .noApplicationProtocol: "the client's ALPN list lacks http/1.1"
        case .clientCertificateMissing: "no client certificate"
        case .clientCertificateRejected: "client certificate not signed by client_ca_file"
        case .certificateRefusedByClient: "the client refused the certificate"
        case .notTLS: "not TLS (plain HTTP?)"
        case .certificateUnusable: "the certificate chosen for the server name is unusable"
        case .protocolError(let library, let reason): "TLS error (library \(library), reason \(reason))"
        }
    }
}

/// A TLS context or certificate that could not be set up, with the file it concerns.
public enum TLSSetupError: Error, Equatable, Sendable, CustomStringConvertible {
    case unreadableFile(path: String, errno: Int32?)
    /// A private key file that `KeyFilePermissions` refuses (its mode and owner in the description).
    case keyFileNotPrivate(path: String, permissions: KeyFilePermissions)
    case noCertificate(path: String)
    case noPrivateKey(path: String)
    case keyDoesNotMatchCertificate(certificatePath: String, keyPath: String)
    case unusableClientCA(path: String)
    /// Only one of a CA's two files exists.
    case incompleteAuthority(missing: String)
    case invalidHostName(String)
    /// An OpenSSL call failed; `call` names it.
    case openSSL(call: String, library: Int32, reason: Int32)
    case cannotWrite(path: String, reason: String)
    /// A CA file whose certificate is not a CA's (basicConstraints CA:TRUE, RFC 5280 §4.2.1.9).
    case notAnAuthority(path: String)

    public var description: String {
        switch self {
        case .unreadableFile(let path, let errno): "\(path): cannot be read" + (errno.map { " (errno \($0))" } ?? "")
        case .keyFileNotPrivate(let path, let permissions): permissions.reason(for: path) ?? "\(path): accepted"
        case .noCertificate(let path): "\(path): no PEM certificate"
        case .noPrivateKey(let path): "\(path): no PEM private key (or one protected by a passphrase)"
        case .keyDoesNotMatchCertificate(let certificatePath, let keyPath): "\(keyPath) is not the key of \(certificatePath)"
        case .unusableClientCA(let path): "\(path): no usable CA certificate"
        case .incompleteAuthority(let missing): "\(missing) is missing (a CA needs both its certificate and its key)"
        case .invalidHostName(let name): "\(name): not a host name or IP address a certificate can name"
        case .openSSL(let call, let library, let reason): "\(call) failed (OpenSSL library \(library), reason \(reason))"
        case .cannotWrite(let path, let reason): "\(path): cannot be written (\(reason))"
        case .notAnAuthority(let path): "\(path): not a CA certificate (basicConstraints CA:TRUE)"
        }
    }
}

public enum TLSVersion: Equatable, Sendable {
    case tls12
    case tls13
}
