import Config
import Foundation
import IdentityHTTP
import Logging
import Sockets

/// A token as a source handed it over, before the manager resolves its expiry.
public struct IssuedToken: Sendable, Equatable {
    public var accessToken: String
    /// A new refresh token, when the answer carried one (OAuth2 rotation); nil keeps the old one.
    public var refreshToken: String?
    /// Seconds of life from now, as the answer said (`expires_in`).
    public var expiresIn: Double?
    /// Seconds since the epoch, as the answer said (`expires_at`).
    public var expiresAt: Double?
    /// When the token was issued, for a token restored from a store; nil: now. The lifetime that
    /// `refresh_margin` is capped against counts from here.
    public var issuedAt: Double?

    /// The identity provider's `Date` header (epoch seconds), for clock-skew correction.
    public var serverDate: Double?
    /// Cognito: the pool's own user name (the access token's `username` claim), needed for the
    /// SECRET_HASH of later refreshes; it differs from the login name when users sign in by e-mail.
    public var username: String?
    /// True when the token was read from the store, as another process (or an earlier run) saved
    /// it, without a call to the identity provider: counted apart in
    /// `tokenproxy_refreshes_total{outcome="reused"}` (issue 12 point 8).
    public var fromStore = false
    /// Who logged in, for `login` to print (`preferred_username`, `email`, `upn` or `sub` of the ID
    /// token or a JWT access token): shown only, never trusted.
    public var person: String?
    /// Cognito with device tracking: the login's `NewDeviceMetadata.DeviceKey`, kept in the store and
    /// sent as DEVICE_KEY with every refresh.
    public var deviceKey: String?
    /// Set for a token issued with `token_type: DPoP` (RFC 9449 §5): the key it is bound to.
    public var dpop: DPoPProver?
    /// Cognito identity pools: the identity id (GetId), kept in the store with the session.
    public var identityID: String?

    public init(
        accessToken: String,
        refreshToken: String? = nil,
        expiresIn: Double? = nil,
        expiresAt: Double? = nil,
        issuedAt: Double? = nil,
        serverDate: Double? = nil,
        username: String? = nil
    ) {
        self.accessToken = accessToken
        self.refreshToken = refreshToken
        self.expiresIn = expiresIn
        self.expiresAt = expiresAt
        self.issuedAt = issuedAt
        self.serverDate = serverDate
        self.username = username
    }
}

/// How a source call failed. Messages never contain a token, a secret or a raw answer, and no
/// decision reads them: what a caller decides by (retry, metrics, logs) is in the case and its cause.
public enum TokenSourceError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The identity provider refused the grant (`invalid_grant`, `NotAuthorizedException`):
    /// the session ends (`SessionState.ended`), no retry until the input changes (a new login).
    case refused(String)
    /// There is no session to refresh: never logged in, or logged out (`SessionState.none`). No
    /// retry until the input changes.
    case loginRequired(String)
    /// Network, 5xx, 429, a timeout, an unreadable answer: retried with backoff while a still-valid
    /// token keeps serving. `cause` says which, for `tokenproxy_token_fetch_failures_total{reason}`.
    case passing(String, cause: PassingCause = .badAnswer)
    /// The configuration is wrong (`invalid_client`, a missing command): logged as a configuration
    /// error, retried like a passing failure.
    case configuration(String)

    /// A call to an identity provider that brought no answer back: "cannot reach `what`", caused
    /// by the transport's kind of failure.
    public static func cannotReach(_ what: String, _ error: any Error) -> TokenSourceError {
        .passing("cannot reach \(what): \(error)", cause: PassingCause.of(error))
    }

    public var description: String {
        switch self {
        case .refused(let reason): return "refused: \(reason)"
        case .loginRequired(let reason): return "login required: \(reason)"
        case .passing(let reason, _): return reason
        case .configuration(let reason): return "configuration error: \(reason)"
        }
    }

    public var reason: String {
        switch self {
        case .refused(let reason), .loginRequired(let reason), .passing(let reason, _), .configuration(let reason): return reason
        }
    }
}

/// Why a passing failure happened (docs/OBSERVABILITY.md, `tokenproxy_token_fetch_failures_total`).
public enum PassingCause: Sendable, Equatable {
    /// The identity provider could not be reached (DNS, TCP, TLS, a connection broken off).
    case unreachable
    /// The call ran out of time.
    case timedOut
    /// The identity provider answered 5xx, or said it is unavailable for now.
    case unavailable
    /// The identity provider answered 429, or said to slow down.
    case rateLimited
    /// An answer that holds no usable token or cannot be read; any other passing failure.
    case badAnswer

