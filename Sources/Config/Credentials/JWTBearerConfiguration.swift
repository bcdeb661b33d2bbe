/// `type: oauth2_jwt_bearer` (RFC 7523 §2.1): each fetch sends an assertion, read from a file or
/// signed by the proxy.
public struct JWTBearerConfiguration: Sendable, Equatable {
    public var client: OAuth2ClientConfiguration
    public var assertion: Assertion

    public enum Assertion: Sendable, Equatable {
        /// `assertion_file`: a ready JWT, read again when it changes.
        case file(String)
        /// No `assertion_file`: the proxy signs one with `client_key_file`.
        case signed(SignedAssertion)
    }

    /// The claims of an assertion the proxy signs (RFC 7523 §3).
    public struct SignedAssertion: Sendable, Equatable {
        public var key: SigningKeyFile
        /// `assertion_issuer`; default: the client id.
        public var issuer: String? = nil
        public var subject: String? = nil
        /// `assertion_audience`; default: the token endpoint.
        public var audience: String? = nil
        public var lifetime: Double = 300
        public init(key: SigningKeyFile) { self.key = key }
    }

    public init(client: OAuth2ClientConfiguration, assertion: Assertion) {
        self.client = client
        self.assertion = assertion
    }
}

extension Keys {
    static let jwtBearer = ["assertion_file", "assertion_issuer", "assertion_subject", "assertion_audience", "assertion_lifetime"]
}

extension JWTBearerConfiguration {
    static func parse(_ s: YAMLSection, errorsBefore: Int, in load: LoadContext) -> JWTBearerConfiguration? {
        var r = OAuth2ClientReading.read(s, in: load)
        let file = load.found.collect { try load.laterFile(s, "assertion_file") }
        let issuer = load.found.collect { try s.nonEmptyString("assertion_issuer") }
        let subject = load.found.collect { try s.nonEmptyString("assertion_subject") }
        let audience = load.found.collect { try s.nonEmptyString("assertion_audience") }
        let lifetime = load.found.collect { try load.positiveDuration(s, "assertion_lifetime") }
        r.finish(s, signsGrant: file == nil, in: load)
        guard load.found.errors.count == errorsBefore, r.requireTokenEndpoint(.oauth2JWTBearer, in: load),
            let authentication = ClientAuthenticationConfiguration.make(r.method, r.keys, secret: r.client.clientSecret, in: load)
        else { return nil }
        r.client.authentication = authentication
        let assertion: JWTBearerConfiguration.Assertion
        if let file {
            assertion = .file(file)
        } else if let key = r.keys.signingKey, r.method != .tlsClientAuth {
            var signed = JWTBearerConfiguration.SignedAssertion(key: key)
            signed.issuer = issuer
            signed.subject = subject
            signed.audience = audience
            if let lifetime { signed.lifetime = lifetime }
            assertion = .signed(signed)
        } else {
            load.found.record(
                ConfigurationError(
                    keyPath: "credentials.assertion_file",
                    reason: "required for type oauth2_jwt_bearer (or client_key_file, to have the proxy sign the assertion)"))
            return nil
        }
        return JWTBearerConfiguration(client: r.client, assertion: assertion)
    }
}

extension JWTBearerConfiguration {
    func describe(_ line: (String, String?) -> Void) {
        client.describeEndpointsAndClient(line)
        client.keysAsWritten.describe(line)
        if case .file(let path) = assertion { line("assertion_file", path) }
        client.describeDPoP(line)
    }
}
