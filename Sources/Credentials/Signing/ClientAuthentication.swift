import Config
import FoundationEssentials
import IdentityHTTP
import Logs
import Synchronization

/// How every token request of the oauth2_* types authenticates the client (`client_auth`,
/// CONTRACT.md "Secretless credentials"): the same for the login, refresh, client_credentials,
/// device, jwt-bearer, token-exchange and revocation calls.
final class ClientAuthentication {
    enum Method {
        /// RFC 6749 §2.3.1: Basic with the form-encoded id and secret; without a secret, client_id in the form.
        case basic
        /// RFC 6749 §2.3.1: client_id and client_secret in the form.
        case post
        /// RFC 7523 §2.2: private_key_jwt (RSA or EC key) or client_secret_jwt (HS256 with the secret).
        case signed(KeyFile?, hmac: SigningKey?)
        /// A ready JWT read from a file for every request (a projected service-account token).
        case assertion(WatchedFile)
        /// RFC 8705 §2: the client is the TLS client certificate; client_id in the form.
        case tls(certificate: String, key: String)
        /// A public client: client_id in the form.
        case none
    }

    static let assertionType = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"

    let clientID: String?
    let secret: String?
    let method: Method
    let audience: String?
    var now: () -> Double = { Date().timeIntervalSince1970 }

    /// `client_auth` as the loader checked it: each method comes with what it needs.
    init(_ configuration: ClientAuthenticationConfiguration, clientID: String?, secret: String?) throws {
        self.clientID = clientID
        self.secret = secret
        switch configuration {
        case .basic:
            method = .basic
            audience = nil
        case .post:
            method = .post
            audience = nil
        case .none:
            method = .none
            audience = nil
        case .privateKeyJWT(let key, let assertionAudience):
            method = .signed(try KeyFile(key.path, algorithm: key.algorithm, keyID: key.keyID, keyPath: "credentials.client_key_file"), hmac: nil)
            audience = assertionAudience
        case .clientSecretJWT(let clientSecret, let assertionAudience):
            method = .signed(nil, hmac: SigningKey.hmac(secret: clientSecret.value))
            audience = assertionAudience
        case .clientAssertion(let path):
            method = .assertion(WatchedFile(path, keyPath: "credentials.client_assertion_file"))
            audience = nil
        case .tlsClientAuth(let certificate, let key):
            method = .tls(certificate: certificate, key: key)
            audience = nil
        }
        guard clientID != nil || { if case .basic = method { return true } else { return false } }() else {
            throw ConfigurationError(keyPath: "credentials.client_id", reason: "required for client_auth: \(configuration.method.rawValue)")
        }
    }

    /// Adds what authenticates the client to a request for `tokenEndpoint` (the default `aud` of a
    /// signed assertion, whatever endpoint the request goes to: OpenID Connect Core §9).
    func apply(form: inout [(String, String)], headers: inout [String], request: inout HTTPCallRequest, tokenEndpoint: String) throws {
        switch method {
        case .basic:
            if let secret, let clientID {
                let pair = FormEncoding.encode(clientID) + ":" + FormEncoding.encode(secret)
                let encoded = Data(pair.utf8).base64EncodedString()
                registerSecret(encoded)
                headers.append("Authorization: Basic \(encoded)")
            } else if let clientID {
                form.append(("client_id", clientID))
            }
        case .post:
            if let clientID { form.append(("client_id", clientID)) }
            if let secret { form.append(("client_secret", secret)) }
        case .signed(let file, let hmac):
            let key = try hmac ?? file!.current()
            let jwt = try ClientAssertionClaims.sign(clientID: clientID!, audience: audience ?? tokenEndpoint, key: key, now: now())
            registerSecret(jwt)
            form += [("client_id", clientID!), ("client_assertion_type", Self.assertionType), ("client_assertion", jwt)]
        case .assertion(let file):
            let jwt = try file.read()
            try Self.checkAssertion(jwt, path: file.path, now: now())
            form += [("client_id", clientID!), ("client_assertion_type", Self.assertionType), ("client_assertion", jwt)]
        case .tls(let certificate, let key):
            form.append(("client_id", clientID!))
            request.clientCertificateFile = certificate
            request.clientKeyFile = key
        case .none:
            form.append(("client_id", clientID!))
        }
    }

    /// A ready assertion must be a JWT whose `exp`, when it has one, is still ahead: an expired one
    /// is refused here, counted, and never sent (the identity provider would only refuse it).
    static func checkAssertion(_ jwt: String, path: String, now: Double) throws {
        guard let claims = JWT.claims(of: jwt) else {
            AssertionMetrics.shared.refused(.notJWT)
            throw TokenSourceError.passing("the assertion in \(path) is not a JWT (header.payload.signature); not sent")
        }
        if let exp = claims.expiresAt, exp <= now {
            AssertionMetrics.shared.refused(.expired)
            throw TokenSourceError.passing(
                "the assertion in \(path) expired \(Int(now - exp)) s ago; not sent (is the projected token still being renewed?)")
        }
    }
}

/// Assertions read from files that were refused before sending, for
/// `tokenproxy_assertions_refused_total{reason}`.
public final class AssertionMetrics: Sendable {
    public enum Reason: String, Sendable, CaseIterable {
        case expired
        case notJWT = "not_jwt"
    }
    public static let shared = AssertionMetrics()
    private let counts = Mutex(LabeledCounts<Reason>())

    func refused(_ reason: Reason) { counts.withLock { $0.increment(reason) } }

    public func count(_ reason: Reason) -> UInt64 { counts.withLock { $0[reason] } }

    /// One count for the process (the files are read by whichever route names them).
    public func collect(into registry: inout MetricRegistry) {
        counts.withLock { $0 }.collect(MetricCatalog.assertionsRefusedTotal, as: "reason", into: &registry)
    }
}
