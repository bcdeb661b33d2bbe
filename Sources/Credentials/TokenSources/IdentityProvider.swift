import Config

/// What `tokenproxy login` hands to an identity provider.
public enum LoginInput: Sendable {
    case password(username: String, password: String)
    /// RFC 8628 device authorization: the provider prints the verification URI and user code through
    /// `prompt` and polls until the user approved, denied or the code expired.
    case device
    /// No user involved (client_credentials).
    case none
    /// Authorization code with PKCE through the person's browser (Login/BrowserLogin.swift).
    case browser(BrowserLoginOptions)
    /// A password login whose challenges (MFA, a new password) are answered through `questions`
    /// (Cognito, Login/CognitoChallenges.swift); other providers take it as `.password`.
    case passwordWithChallenges(username: String, password: String, questions: any LoginQuestions)
}

/// What `tokenproxy login` was told for a browser login.
public struct BrowserLoginOptions: Sendable {
    /// `login_hint`, from `--username`.
    public var loginHint: String?
    /// false with `--no-browser`: nothing is opened, the URL goes to `showURL` and a paste on
    /// `pasteFD` is accepted.
    public var openBrowser: Bool
    public var timeout: Double
    /// `$BROWSER`: a program run without a shell with the URL as its one argument.
    public var browser: String?
    /// Whether `xdg-open` may be tried (a display is set).
    public var hasDisplay: Bool
    public var pasteFD: Int32?
    /// Prints the URL on stdout (`--no-browser`).
    public var showURL: @Sendable (String) -> Void
    /// Binds the loopback redirect (LoginListener's `LoopbackListener.bind`); a taken port throws.
    public var listen: @Sendable (LoopbackRedirect) throws -> any RedirectListener

    public init(
        loginHint: String?, openBrowser: Bool, timeout: Double, browser: String?, hasDisplay: Bool, pasteFD: Int32?,
        showURL: @escaping @Sendable (String) -> Void, listen: @escaping @Sendable (LoopbackRedirect) throws -> any RedirectListener
    ) {
        self.loginHint = loginHint
        self.openBrowser = openBrowser
        self.timeout = timeout
        self.browser = browser
        self.hasDisplay = hasDisplay
        self.pasteFD = pasteFD
        self.showURL = showURL
        self.listen = listen
    }
}

/// A question of a login's challenge (an MFA code, a new password), asked of the person.
public struct LoginQuestion: Sendable, Equatable {
    public var text: String
    /// Not echoed on a terminal, never logged.
    public var secret: Bool

    public init(_ text: String, secret: Bool) {
        self.text = text
        self.secret = secret
    }
}

/// Where the answers come from: the terminal, or the next lines of stdin with `--password-stdin`,
/// each read only when its question is asked.
public protocol LoginQuestions: AnyObject, Sendable {
    /// The answer, or nil when there is none (the end of stdin).
    func answer(_ question: LoginQuestion) -> String?
}

/// The calls one kind of identity provider offers (OAuth2 token endpoint, Cognito InitiateAuth, a
/// backend's own JSON login and refresh). Implementations block: they run on the token manager's
/// thread or in a CLI command, never on an event loop. Every failure is a `TokenSourceError` whose
/// class follows CONTRACT.md points 5 and 6: `.refused` ends the session (invalid_grant,
/// NotAuthorizedException, a JSON backend's 400/401/403 on refresh); `.configuration` for answers
/// that blame the client (invalid_client, unauthorized_client, invalid_scope); `.passing` for
/// network errors, 5xx, 429 and unreadable answers. Messages never contain a token or a secret.
public protocol IdentityProvider: AnyObject {
    /// The credentials type ("oauth2_refresh", "cognito", …).
    var kind: String { get }
    /// True when there is no refresh token and a new token is simply fetched again
    /// (client_credentials): `serve` gets the first token itself and a refusal ends no session.
    var fetchesWithoutSession: Bool { get }

    /// Trades the stored refresh token for a new token set. A nil `refreshToken` in the answer keeps
    /// the old one (Cognito). For `fetchesWithoutSession` providers, `session` may be nil.
    func refresh(_ session: StoredSession?) throws -> IssuedToken

    /// Obtains a first token set.
    func login(_ input: LoginInput, prompt: @escaping (String) -> Void) throws -> IssuedToken

    /// Revokes a refresh token (RFC 7009) where the provider supports it; otherwise does nothing.
    func revoke(refreshToken: String) throws

    /// The DPoP key of a stored session's token (RFC 9449), for the types that use `dpop`.
    func dpopProver(for session: StoredSession) -> DPoPProver?
}

extension IdentityProvider {
    public func dpopProver(for session: StoredSession) -> DPoPProver? { nil }
}
