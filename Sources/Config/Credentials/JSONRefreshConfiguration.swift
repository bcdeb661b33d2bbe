/// `type: json_refresh`: a backend's own login and refresh calls, whose JSON answers the dotted
/// paths locate.
public struct JSONRefreshConfiguration: Sendable, Equatable {
    /// POST {"username":…,"password":…}, used by `tokenproxy login`.
    public var loginURL: String? = nil
    public var refreshURL: String
    public var refreshTokenIn: CredentialsConfiguration.RefreshTokenPlacement = .header
    public var accessTokenPath: String = "access_token"
    public var refreshTokenPath: String = "refresh_token"
    /// At most one of the two is set.
    public var expiresInPath: String? = "expires_in"
    public var expiresAtPath: String? = nil
    public var seedRefreshToken: Secret? = nil

    public init(refreshURL: String, loginURL: String? = nil) {
        self.refreshURL = refreshURL
        self.loginURL = loginURL
    }
}

extension Keys {
    static let jsonRefresh =
        ["login_url", "refresh_url", "refresh_token_in", "access_token_path", "refresh_token_path", "expires_in_path", "expires_at_path"]
        + seedRefreshToken
}

extension JSONRefreshConfiguration {
    static func parse(_ s: YAMLSection, errorsBefore: Int, in load: LoadContext) -> JSONRefreshConfiguration? {
        let loginURL = load.found.collect { try load.checkURL(s, "login_url") }
        let refreshURL = load.found.collect { try load.checkURL(s, "refresh_url") }
        var c = JSONRefreshConfiguration(refreshURL: refreshURL ?? "", loginURL: loginURL)
        if let value = load.found.collect({ try s.choice("refresh_token_in", CredentialsConfiguration.RefreshTokenPlacement.self) }) {
            c.refreshTokenIn = value
        }
        if let value = load.found.collect({ try s.nonEmptyString("access_token_path") }) { c.accessTokenPath = value }
        if let value = load.found.collect({ try s.nonEmptyString("refresh_token_path") }) { c.refreshTokenPath = value }
        load.found.collect {
            let expiresIn = try s.nonEmptyString("expires_in_path")
            let expiresAt = try s.nonEmptyString("expires_at_path")
            if expiresIn != nil, expiresAt != nil {
                throw ConfigurationError(keyPath: "credentials.expires_at_path", reason: "set only one of expires_in_path and expires_at_path")
            }
            if let expiresAt {
                c.expiresAtPath = expiresAt
                c.expiresInPath = nil
            } else if let expiresIn {
                c.expiresInPath = expiresIn
            }
        }
        c.seedRefreshToken = load.found.collect { try load.readSecret(s, "refresh_token", literal: false, unsetEnvIsAbsent: true) }
        guard load.found.errors.count == errorsBefore else { return nil }
        guard refreshURL != nil else {
            load.found.record(ConfigurationError.missingCredential("refresh_url", for: .jsonRefresh))
            return nil
        }
        return c
    }
}

extension JSONRefreshConfiguration {
    func describe(_ line: (String, String?) -> Void) {
        line("login_url", loginURL)
        line("refresh_url", refreshURL)
        line("refresh_token_in", refreshTokenIn.rawValue)
        line("access_token_path", accessTokenPath)
        line("refresh_token_path", refreshTokenPath)
        line("expires_in_path", expiresInPath)
        line("expires_at_path", expiresAtPath)
        line("seed_refresh_token", seedRefreshToken?.description ?? "none")
    }
}
