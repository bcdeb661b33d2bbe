/// The client every oauth2_* type has (RFC 6749): where tokens come from, who asks, how it
/// authenticates, and what goes with every token request.
public struct OAuth2ClientConfiguration: Sendable, Equatable {
    /// OpenID discovery fills the endpoints that are absent (one of `issuerURL` and `tokenURL` is set).
    public var issuerURL: String? = nil
    public var tokenURL: String? = nil
    public var clientID: String? = nil
    public var clientSecret: Secret? = nil
    public var authentication: ClientAuthenticationConfiguration = .basic
    public var scope: String? = nil
    public var audience: String? = nil
    public var extraParams: [String: String] = [:]
    /// RFC 9449: proofs on token requests.
    public var dpop: DPoPConfiguration? = nil
    /// The `client_*` keys as written, for `check` (what they mean is in `authentication`).
    var keysAsWritten = ClientKeys()

    public init(tokenURL: String? = nil, clientID: String? = nil, clientSecret: Secret? = nil) {
        self.tokenURL = tokenURL
        self.clientID = clientID
        self.clientSecret = clientSecret
    }
}

/// `type: oauth2_refresh`: a session a person logs in to, kept alive with the refresh_token grant.
public struct OAuth2RefreshConfiguration: Sendable, Equatable {
    public var client: OAuth2ClientConfiguration
    /// The seed refresh token (`refresh_token_env` / `refresh_token_file`): used only when no store exists.
    public var seedRefreshToken: Secret? = nil
    /// password | device | browser | none (srp is refused: it is a cognito flow).
    public var login: CredentialsConfiguration.LoginFlow = .password
    public var deviceAuthorizationURL: String? = nil
    public var revocationURL: String? = nil
    /// login: browser (LoginConfiguration.swift).
    public var browser = BrowserLoginConfiguration()

    public init(client: OAuth2ClientConfiguration) { self.client = client }
}

extension Keys {
    static let oauth2Common = ["issuer_url", "token_url", "client_id"] + clientSecret + ["client_auth", "scope", "audience", "extra_params"] + clientAuth
    static let oauth2RefreshOnly = seedRefreshToken + ["login", "device_authorization_url", "revocation_url"] + browserLogin
    /// Form fields of a token request the proxy sets itself.
    static let reservedTokenRequestParams = [
        "grant_type", "refresh_token", "client_id", "client_secret", "scope", "audience", "username", "password", "device_code",
        "client_assertion", "client_assertion_type", "assertion", "subject_token", "subject_token_type", "actor_token",
        "actor_token_type", "requested_token_type",
    ]
}

/// An oauth2_* client as read, before its keys are checked together.
struct OAuth2ClientReading {
    var client = OAuth2ClientConfiguration()
    var method: CredentialsConfiguration.ClientAuth = .basic
    var keys = ClientKeys()
}

extension OAuth2ClientReading {
    /// The keys every oauth2_* type reads before the grant's own.
    static func read(_ s: YAMLSection, in load: LoadContext) -> OAuth2ClientReading {
        var r = OAuth2ClientReading()
        r.client.issuerURL = load.found.collect { try load.checkURL(s, "issuer_url") }
        r.client.tokenURL = load.found.collect { try load.checkURL(s, "token_url") }
        r.client.clientID = load.found.collect { try s.nonEmptyString("client_id") }
        if let value = load.found.collect({ try s.choice("client_auth", CredentialsConfiguration.ClientAuth.self) }) { r.method = value }
        r.client.scope = load.found.collect { try s.string("scope") }
        r.client.audience = load.found.collect { try s.nonEmptyString("audience") }
        load.found.collect {
            guard let params = try s.stringMap("extra_params") else { return }
            for name in params.keys.sorted() where Keys.reservedTokenRequestParams.contains(name) {
                throw ConfigurationError(
                    keyPath: "credentials.extra_params.\(name)", reason: "is set by the proxy itself (use the credentials key of that name, if any)")
            }
            r.client.extraParams = params
        }
        r.keys = ClientKeys.parse(s, in: load)
        return r
    }

    /// What follows the grant's own keys: `dpop`, the client secret, and the warnings about client
    /// keys `client_auth` does not use.
    mutating func finish(_ s: YAMLSection, signsGrant: Bool, in load: LoadContext) {
        client.dpop = DPoPConfiguration.parse(s, in: load)
        client.keysAsWritten = keys
        keys.warnUnused(method, signsGrant: signsGrant, in: load)
        client.clientSecret = load.found.collect { try load.readSecret(s, "client_secret", literal: true) }
    }

    /// The endpoint every oauth2_* type needs (`missing` builds the error naming the type).
    func requireTokenEndpoint(_ type: CredentialsType, in load: LoadContext) -> Bool {
        guard client.tokenURL != nil || client.issuerURL != nil else {
            load.found.record(ConfigurationError.missingCredential("token_url", for: type, " (or set issuer_url for OpenID discovery)"))
            return false
        }
        return true
    }
}

