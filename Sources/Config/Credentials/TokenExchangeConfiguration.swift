/// `type: oauth2_token_exchange` (RFC 8693 §2.1): each fetch exchanges the token in a file (a
/// projected service-account token) for one of the identity provider.
public struct TokenExchangeConfiguration: Sendable, Equatable {
    /// `actor_token_file` and its `actor_token_type` (RFC 8693 §2.1: the type is required with the token).
    public struct ActorToken: Sendable, Equatable {
        public var file: String
        public var type: String
    }

    public var client: OAuth2ClientConfiguration
    public var subjectTokenFile: String
    public var subjectTokenType: String = TokenTypeURI.jwt
    public var actorToken: ActorToken? = nil
    public var requestedTokenType: String? = nil
    public var resource: String? = nil

    public init(client: OAuth2ClientConfiguration, subjectTokenFile: String) {
        self.client = client
        self.subjectTokenFile = subjectTokenFile
    }
}

extension Keys {
    static let tokenExchange = [
        "subject_token_file", "subject_token_type", "actor_token_file", "actor_token_type", "requested_token_type", "resource",
    ]
}

extension TokenExchangeConfiguration {
    static func parse(_ s: YAMLSection, errorsBefore: Int, in load: LoadContext) -> TokenExchangeConfiguration? {
        var r = OAuth2ClientReading.read(s, in: load)
        let subjectFile = load.found.collect { try load.laterFile(s, "subject_token_file") }
        let subjectType = load.found.collect { try s.nonEmptyString("subject_token_type") }
        let actorFile = load.found.collect { try load.laterFile(s, "actor_token_file") }
        let actorType = load.found.collect { try s.nonEmptyString("actor_token_type") }
        let requestedType = load.found.collect { try s.nonEmptyString("requested_token_type") }
        let resource = load.found.collect { try s.nonEmptyString("resource") }
        r.finish(s, signsGrant: false, in: load)
        guard load.found.errors.count == errorsBefore, r.requireTokenEndpoint(.oauth2TokenExchange, in: load),
            let authentication = ClientAuthenticationConfiguration.make(r.method, r.keys, secret: r.client.clientSecret, in: load)
        else { return nil }
        r.client.authentication = authentication
        guard let subjectFile else {
            load.found.record(ConfigurationError(keyPath: "credentials.subject_token_file", reason: "required for type oauth2_token_exchange"))
            return nil
        }
        var c = TokenExchangeConfiguration(client: r.client, subjectTokenFile: subjectFile)
        if let subjectType { c.subjectTokenType = subjectType }
        if let actorFile {
            guard let actorType else {
                load.found.record(ConfigurationError(keyPath: "credentials.actor_token_type", reason: "required when actor_token_file is set (RFC 8693 §2.1)"))
                return nil
            }
            c.actorToken = TokenExchangeConfiguration.ActorToken(file: actorFile, type: actorType)
        }
        c.requestedTokenType = requestedType
        c.resource = resource
        return c
    }
}

extension TokenExchangeConfiguration {
    func describe(_ line: (String, String?) -> Void) {
        client.describeEndpointsAndClient(line)
        client.keysAsWritten.describe(line)
        line("subject_token_file", subjectTokenFile)
        line("actor_token_file", actorToken?.file)
        line("resource", resource.map(quoted))
        client.describeDPoP(line)
    }
}
