import Sockets

/// How the oauth2_* types authenticate the client at the token endpoint (`client_auth`, CONTRACT.md
/// "Secretless credentials"), with what each method needs. Paths are resolved; no key file is read
/// here (they are parsed by Credentials, which `check` runs too).
public enum ClientAuthenticationConfiguration: Sendable, Equatable {
    /// RFC 6749 §2.3.1: the client secret (when there is one) in Basic, or in the form.
    case basic, post
    /// A public client: client_id in the form.
    case none
    /// RFC 7523 §2.2 with the client's own key.
    case privateKeyJWT(SigningKeyFile, audience: String?)
    /// RFC 7523 §2.2, HS256 with the client secret.
    case clientSecretJWT(secret: Secret, audience: String?)
    /// A ready JWT read from a file for every request (a projected service-account token).
    case clientAssertion(file: String)
    /// RFC 8705 §2: the client is the TLS client certificate.
    case tlsClientAuth(certificateFile: String, keyFile: String)

    /// The `client_auth` value.
    public var method: CredentialsConfiguration.ClientAuth {
        switch self {
        case .basic: return .basic
        case .post: return .post
        case .none: return .none
        case .privateKeyJWT: return .privateKeyJWT
        case .clientSecretJWT: return .clientSecretJWT
        case .clientAssertion: return .clientAssertion
        case .tlsClientAuth: return .tlsClientAuth
        }
    }
}

/// A private key that signs (`client_key_file`, `client_key_id`, `client_key_alg`).
public struct SigningKeyFile: Sendable, Equatable {
    public var path: String
    public var keyID: String?
    public var algorithm: SigningAlgorithm?
    public init(path: String, keyID: String? = nil, algorithm: SigningAlgorithm? = nil) {
        self.path = path
        self.keyID = keyID
        self.algorithm = algorithm
    }
}

/// The JWS algorithms the proxy signs with (RFC 7518 §3.1).
public enum SigningAlgorithm: String, Sendable, Equatable, CaseIterable {
    case rs256 = "RS256", ps256 = "PS256", es256 = "ES256"
}

public struct DPoPConfiguration: Sendable, Equatable {
    /// An EC P-256 key in PEM; nil: a key is made once and kept in the store.
    public var keyFile: String? = nil
    public init(keyFile: String? = nil) { self.keyFile = keyFile }
}

/// RFC 8693 §3 token type identifiers.
public enum TokenTypeURI {
    public static let jwt = "urn:ietf:params:oauth:token-type:jwt"
    public static let accessToken = "urn:ietf:params:oauth:token-type:access_token"
}

extension Keys {
    static let clientAuth = [
        "client_key_file", "client_key_id", "client_key_alg", "client_assertion_audience", "client_assertion_file", "client_cert_file", "dpop",
    ]
    static let dpop = ["key_file"]
}

/// The `client_*` keys as read, whatever `client_auth` is (each is checked; the ones it does not use
/// are warned about), before they become a `ClientAuthenticationConfiguration`.
struct ClientKeys: Sendable, Equatable {
    var keyFile: String?
    var keyID: String?
    var keyAlg: SigningAlgorithm?
    var assertionAudience: String?
    var assertionFile: String?
    var certFile: String?

    var signingKey: SigningKeyFile? { keyFile.map { SigningKeyFile(path: $0, keyID: keyID, algorithm: keyAlg) } }
}

extension ClientKeys {
    static func parse(_ s: YAMLSection, in load: LoadContext) -> ClientKeys {
        ClientKeys(
            keyFile: load.found.collect { try load.privateKeyFile(s, "client_key_file") },
            keyID: load.found.collect { try s.nonEmptyString("client_key_id") },
            keyAlg: load.found.collect { try s.choice("client_key_alg", SigningAlgorithm.self) },
            assertionAudience: load.found.collect { try s.nonEmptyString("client_assertion_audience") },
            assertionFile: load.found.collect { try load.laterFile(s, "client_assertion_file") },
            certFile: load.found.collect { try load.existingFile(s, "client_cert_file") })
    }
}

