import Sockets

/// The `credentials:` keys of CONTRACT.md "Secretless credentials": how the oauth2_* types
/// authenticate the client (`client_auth` and its key files), the RFC 7523 jwt-bearer and RFC 8693
/// token-exchange types, the cloud metadata identities and DPoP. Paths are resolved; no file is read
/// here (the key files are parsed by Credentials, which `check` runs too).
public struct SecretlessConfiguration: Sendable, Equatable {
    // client_auth: private_key_jwt | client_secret_jwt | client_assertion | tls_client_auth
    public var clientKeyFile: String? = nil
    public var clientKeyID: String? = nil
    public var clientKeyAlg: SigningAlgorithm? = nil
    public var clientAssertionAudience: String? = nil
    public var clientAssertionFile: String? = nil
    public var clientCertFile: String? = nil
    // oauth2_jwt_bearer (RFC 7523 §2.1)
    public var assertionFile: String? = nil
    public var assertionIssuer: String? = nil
    public var assertionSubject: String? = nil
    public var assertionAudience: String? = nil
    public var assertionLifetime: Double = 300
    // oauth2_token_exchange (RFC 8693 §2.1)
    public var subjectTokenFile: String? = nil
    public var subjectTokenType: String = TokenTypeURI.jwt
    public var actorTokenFile: String? = nil
    public var actorTokenType: String? = nil
    public var requestedTokenType: String? = nil
    /// Also azure_managed_identity's `resource`.
    public var resource: String? = nil
    // gce_metadata
    public var serviceAccount: String = "default"
    // DPoP (RFC 9449), for the oauth2_* types
    public var dpop: DPoPConfiguration? = nil

    public init() {}
}

/// The JWS algorithms the proxy signs with (RFC 7518 §3.1).
public enum SigningAlgorithm: String, Sendable, Equatable, CaseIterable {
    case rs256 = "RS256", ps256 = "PS256", es256 = "ES256"
}

public struct DPoPConfiguration: Sendable, Equatable {
    /// An EC P-256 key in PEM; nil: a key is made once and kept in the store.
    public var keyFile: String? = nil
    public init() {}
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
    static let jwtBearer = ["assertion_file", "assertion_issuer", "assertion_subject", "assertion_audience", "assertion_lifetime"]
    static let tokenExchange = [
        "subject_token_file", "subject_token_type", "actor_token_file", "actor_token_type", "requested_token_type", "resource",
    ]
    static let gceMetadata = ["service_account", "audience", "scope", "endpoint"]
    static let azureManagedIdentity = ["resource", "scope", "client_id", "endpoint"]
    static let dpop = ["key_file"]
}

extension Builder {
    /// Reads the keys of `SecretlessConfiguration` that are present, whatever the type (unused ones
    /// were warned about already).
    mutating func parseSecretless(_ s: YAMLSection, into c: inout CredentialsConfiguration) {
        var x = SecretlessConfiguration()
        x.clientKeyFile = found.collect { try privateKeyFile(s, "client_key_file") }
        x.clientKeyID = found.collect { try s.nonEmptyString("client_key_id") }
        x.clientKeyAlg = found.collect { try s.choice("client_key_alg", SigningAlgorithm.self) }
        x.clientAssertionAudience = found.collect { try s.nonEmptyString("client_assertion_audience") }
        x.clientAssertionFile = found.collect { try pathValue(s, "client_assertion_file") }
        x.clientCertFile = found.collect { try existingFile(s, "client_cert_file") }
        x.assertionFile = found.collect { try pathValue(s, "assertion_file") }
        x.assertionIssuer = found.collect { try s.nonEmptyString("assertion_issuer") }
        x.assertionSubject = found.collect { try s.nonEmptyString("assertion_subject") }
        x.assertionAudience = found.collect { try s.nonEmptyString("assertion_audience") }
        if let value = found.collect({ try positiveDuration(s, "assertion_lifetime") }) { x.assertionLifetime = value }
        x.subjectTokenFile = found.collect { try pathValue(s, "subject_token_file") }
        if let value = found.collect({ try s.nonEmptyString("subject_token_type") }) { x.subjectTokenType = value }
        x.actorTokenFile = found.collect { try pathValue(s, "actor_token_file") }
        x.actorTokenType = found.collect { try s.nonEmptyString("actor_token_type") }
        x.requestedTokenType = found.collect { try s.nonEmptyString("requested_token_type") }
        x.resource = found.collect { try s.nonEmptyString("resource") }
        if let value = found.collect({ try s.nonEmptyString("service_account") }) { x.serviceAccount = value }
        found.collect {
            guard let section = try s.section("dpop") else { return }
            try section.rejectUnknownKeys(Keys.dpop)
            var dpop = DPoPConfiguration()
            dpop.keyFile = try privateKeyFile(section, "key_file")
            x.dpop = dpop
        }
        c.secretless = x
        // Keys of one client_auth left beside another: a warning, as for keys of another type.
        let oauth2: Set<CredentialsType> = [.oauth2Refresh, .oauth2ClientCredentials, .oauth2JWTBearer, .oauth2TokenExchange]
        if oauth2.contains(c.type) {
            let signsGrant = c.type == .oauth2JWTBearer && x.assertionFile == nil
            let unused: [(String, Bool)] = [
                ("client_key_file", x.clientKeyFile != nil && ![.privateKeyJWT, .tlsClientAuth].contains(c.clientAuth) && !signsGrant),
                ("client_key_id", x.clientKeyID != nil && c.clientAuth != .privateKeyJWT && !signsGrant),
                ("client_key_alg", x.clientKeyAlg != nil && c.clientAuth != .privateKeyJWT && !signsGrant),
                ("client_assertion_audience", x.clientAssertionAudience != nil && ![.privateKeyJWT, .clientSecretJWT].contains(c.clientAuth)),
                ("client_assertion_file", x.clientAssertionFile != nil && c.clientAuth != .clientAssertion),
                ("client_cert_file", x.clientCertFile != nil && c.clientAuth != .tlsClientAuth),
            ]
            for (key, isUnused) in unused where isUnused {
                warnings.append("credentials.\(key): not used with client_auth: \(c.clientAuth.rawValue)")
            }
        }
    }

