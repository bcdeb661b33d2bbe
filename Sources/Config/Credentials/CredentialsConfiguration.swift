/// `credentials:` (CONTRACT.md "The configuration file"): the keys every type has, and the
/// configuration of the one token source that `type` names. Every key sits directly under
/// `credentials:` in the file; the loader reads only the keys the type uses (the others are warned
/// about), so a source's value holds what that source needs and nothing else.
public struct CredentialsConfiguration: Sendable, Equatable {
    public var source: CredentialsSource
    public var refreshMargin: Double = 300
    public var defaultLifetime: Double = 3600
    /// Variables named by `*_env` keys the type does not use: still secrets, withheld from `exec`.
    public var unusedSecretVariables: Set<String> = []

    public init(_ source: CredentialsSource) { self.source = source }

    public var type: CredentialsType { source.type }

    public enum ClientAuth: String, Sendable, Equatable, CaseIterable {
        case basic, post
        case privateKeyJWT = "private_key_jwt", clientSecretJWT = "client_secret_jwt", clientAssertion = "client_assertion"
        case tlsClientAuth = "tls_client_auth", none
    }
    public enum LoginFlow: String, Sendable, Equatable, CaseIterable { case password, device, browser, srp, none }
    public enum CognitoTokenUse: String, Sendable, Equatable, CaseIterable { case access, id }
    public enum RefreshTokenPlacement: String, Sendable, Equatable, CaseIterable { case header, body }
}

/// One case per `credentials.type`, each with its own configuration value; the oauth2_* types share
/// `OAuth2ClientConfiguration` (endpoints and client authentication).
public enum CredentialsSource: Sendable, Equatable {
    case oauth2Refresh(OAuth2RefreshConfiguration)
    case oauth2ClientCredentials(OAuth2ClientConfiguration)
    case oauth2JWTBearer(JWTBearerConfiguration)
    case oauth2TokenExchange(TokenExchangeConfiguration)
    case cognito(CognitoConfiguration)
    case jsonRefresh(JSONRefreshConfiguration)
    case gceMetadata(GCEMetadataConfiguration)
    case azureManagedIdentity(AzureManagedIdentityConfiguration)
    case `static`(StaticTokenConfiguration)
    case file(FileTokenConfiguration)
    case exec(ExecConfiguration)
    case aws(AWSConfiguration)
    case gitHubApp(GitHubAppConfiguration)

    public var type: CredentialsType {
        switch self {
        case .oauth2Refresh: return .oauth2Refresh
        case .oauth2ClientCredentials: return .oauth2ClientCredentials
        case .oauth2JWTBearer: return .oauth2JWTBearer
        case .oauth2TokenExchange: return .oauth2TokenExchange
        case .cognito: return .cognito
        case .jsonRefresh: return .jsonRefresh
        case .gceMetadata: return .gceMetadata
        case .azureManagedIdentity: return .azureManagedIdentity
        case .static: return .static
        case .file: return .file
        case .exec: return .exec
        case .aws: return .aws
        case .gitHubApp: return .gitHubApp
        }
    }

    /// The client of the oauth2_* types: where `client_auth`, `extra_params` and `dpop` apply.
    public var oauth2Client: OAuth2ClientConfiguration? {
        switch self {
        case .oauth2Refresh(let c): return c.client
        case .oauth2ClientCredentials(let client): return client
        case .oauth2JWTBearer(let c): return c.client
        case .oauth2TokenExchange(let c): return c.client
        case .cognito, .jsonRefresh, .gceMetadata, .azureManagedIdentity, .static, .file, .exec, .aws, .gitHubApp: return nil
        }
    }

    /// `refresh_token_env` / `refresh_token_file`: seeds an empty store (the types a person logs in to).
    public var seedRefreshToken: Secret? {
        switch self {
        case .oauth2Refresh(let c): return c.seedRefreshToken
        case .cognito(let c): return c.seedRefreshToken
        case .jsonRefresh(let c): return c.seedRefreshToken
        case .oauth2ClientCredentials, .oauth2JWTBearer, .oauth2TokenExchange, .gceMetadata, .azureManagedIdentity, .static, .file, .exec, .aws,
            .gitHubApp:
            return nil
        }
    }

    /// The `login:` flow `tokenproxy login` runs (password where the type has no `login` key).
    public var login: CredentialsConfiguration.LoginFlow {
        switch self {
        case .oauth2Refresh(let c): return c.login
        case .cognito(let c): return c.login
        case .oauth2ClientCredentials, .oauth2JWTBearer, .oauth2TokenExchange, .jsonRefresh, .gceMetadata, .azureManagedIdentity, .static, .file,
            .exec, .aws, .gitHubApp:
            return .password
        }
    }