extension DPoPConfiguration {
    static func parse(_ s: YAMLSection, in load: LoadContext) -> DPoPConfiguration? {
        load.found.collect {
            guard let section = try s.section("dpop") else { return nil }
            try section.rejectUnknownKeys(Keys.dpop)
            return DPoPConfiguration(keyFile: try load.privateKeyFile(section, "key_file"))
        }
    }
}

extension ClientKeys {
    /// Keys of one client_auth left beside another: a warning, as for keys of another type.
    /// `signsGrant`: the key signs oauth2_jwt_bearer's assertion, so it is used whatever client_auth is.
    func warnUnused(_ method: CredentialsConfiguration.ClientAuth, signsGrant: Bool, in load: LoadContext) {
        let unused: [(String, Bool)] = [
            ("client_key_file", keyFile != nil && ![.privateKeyJWT, .tlsClientAuth].contains(method) && !signsGrant),
            ("client_key_id", keyID != nil && method != .privateKeyJWT && !signsGrant),
            ("client_key_alg", keyAlg != nil && method != .privateKeyJWT && !signsGrant),
            ("client_assertion_audience", assertionAudience != nil && ![.privateKeyJWT, .clientSecretJWT].contains(method)),
            ("client_assertion_file", assertionFile != nil && method != .clientAssertion),
            ("client_cert_file", certFile != nil && method != .tlsClientAuth),
        ]
        for (key, isUnused) in unused where isUnused {
            load.warnings.append("credentials.\(key): not used with client_auth: \(method.rawValue)")
        }
    }
}

extension ClientAuthenticationConfiguration {
    /// The method `client_auth` names with what it needs; nil (and the missing key recorded) when a key is missing.
    static func make(_ method: CredentialsConfiguration.ClientAuth, _ x: ClientKeys, secret: Secret?, in load: LoadContext)
        -> ClientAuthenticationConfiguration?
    {
        func missing(_ key: String, _ why: String) -> ClientAuthenticationConfiguration? {
            load.found.record(ConfigurationError(keyPath: "credentials.\(key)", reason: "required \(why)"))
            return nil
        }
        switch method {
        case .basic: return .basic
        case .post: return .post
        case .none: return ClientAuthenticationConfiguration.none
        case .privateKeyJWT:
            guard let key = x.signingKey else { return missing("client_key_file", "for client_auth: private_key_jwt (the PEM key that signs)") }
            return .privateKeyJWT(key, audience: x.assertionAudience)
        case .clientSecretJWT:
            guard let secret else { return missing("client_secret_env", "for client_auth: client_secret_jwt (or client_secret_file)") }
            return .clientSecretJWT(secret: secret, audience: x.assertionAudience)
        case .clientAssertion:
            guard let file = x.assertionFile else { return missing("client_assertion_file", "for client_auth: client_assertion") }
            return .clientAssertion(file: file)
        case .tlsClientAuth:
            guard let certificate = x.certFile else { return missing("client_cert_file", "for client_auth: tls_client_auth") }
            guard let key = x.keyFile else { return missing("client_key_file", "for client_auth: tls_client_auth") }
            return .tlsClientAuth(certificateFile: certificate, keyFile: key)
        }
    }
}

extension ClientKeys {
    /// `check`'s lines for the client keys as written (a key `client_auth` does not use is printed
    /// too, beside its warning).
    func describe(_ line: (String, String?) -> Void) {
        line("client_key_file", keyFile)
        line("client_key_id", keyID.map(quoted))
        line("client_key_alg", keyAlg?.rawValue)
        line("client_assertion_audience", assertionAudience.map(quoted))
        line("client_assertion_file", assertionFile)
        line("client_cert_file", certFile)
    }
}
