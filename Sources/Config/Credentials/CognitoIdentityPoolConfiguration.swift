/// `type: cognito` with `identity_pool_id` (CONTRACT.md "Amazon Cognito identity pools"): the user
/// pool's ID token is turned into temporary AWS credentials (GetId, GetCredentialsForIdentity), and
/// requests are signed with SigV4 for the cognito `region` and `aws.service`.
public struct CognitoIdentityPoolConfiguration: Sendable, Equatable {
    /// `<region>:<uuid>`.
    public var identityPoolID: String
    /// Names the `Logins` provider: `cognito-idp.<region>.amazonaws.com/<user_pool_id>`.
    public var userPoolID: String
    /// The cognito `region`: the identity endpoint's, the provider name's and the one signed for.
    public var region: String
    /// `aws.service`: the signing name (execute-api, s3, es, …).
    public var service: String
    /// `aws.payload`, as for `type: aws`.
    public var payload: AWSConfiguration.Payload = .signed
    /// nil: `https://cognito-identity.<region>.amazonaws.com/`.
    public var identityEndpoint: String? = nil

    public init(identityPoolID: String, userPoolID: String, region: String, service: String) {
        self.identityPoolID = identityPoolID
        self.userPoolID = userPoolID
        self.region = region
        self.service = service
    }

    /// The `Logins` key of the user pool (Cognito developer guide, "Integrating a user pool with an
    /// identity pool").
    public var loginsProvider: String { "cognito-idp.\(region).amazonaws.com/\(userPoolID)" }

    /// Where GetId and GetCredentialsForIdentity go.
    public var endpoint: String { identityEndpoint ?? "https://cognito-identity.\(region).amazonaws.com/" }
}

/// What SigV4 signs for, for every credentials type that signs (CONTRACT.md "AWS credentials and
/// SigV4 signing"): chosen once per route.
public struct AWSSigningScope: Sendable, Equatable {
    public var region: String
    public var service: String
    public var payload: AWSConfiguration.Payload
}

extension CredentialsSource {
    /// Set when requests are signed with SigV4 instead of carrying a token: `type: aws`, and
    /// `type: cognito` with an identity pool.
    public var awsSigning: AWSSigningScope? {
        switch self {
        case .aws(let c): return AWSSigningScope(region: c.region, service: c.service, payload: c.payload)
        case .cognito(let c): return c.identityPool.map { AWSSigningScope(region: $0.region, service: $0.service, payload: $0.payload) }
        case .oauth2Refresh, .oauth2ClientCredentials, .oauth2JWTBearer, .oauth2TokenExchange, .jsonRefresh, .gceMetadata, .azureManagedIdentity,
            .static, .file, .exec, .gitHubApp:
            return nil
        }
    }
}

extension Keys {
    static let cognitoIdentityPool = ["identity_pool_id", "identity_endpoint", "aws"]
    static let cognitoAWS = ["service", "payload"]
}

extension CognitoIdentityPoolConfiguration {
    /// The identity-pool keys of a cognito section; nil (with every problem recorded, by key) when
    /// there is no `identity_pool_id` or a key is wrong. `userPool` and `region` are the section's.
    static func parse(
        _ s: YAMLSection, userPool: String?, region: String?, useToken: CredentialsConfiguration.CognitoTokenUse?, in load: LoadContext
    ) -> CognitoIdentityPoolConfiguration? {
        let errorsBefore = load.found.errors.count
        let poolID = load.found.collect { () throws -> String? in
            guard let value = try s.nonEmptyString("identity_pool_id") else { return nil }
            let trimmed = value.trimmingWhitespace()
            guard isIdentityPoolID(trimmed) else {
                throw ConfigurationError(
                    keyPath: s.path("identity_pool_id"), reason: "is not an identity pool id such as us-east-1:0a1b2c3d-4e5f-6a7b-8c9d-0e1f2a3b4c5d")
            }
            return trimmed
        }
        let endpoint = load.found.collect { try load.checkURL(s, "identity_endpoint") }
        let aws = load.found.collect { () throws -> (service: String?, payload: AWSConfiguration.Payload?)? in
            guard let section = try s.section("aws") else { return nil }
            try section.rejectUnknownKeys(Keys.cognitoAWS)
            let service = try section.nonEmptyString("service")?.trimmingWhitespace()
            return (service, try section.choice("payload", AWSConfiguration.Payload.self))
        }
        guard load.found.errors.count == errorsBefore else { return nil }
        guard let poolID else {
            // The keys that only an identity pool reads.
            for key in ["aws", "identity_endpoint"] where s.has(key) {
                load.found.record(ConfigurationError(keyPath: s.path(key), reason: "is read only with identity_pool_id (Cognito identity pools)"))
            }
            return nil
        }
        if userPool == nil {
            load.found.record(
                ConfigurationError(
                    keyPath: s.path("user_pool_id"),
                    reason: "required with identity_pool_id: it names the Logins provider cognito-idp.<region>.amazonaws.com/<user_pool_id>"))
        }
        if aws?.service == nil {
            load.found.record(
                ConfigurationError(
                    keyPath: s.path("aws.service"),
                    reason: "required with identity_pool_id: the signing name (execute-api, s3, es, aps, lambda, …)"))
        }
        if useToken == .access {
            load.found.record(
                ConfigurationError(keyPath: s.path("use_token"), reason: "an identity pool takes the ID token; remove use_token"))
        }
        guard let userPool, let region, let service = aws?.service, load.found.errors.count == errorsBefore else { return nil }
        var c = CognitoIdentityPoolConfiguration(identityPoolID: poolID, userPoolID: userPool, region: region, service: service)
        c.payload = aws?.payload ?? .signed
        c.identityEndpoint = endpoint
        return c
    }

    /// `<region>:<uuid>`: a region name, then a UUID in its 8-4-4-4-12 hexadecimal form.
    static func isIdentityPoolID(_ text: String) -> Bool {
        let parts = text.split(separator: ":", omittingEmptySubsequences: false)
        guard parts.count == 2, !parts[0].isEmpty,
            parts[0].allSatisfy({ $0.isASCII && ($0.isLowercase || $0.isNumber || $0 == "-") })
        else { return false }
        let groups = parts[1].split(separator: "-", omittingEmptySubsequences: false)
        guard groups.map(\.count) == [8, 4, 4, 4, 12] else { return false }
        return groups.allSatisfy { $0.allSatisfy { $0.isASCII && $0.isHexDigit } }
    }

    func describe(_ line: (String, String?) -> Void) {
        line("identity_pool_id", identityPoolID)
        line("identity_endpoint", endpoint)
        line("logins_provider", loginsProvider)
        line("aws.service", service)
        line("aws.payload", payload.rawValue)
    }
}