    /// The cause of a failed call to `BlockingHTTPClient`: its kind, not its words. Any other error
    /// type is a call that went nowhere.
    public static func of(_ error: any Error) -> PassingCause {
        guard let error = error as? HTTPCallError else { return .unreachable }
        switch error.kind {
        case .timedOut: return .timedOut
        case .setup, .unreachable, .answerTooLarge: return .unreachable
        }
    }

    /// The cause of an answer that brought no token, by its status (RFC 9110 §15.6, RFC 6585 §4):
    /// 429 and 5xx say "later", anything else is an answer that could not be used.
    public static func of(status: Int) -> PassingCause {
        switch status {
        case 429: return .rateLimited
        case 500...599: return .unavailable
        default: return .badAnswer
        }
    }
}

/// Where tokens come from. Every method is called on the manager's token thread only, one call at a
/// time, so a source may keep mutable state without locks and may block (read files, run commands,
/// call identity providers).
public protocol TokenSource: AnyObject {
    /// The configured type, for logs and `status` ("static", "file", "exec", "oauth2_refresh", …).
    var kind: String { get }
    /// The lifetime assumed when neither a JWT `exp` nor the answer says when the token expires;
    /// nil: such a token does not expire.
    var defaultLifetime: Double? { get }
    /// How often `inputChanged()` is called, in seconds; nil: never (nothing to watch).
    var pollInterval: Double? { get }

    /// Obtains a token. `current` is the newest published token, if any (a source may hand it back
    /// unchanged, or use it to decide what to refresh).
    func fetch(current: TokenSnapshot?) throws -> IssuedToken
    /// True when the source's input changed since the last call (a rewritten file, a store written by
    /// another process) so that a fetch is worth doing now, even during a backoff or after a refusal.
    func inputChanged() -> Bool
}

extension TokenSource {
    public var pollInterval: Double? { nil }
    public func inputChanged() -> Bool { false }
}

/// Whether the credential needs no session (CONTRACT "Signals, admin, logs": `status` says
/// `session: not needed`): a static token, a token file, a command's output, or AWS keys read as
/// they are (`source: environment`, or `default` when their variables are set) with no role
/// assumed with them. Nothing of these is fetched into the store, and nobody logs in.
public func needsNoSession(_ credentials: CredentialsConfiguration, environment: [String: String]) -> Bool {
    switch credentials.source {
    case .static, .file, .exec:
        return true
    case .aws(let aws):
        return !aws.fetchesCredentials(environment: environment)
    case .oauth2Refresh, .oauth2ClientCredentials, .cognito, .jsonRefresh, .oauth2JWTBearer, .oauth2TokenExchange, .gceMetadata,
        .azureManagedIdentity, .gitHubApp:
        return false
    }
}

/// Builds the source that `configuration.credentials.type` names.
public func makeTokenSource(_ configuration: Configuration, logger: Logger = Logger(label: "tokenproxy")) throws -> any TokenSource {
    let credentials = configuration.credentials
    switch credentials.source {
    case .static(let c):
        return try StaticTokenSource(c)
    case .file(let c):
        return try FileTokenSource(c)
    case .exec(let c):
        return try ExecTokenSource(c, defaultLifetime: credentials.defaultLifetime, withholding: secretVariables(configuration))
    case .aws(let c) where !c.fetchesCredentials(environment: ProcessInfo.processInfo.environment):
        return AWSKeysTokenSource(c, environment: ProcessInfo.processInfo.environment)
    case .oauth2Refresh, .oauth2ClientCredentials, .cognito, .jsonRefresh, .oauth2JWTBearer, .oauth2TokenExchange, .gceMetadata,
        .azureManagedIdentity, .gitHubApp, .aws:
        return try makeSessionTokenSource(configuration, logger: logger)
    }
}

extension CredentialsConfiguration {
    /// Whether the credentials live in the store as a session, where `login`, `token`, `status` and
    /// `logout` find them: every type that keeps one (`CredentialsType.keepsSession`) but `type: aws`
    /// with keys from the environment or `_file` keys, which are never stored (`AWSKeysTokenSource`).
    public func keepsSession(environment: [String: String]) -> Bool {
        if case .aws(let c) = source { return c.fetchesCredentials(environment: environment) }
        return type.keepsSession
    }
}