    /// A path that must name a readable file now (a key or certificate read at start).
    func existingFile(_ section: YAMLSection, _ key: String) throws -> String? {
        guard let path = try pathValue(section, key) else { return nil }
        guard let kind = Paths.kind(of: path) else {
            throw ConfigurationError(keyPath: section.path(key), reason: "cannot read \(path): no such file")
        }
        guard kind != .folder else { throw ConfigurationError(keyPath: section.path(key), reason: "cannot read \(path): it is a folder") }
        return path
    }

    /// The path of a private key (signing, DPoP, a TLS client key): refused when group or others may
    /// read it, since the key is then as good as theirs (as `ssh` refuses such a key). `mustExist`:
    /// a missing file is an error too; otherwise only an existing one is checked.
    func privateKeyFile(_ section: YAMLSection, _ key: String, mustExist: Bool = true) throws -> String? {
        guard let path = try mustExist ? existingFile(section, key) : pathValue(section, key) else { return nil }
        if let mode = FileKind.mode(of: path), mode & 0o044 != 0 {
            let octal = String(mode & 0o777, radix: 8)
            throw ConfigurationError(
                keyPath: section.path(key),
                reason: "\(path) is readable by group or others (mode 0\(octal)): chmod 600 it (in Kubernetes, defaultMode: 0400 on the secret volume)")
        }
        return path
    }

    /// What `client_auth` and the secretless types need, beyond what `checkRequired` asks of every oauth2 type.
    func checkSecretless(_ c: CredentialsConfiguration) throws {
        let x = c.secretless
        func missing(_ key: String, _ why: String) -> ConfigurationError {
            ConfigurationError(keyPath: "credentials.\(key)", reason: "required \(why)")
        }
        switch c.type {
        case .oauth2Refresh, .oauth2ClientCredentials, .oauth2JWTBearer, .oauth2TokenExchange:
            switch c.clientAuth {
            case .privateKeyJWT:
                guard x.clientKeyFile != nil else { throw missing("client_key_file", "for client_auth: private_key_jwt (the PEM key that signs)") }
            case .clientSecretJWT:
                guard c.clientSecret != nil else { throw missing("client_secret_env", "for client_auth: client_secret_jwt (or client_secret_file)") }
            case .clientAssertion:
                guard x.clientAssertionFile != nil else { throw missing("client_assertion_file", "for client_auth: client_assertion") }
            case .tlsClientAuth:
                guard x.clientCertFile != nil else { throw missing("client_cert_file", "for client_auth: tls_client_auth") }
                guard x.clientKeyFile != nil else { throw missing("client_key_file", "for client_auth: tls_client_auth") }
            case .basic, .post, .none:
                break
            }
            if c.type == .oauth2JWTBearer, x.assertionFile == nil, x.clientKeyFile == nil || c.clientAuth == .tlsClientAuth {
                throw missing("assertion_file", "for type oauth2_jwt_bearer (or client_key_file, to have the proxy sign the assertion)")
            }
            if c.type == .oauth2TokenExchange, x.subjectTokenFile == nil {
                throw missing("subject_token_file", "for type oauth2_token_exchange")
            }
            if x.actorTokenFile != nil, x.actorTokenType == nil {
                throw missing("actor_token_type", "when actor_token_file is set (RFC 8693 §2.1)")
            }
        case .azureManagedIdentity:
            if x.resource != nil, c.scope != nil {
                throw ConfigurationError(keyPath: "credentials.scope", reason: "set only one of resource and scope")
            }
            guard x.resource != nil || c.scope != nil else { throw missing("resource", "for type azure_managed_identity (or scope)") }
        case .gceMetadata, .cognito, .jsonRefresh, .static, .file, .exec:
            break
        }
    }
}