extension OAuth2ClientConfiguration {
    /// oauth2_refresh and oauth2_client_credentials: the client id, then the endpoint, then `client_auth`.
    static func parseClientCredentials(_ s: YAMLSection, errorsBefore: Int, in load: LoadContext) -> OAuth2ClientConfiguration? {
        var r = OAuth2ClientReading.read(s, in: load)
        r.finish(s, signsGrant: false, in: load)
        guard load.found.errors.count == errorsBefore else { return nil }
        if r.client.clientID == nil { load.found.record(ConfigurationError.missingCredential("client_id", for: .oauth2ClientCredentials)) }
        guard r.requireTokenEndpoint(.oauth2ClientCredentials, in: load), load.found.errors.count == errorsBefore else { return nil }
        guard let authentication = ClientAuthenticationConfiguration.make(r.method, r.keys, secret: r.client.clientSecret, in: load) else { return nil }
        r.client.authentication = authentication
        return r.client
    }
}

extension OAuth2RefreshConfiguration {
    static func parse(_ s: YAMLSection, errorsBefore: Int, in load: LoadContext) -> OAuth2RefreshConfiguration? {
        var r = OAuth2ClientReading.read(s, in: load)
        var c = OAuth2RefreshConfiguration(client: r.client)
        c.deviceAuthorizationURL = load.found.collect { try load.checkURL(s, "device_authorization_url") }
        c.revocationURL = load.found.collect { try load.checkURL(s, "revocation_url") }
        if let value = load.found.collect({ try s.choice("login", CredentialsConfiguration.LoginFlow.self) }) { c.login = value }
        c.browser = BrowserLoginConfiguration.parse(s, in: load)
        r.finish(s, signsGrant: false, in: load)
        c.seedRefreshToken = load.found.collect { try load.readSecret(s, "refresh_token", literal: false, unsetEnvIsAbsent: true) }
        guard load.found.errors.count == errorsBefore else { return nil }
        var complete = true
        if r.client.clientID == nil { load.found.record(ConfigurationError.missingCredential("client_id", for: .oauth2Refresh)) }
        if !r.requireTokenEndpoint(.oauth2Refresh, in: load) {
            complete = false
        } else if c.login == .device, c.deviceAuthorizationURL == nil, r.client.issuerURL == nil {
            load.found.record(
                ConfigurationError(
                    keyPath: "credentials.device_authorization_url", reason: "required for login: device (or set issuer_url for OpenID discovery)"))
            complete = false
        }
        if complete, load.found.errors.count == errorsBefore {
            if let authentication = ClientAuthenticationConfiguration.make(r.method, r.keys, secret: r.client.clientSecret, in: load) {
                r.client.authentication = authentication
            } else {
                complete = false
            }
        }
        switch c.login {
        case .browser:
            if c.browser.authorizationURL == nil, r.client.issuerURL == nil {
                load.found.record(
                    ConfigurationError(
                        keyPath: "credentials.authorization_url", reason: "required for login: browser (or set issuer_url for OpenID discovery)"))
            }
        case .srp:
            load.found.record(
                ConfigurationError(keyPath: "credentials.login", reason: "srp is a cognito flow; oauth2_refresh logs in with password, device or browser"))
        case .password, .device, .none:
            break
        }
        guard complete, load.found.errors.count == errorsBefore else { return nil }
        c.client = r.client
        return c
    }
}

extension OAuth2ClientConfiguration {
    /// `check`'s lines from issuer_url to extra_params.
    func describeEndpointsAndClient(_ line: (String, String?) -> Void) {
        line("issuer_url", issuerURL)
        line("token_url", tokenURL)
        line("client_id", clientID.map(quoted))
        line("client_secret", clientSecret?.description ?? "none")
        line("client_auth", authentication.method.rawValue)
        line("scope", scope.map(quoted))
        line("audience", audience.map(quoted))
        if !extraParams.isEmpty {
            let pairs = extraParams.sorted { $0.key < $1.key }.map { "\(quoted($0.key)): \(quoted($0.value))" }
            line("extra_params", "{" + pairs.joined(separator: ", ") + "}")
        }
    }

    /// `check`'s line for `dpop`, the last of the oauth2_* types.
    func describeDPoP(_ line: (String, String?) -> Void) {
        if let dpop { line("dpop.key_file", dpop.keyFile ?? "made once, kept in the store") }
    }
}

extension OAuth2RefreshConfiguration {
    func describe(_ line: (String, String?) -> Void) {
        client.describeEndpointsAndClient(line)
        line("seed_refresh_token", seedRefreshToken?.description ?? "none")
        line("login", login.rawValue)
        line("device_authorization_url", deviceAuthorizationURL)
        browser.describe(login: login, line)
        line("revocation_url", revocationURL)
        client.keysAsWritten.describe(line)
        client.describeDPoP(line)
    }
}