    /// The secrets the loader read for this source, in key order: the client secret, the seed
    /// refresh token, the static token (a `*_file` one is watched for changes).
    public var secrets: [Secret] {
        switch self {
        case .cognito(let c): return [c.clientSecret, c.seedRefreshToken].compactMap { $0 }
        case .static(let c): return [c.token]
        case .oauth2Refresh, .oauth2ClientCredentials, .oauth2JWTBearer, .oauth2TokenExchange, .jsonRefresh, .gceMetadata, .azureManagedIdentity,
            .file, .exec, .aws, .gitHubApp:
            return [oauth2Client?.clientSecret, seedRefreshToken].compactMap { $0 }
        }
    }
}

public enum CredentialsType: String, Sendable, Equatable, CaseIterable {
    case oauth2Refresh = "oauth2_refresh"
    case oauth2ClientCredentials = "oauth2_client_credentials"
    case cognito
    case jsonRefresh = "json_refresh"
    case `static`
    case file
    case exec
    // CONTRACT.md "Secretless credentials"
    case oauth2JWTBearer = "oauth2_jwt_bearer"
    case oauth2TokenExchange = "oauth2_token_exchange"
    case gceMetadata = "gce_metadata"
    case azureManagedIdentity = "azure_managed_identity"
    // CONTRACT.md "AWS credentials and SigV4 signing"
    case aws
    // CONTRACT.md "GitHub App installation tokens"
    case gitHubApp = "github_app"
}

/// What each type does, declared once (CONTRACT.md "credentials" and "Logging in a person").
extension CredentialsType {
    /// Tokens come from an identity provider and live in the store (`store.path`), where `login`,
    /// `token`, `status` and `logout` find them; static, file and exec keep no session.
    public var keepsSession: Bool {
        switch self {
        case .oauth2Refresh, .oauth2ClientCredentials, .cognito, .jsonRefresh, .oauth2JWTBearer, .oauth2TokenExchange, .gceMetadata,
            .azureManagedIdentity, .aws, .gitHubApp:
            return true
        case .static, .file, .exec:
            return false
        }
    }

    /// The session starts with a person's login (`tokenproxy login`); the other types fetch on their own.
    public var sessionNeedsLogin: Bool {
        switch self {
        case .oauth2Refresh, .cognito, .jsonRefresh: return true
        case .oauth2ClientCredentials, .static, .file, .exec, .oauth2JWTBearer, .oauth2TokenExchange, .gceMetadata, .azureManagedIdentity, .aws,
            .gitHubApp:
            return false
        }
    }

    /// A token that may change while the process runs (a static one never does).
    public var tokenCanChange: Bool { self != .static }

    /// The keys of `credentials:` the type reads, beyond `type`, `refresh_margin` and `default_lifetime`.
    var keys: [String] {
        switch self {
        case .oauth2Refresh: return Keys.oauth2Common + Keys.oauth2RefreshOnly
        case .oauth2ClientCredentials: return Keys.oauth2Common
        case .oauth2JWTBearer: return Keys.oauth2Common + Keys.jwtBearer
        case .oauth2TokenExchange: return Keys.oauth2Common + Keys.tokenExchange
        case .cognito: return Keys.cognito
        case .jsonRefresh: return Keys.jsonRefresh
        case .gceMetadata: return Keys.gceMetadata
        case .azureManagedIdentity: return Keys.azureManagedIdentity
        case .static: return Keys.staticToken
        case .file: return Keys.file
        case .exec: return Keys.exec
        case .aws: return Keys.aws
        case .gitHubApp: return Keys.gitHubApp
        }
    }
}

/// A secret and where it came from (for `check`'s masked output and for warnings).
public struct Secret: Sendable, Equatable, CustomStringConvertible {
    public enum Origin: Sendable, Equatable { case literal, env(String), file(String) }
    public var value: String
    public var origin: Origin
    public init(value: String, origin: Origin) {
        self.value = value
        self.origin = origin
    }
    /// Never the value.
    public var description: String {
        switch origin {
        case .literal: return "****** (literal)"
        case .env(let name): return "****** (from env \(name))"
        case .file(let path): return "****** (from file \(path))"
        }
    }
}

extension Keys {
    static let credentialsCommon = ["type", "refresh_margin", "default_lifetime"]
    static let clientSecret = ["client_secret", "client_secret_env", "client_secret_file"]
    static let seedRefreshToken = ["refresh_token_env", "refresh_token_file"]

    static let credentials: [String] = {
        var all = credentialsCommon
        for type in CredentialsType.allCases {
            for key in type.keys where !all.contains(key) { all.append(key) }
        }
        return all
    }()
}