/// The environment variables that the configuration's `*_env` keys name (read or not: a key the
/// type does not use still names a secret).
func secretVariables(_ configuration: Configuration) -> Set<String> {
    var names = Set<String>()
    let secrets = configuration.credentials.source.secrets + [configuration.access.requireValue, configuration.store.redis?.password].compactMap { $0 }
    for secret in secrets {
        if case .env(let name) = secret.origin { names.insert(name) }
    }
    return names.union(configuration.credentials.unusedSecretVariables)
}

/// The provider that `configuration.credentials.type` names, for the types that call an identity
/// provider (the oauth2_* types, cognito, json_refresh and the metadata identities).
public func makeIdentityProvider(_ credentials: CredentialsConfiguration) throws -> any IdentityProvider {
    switch credentials.source {
    case .oauth2Refresh, .oauth2ClientCredentials, .oauth2JWTBearer, .oauth2TokenExchange:
        return try OAuth2Provider(credentials)
    case .gceMetadata(let c):
        return CloudIdentityProvider(.gce(c))
    case .azureManagedIdentity(let c):
        return CloudIdentityProvider(.azure(c))
    case .cognito(let c):
        guard let pool = c.identityPool else { return try CognitoProvider(c) }
        return CognitoIdentityPoolProvider(try CognitoProvider(c), pool: pool)
    case .jsonRefresh(let c):
        return try JSONRefreshProvider(c)
    case .gitHubApp(let c):
        return try GitHubAppProvider(c)
    case .static, .file, .exec:
        throw ConfigurationError(keyPath: "credentials.type", reason: "\(credentials.type.rawValue) has no identity provider to log in to")
    case .aws(let c):
        return AWSIdentityProvider(try makeAWSCredentialSource(c, environment: ProcessInfo.processInfo.environment))
    }
}

/// The session-backed source (provider + `store.path`) that the server and the CLI commands share.
public func makeSessionTokenSource(_ configuration: Configuration, logger: Logger) throws -> SessionTokenSource {
    let credentials = configuration.credentials
    let provider = try makeIdentityProvider(credentials)
    let (store, metrics) = try makeTokenStore(configuration.store, logger: logger)
    return SessionTokenSource(
        provider: provider,
        store: store,
        storeMetrics: metrics,
        seedRefreshToken: credentials.source.seedRefreshToken?.value.trimmingWhitespace(),
        defaultLifetime: credentials.defaultLifetime,
        refreshMargin: credentials.refreshMargin,
        logger: logger
    )
}

/// What `check` can know about the credentials' files before start beyond the loader's checks (a
/// key file that holds no usable key, an algorithm the key cannot sign), as the error the server
/// would stop with; nil when there is nothing wrong. Makes no network call.
public func credentialFileProblem(_ credentials: CredentialsConfiguration) -> ConfigurationError? {
    if case .gitHubApp(let c) = credentials.source {
        // Parses the key file when it is there (one that is not yet is read at the first token request).
        do {
            _ = try GitHubAppProvider(c)
            return nil
        } catch let error as ConfigurationError {
            return error
        } catch {
            return ConfigurationError(keyPath: "credentials", reason: "\(error)")
        }
    }
    guard let client = credentials.source.oauth2Client else { return nil }
    do {
        _ = try OAuth2Provider(credentials)
    } catch let error as ConfigurationError {
        return error
    } catch {
        return ConfigurationError(keyPath: "credentials", reason: "\(error)")
    }
    // A file that must hold a JWT and is there already, but holds none (one that is not there
    // yet, such as a projected token before the pod starts, is read at the first token request).
    var jwtFiles: [(String, String)] = []
    if case .oauth2JWTBearer(let c) = credentials.source, case .file(let path) = c.assertion { jwtFiles.append(("assertion_file", path)) }
    if case .clientAssertion(let path) = client.authentication { jwtFiles.append(("client_assertion_file", path)) }
    if case .oauth2TokenExchange(let c) = credentials.source {
        if c.subjectTokenType == TokenTypeURI.jwt { jwtFiles.append(("subject_token_file", c.subjectTokenFile)) }
        if let actor = c.actorToken, actor.type == TokenTypeURI.jwt { jwtFiles.append(("actor_token_file", actor.file)) }
    }
    for (key, path) in jwtFiles {
        guard case .success(let bytes) = SmallFile.read(path, limit: 1 << 20) else { continue }
        let text = String(decoding: bytes, as: UTF8.self).trimmingWhitespace()
        if !text.isEmpty, JWT.claims(of: text) == nil {
            return ConfigurationError(keyPath: "credentials.\(key)", reason: "\(path) does not hold a JWT (header.payload.signature)")
        }
    }
    return nil
}
