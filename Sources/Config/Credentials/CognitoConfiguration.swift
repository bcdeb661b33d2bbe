/// `type: cognito`: an Amazon Cognito user pool's app client (InitiateAuth; REFRESH_TOKEN_AUTH to refresh).
public struct CognitoConfiguration: Sendable, Equatable {
    public var clientID: String
    /// When set, SECRET_HASH is sent.
    public var clientSecret: Secret? = nil
    /// One of `region` and `endpoint` is set; `endpoint` wins.
    public var region: String? = nil
    public var endpoint: String? = nil
    public var useToken: CredentialsConfiguration.CognitoTokenUse = .access
    public var seedRefreshToken: Secret? = nil
    /// password (USER_PASSWORD_AUTH) | srp | none.
    public var login: CredentialsConfiguration.LoginFlow = .password
    /// Needed for login: srp and for an identity pool.
    public var userPoolID: String? = nil
    /// Set with `identity_pool_id`: requests are signed with the identity pool's AWS credentials.
    public var identityPool: CognitoIdentityPoolConfiguration? = nil

    public init(clientID: String, region: String? = nil, endpoint: String? = nil) {
        self.clientID = clientID
        self.region = region
        self.endpoint = endpoint
    }
}

extension Keys {
    static let cognito = ["region", "client_id"] + clientSecret + ["endpoint", "use_token"] + seedRefreshToken + cognitoLogin + cognitoIdentityPool
}

extension CognitoConfiguration {
    static func parse(_ s: YAMLSection, errorsBefore: Int, in load: LoadContext) -> CognitoConfiguration? {
        let endpoint = load.found.collect { try load.checkURL(s, "endpoint") }
        let clientID = load.found.collect { try s.nonEmptyString("client_id") }
        let login = load.found.collect { try s.choice("login", CredentialsConfiguration.LoginFlow.self) } ?? .password
        var region = load.found.collect { () throws -> String? in
            guard let value = try s.nonEmptyString("region") else { return nil }
            guard value.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-") }) else {
                throw ConfigurationError(keyPath: "credentials.region", reason: "is not an AWS region name such as us-east-1")
            }
            return value
        }
        let pool = CognitoConfiguration.parseUserPoolID(s, in: load)
        if region == nil, !s.has("region") { region = pool?.region }
        let useToken = load.found.collect { try s.choice("use_token", CredentialsConfiguration.CognitoTokenUse.self) }
        let secret = load.found.collect { try load.readSecret(s, "client_secret", literal: true) }
        let seed = load.found.collect { try load.readSecret(s, "refresh_token", literal: false, unsetEnvIsAbsent: true) }
        let identityPool = CognitoIdentityPoolConfiguration.parse(s, userPool: pool?.id, region: region, useToken: useToken, in: load)
        guard load.found.errors.count == errorsBefore else { return nil }
        if clientID == nil { load.found.record(ConfigurationError.missingCredential("client_id", for: .cognito)) }
        if region == nil, endpoint == nil {
            load.found.record(ConfigurationError.missingCredential("region", for: .cognito, " (or set endpoint or user_pool_id)"))
        }
        switch login {
        case .srp:
            if pool == nil {
                load.found.record(ConfigurationError(keyPath: "credentials.user_pool_id", reason: "required for login: srp (like us-east-1_Ab12Cd34E)"))
            }
        case .device, .browser:
            load.found.record(
                ConfigurationError(
                    keyPath: "credentials.login",
                    reason: "cognito logs in with password or srp; for the managed login (hosted UI) use type oauth2_refresh with login: browser"))
        case .password, .none:
            break
        }
        guard let clientID, load.found.errors.count == errorsBefore else { return nil }
        var c = CognitoConfiguration(clientID: clientID, region: region, endpoint: endpoint)
        c.clientSecret = secret
        if let useToken { c.useToken = useToken }
        c.seedRefreshToken = seed
        c.login = login
        c.userPoolID = pool?.id
        if let identityPool {
            c.identityPool = identityPool
            c.useToken = .id  // the Logins token
        }
        return c
    }
}

extension CognitoConfiguration {
    func describe(_ line: (String, String?) -> Void) {
        line("region", region)
        line("endpoint", endpoint)
        line("client_id", quoted(clientID))
        line("client_secret", clientSecret?.description ?? "none")
        line("use_token", useToken.rawValue)
        line("seed_refresh_token", seedRefreshToken?.description ?? "none")
        line("login", login.rawValue)
        line("user_pool_id", userPoolID)
        identityPool?.describe(line)
    }
}