extension CredentialsConfiguration {
    /// Throws when the type is missing or unknown; records the section's other errors and returns
    /// the configuration of the type's source, or nil when an error was found.
    static func parse(_ s: YAMLSection, in load: LoadContext) throws -> CredentialsConfiguration? {
        let typeNames = CredentialsType.allCases.map(\.rawValue)
        let errorsBefore = load.found.errors.count
        load.found.collect {
            try s.rejectUnknownKeys(Keys.credentials) { key in
                typeNames.contains(key) || key == "oauth2"
                    ? "every key of every type sits directly under credentials: (credentials.command, not credentials.exec.command)"
                    : nil
            }
        }
        guard let type = try s.choice("type", CredentialsType.self) else {
            throw ConfigurationError(keyPath: "credentials.type", reason: "required: one of \(typeNames.joined(separator: " | "))")
        }
        let used = Set(ConfigurationLoader.credentialsKeys(usedBy: type))
        for key in s.presentKeys where !used.contains(key) {
            load.warnings.append("\(s.path(key)): not used by type \(type.rawValue)")
        }
        let refreshMargin = load.found.collect { try s.duration("refresh_margin") }
        let defaultLifetime = load.found.collect { try load.positiveDuration(s, "default_lifetime") }

        // Each type reads only its own keys (a key found wrong is not reported again as missing).
        let source: CredentialsSource?
        switch type {
        case .oauth2Refresh: source = OAuth2RefreshConfiguration.parse(s, errorsBefore: errorsBefore, in: load).map { .oauth2Refresh($0) }
        case .oauth2ClientCredentials:
            source = OAuth2ClientConfiguration.parseClientCredentials(s, errorsBefore: errorsBefore, in: load).map { .oauth2ClientCredentials($0) }
        case .oauth2JWTBearer: source = JWTBearerConfiguration.parse(s, errorsBefore: errorsBefore, in: load).map { .oauth2JWTBearer($0) }
        case .oauth2TokenExchange: source = TokenExchangeConfiguration.parse(s, errorsBefore: errorsBefore, in: load).map { .oauth2TokenExchange($0) }
        case .cognito: source = CognitoConfiguration.parse(s, errorsBefore: errorsBefore, in: load).map { .cognito($0) }
        case .jsonRefresh: source = JSONRefreshConfiguration.parse(s, errorsBefore: errorsBefore, in: load).map { .jsonRefresh($0) }
        case .gceMetadata: source = .gceMetadata(GCEMetadataConfiguration.parse(s, in: load))
        case .azureManagedIdentity: source = AzureManagedIdentityConfiguration.parse(s, errorsBefore: errorsBefore, in: load).map { .azureManagedIdentity($0) }
        case .static: source = StaticTokenConfiguration.parse(s, errorsBefore: errorsBefore, in: load).map { .static($0) }
        case .file: source = FileTokenConfiguration.parse(s, errorsBefore: errorsBefore, in: load).map { .file($0) }
        case .exec: source = ExecConfiguration.parse(s, errorsBefore: errorsBefore, in: load).map { .exec($0) }
        case .aws: source = AWSConfiguration.parse(s, errorsBefore: errorsBefore, in: load).map { .aws($0) }
        case .gitHubApp: source = GitHubAppConfiguration.parse(s, errorsBefore: errorsBefore, in: load).map { .gitHubApp($0) }
        }
        guard let source, load.found.errors.count == errorsBefore else { return nil }
        var c = CredentialsConfiguration(source)
        if let refreshMargin { c.refreshMargin = refreshMargin }
        if let defaultLifetime { c.defaultLifetime = defaultLifetime }
        // Secrets are read only for the keys the type uses: an unused, unset variable is no reason to refuse to start.
        for key in ["client_secret_env", "refresh_token_env", "token_env"] where !used.contains(key) {
            if let name = try? s.nonEmptyString(key) { c.unusedSecretVariables.insert(name.trimmingWhitespace()) }
        }
        return c
    }
}

extension ConfigurationError {
    /// `credentials.<key>: required for type <type><extra>`.
    static func missingCredential(_ key: String, for type: CredentialsType, _ extra: String = "") -> ConfigurationError {
        ConfigurationError(keyPath: "credentials.\(key)", reason: "required for type \(type.rawValue)\(extra)")
    }
}

extension CredentialsConfiguration {
    /// `check`'s credentials lines after type, refresh_margin and default_lifetime: the keys the type uses.
    func describeSource(_ line: (String, String?) -> Void) {
        switch source {
        case .oauth2Refresh(let c): c.describe(line)
        case .oauth2ClientCredentials(let client):
            client.describeEndpointsAndClient(line)
            client.keysAsWritten.describe(line)
            client.describeDPoP(line)
        case .oauth2JWTBearer(let c): c.describe(line)
        case .oauth2TokenExchange(let c): c.describe(line)
        case .cognito(let c): c.describe(line)
        case .jsonRefresh(let c): c.describe(line)
        case .gceMetadata(let c): c.describe(line)
        case .azureManagedIdentity(let c): c.describe(line)
        case .static(let c): c.describe(line)
        case .file(let c): c.describe(line)
        case .exec(let c): c.describe(line)
        case .aws(let c): c.describe(line)
        case .gitHubApp(let c): c.describe(line)
        }
    }
}
