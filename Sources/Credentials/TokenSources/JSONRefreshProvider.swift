import Config
import Foundation
import IdentityHTTP

/// `type: json_refresh`: a backend's own login and refresh calls, answering JSON whose fields the
/// configuration locates with dotted paths (CONTRACT.md, `credentials:`).
///
/// - login: POST `login_url` with `{"username":…,"password":…}`; 400/401/403 refuse the login.
/// - refresh: POST `refresh_url` with the refresh token in `Authorization: Bearer …` (empty body) or
///   in `{"refresh_token":…}`; 400/401/403 refuse it and end the session (CONTRACT.md point 5).
/// - 429, 5xx, network errors and answers that cannot be read are passing failures (point 6).
/// - An answer without a refresh token keeps the old one; there is nothing to revoke.
public final class JSONRefreshProvider: IdentityProvider {
    public let kind = "json_refresh"
    public let fetchesWithoutSession = false

    let loginURL: String?
    let refreshURL: String
    let refreshTokenIn: CredentialsConfiguration.RefreshTokenPlacement
    let accessTokenPath: JSONPath
    let refreshTokenPath: JSONPath
    let expiresInPath: JSONPath?
    let expiresAtPath: JSONPath?
    /// Seconds for one call to the backend.
    var timeout: Double = 30

    /// A lifetime beyond this is taken for a mistake (milliseconds for seconds, a bad field).
    static let longestLifetime: Double = 10 * 365 * 86400

    public init(_ credentials: JSONRefreshConfiguration) throws {
        let refreshURL = credentials.refreshURL
        guard !refreshURL.isEmpty else {
            throw ConfigurationError(keyPath: "credentials.refresh_url", reason: "json_refresh needs refresh_url")
        }
        try Self.checkURL(refreshURL, key: "refresh_url")
        if let loginURL = credentials.loginURL { try Self.checkURL(loginURL, key: "login_url") }
        self.refreshURL = refreshURL
        self.loginURL = credentials.loginURL
        self.refreshTokenIn = credentials.refreshTokenIn
        self.accessTokenPath = try Self.path(credentials.accessTokenPath, key: "access_token_path")
        self.refreshTokenPath = try Self.path(credentials.refreshTokenPath, key: "refresh_token_path")
        self.expiresInPath = try credentials.expiresInPath.map { try Self.path($0, key: "expires_in_path") }
        self.expiresAtPath = try credentials.expiresAtPath.map { try Self.path($0, key: "expires_at_path") }
    }

    public func login(_ input: LoginInput, prompt: @escaping (String) -> Void) throws -> IssuedToken {
        guard case .password(let username, let password) = input else {
            throw TokenSourceError.configuration("json_refresh logs in with a user name and a password only")
        }
        guard let loginURL else {
            throw TokenSourceError.configuration("credentials.login_url is not set, so tokenproxy cannot log in")
        }
        let body = try Self.jsonBody(["username": username, "password": password])
        let request = HTTPCallRequest(
            url: loginURL,
            headers: ["Content-Type: application/json", "Accept: application/json"],
            body: body,
            timeout: timeout
        )
        return try exchange(request, call: "login", refusal: "the backend refused the login")
    }

    public func refresh(_ session: StoredSession?) throws -> IssuedToken {
        guard let refreshToken = session?.refreshToken, !refreshToken.isEmpty else {
            throw TokenSourceError.refused("there is no refresh token; run tokenproxy login")
        }
        guard BearerToken.isUsable(refreshToken) else {
            throw TokenSourceError.refused("the stored refresh token is unusable (spaces or control characters); run tokenproxy login")
        }
        var request = HTTPCallRequest(url: refreshURL, headers: ["Accept: application/json"], timeout: timeout)
        switch refreshTokenIn {
        case .header:
            // An empty body: no Content-Type (curl would otherwise add a form type to a POST).
            request.headers += ["Authorization: Bearer \(refreshToken)", "Content-Type:"]
        case .body:
            request.headers.append("Content-Type: application/json")
            request.body = try Self.jsonBody(["refresh_token": refreshToken])
        }
        return try exchange(request, call: "refresh", refusal: "the backend refused the refresh token")
    }

    /// No revocation URL exists for this type: nothing to do.
    public func revoke(refreshToken: String) throws {}

    // MARK: - The exchange

    private func exchange(_ request: HTTPCallRequest, call: String, refusal: String) throws -> IssuedToken {
        let key = call == "login" ? "login_url" : "refresh_url"
        let response: HTTPCallResponse
        do {
            response = try BlockingHTTPClient.perform(request)
        } catch {
            throw TokenSourceError.cannotReach("the backend's \(key)", error)
        }
        switch response.status {
        case 200..<300:
            return try read(response)
        case 400, 401, 403:
            throw TokenSourceError.refused("\(refusal) (HTTP \(response.status))")
        case 429, 500...:
            throw TokenSourceError.passing("the backend answered the \(call) with HTTP \(response.status)", cause: .of(status: response.status))
        case 300..<400, 404, 405:
            throw TokenSourceError.configuration(
                "the backend answered the \(call) with HTTP \(response.status); check credentials.\(key)"
            )
        default:
            throw TokenSourceError.passing("the backend answered the \(call) with HTTP \(response.status)", cause: .of(status: response.status))
        }
    }

    /// The token set of a 2xx answer. Every defect is a passing failure with a reason, never a crash
    /// and never an empty token.
    func read(_ response: HTTPCallResponse) throws -> IssuedToken {
        guard let answer = JSONValue.parse(response.body), case .object = answer else {
            throw TokenSourceError.passing(unreadableAnswer(response, from: "the backend"), cause: .of(status: response.status))
        }
        guard let accessToken = accessTokenPath.lookup(in: answer)?.string, !accessToken.isEmpty else {
            throw TokenSourceError.passing("the backend's answer has no access token at \(accessTokenPath)")
        }
        guard BearerToken.isUsable(accessToken) else {
            throw TokenSourceError.passing(
                "the backend's access token at \(accessTokenPath) contains spaces, control characters or non-ASCII bytes"
            )
        }
        var refreshToken: String?
        switch refreshTokenPath.lookup(in: answer) {
        case nil, .null?:
            refreshToken = nil  // keep the old one
        case .string(let value)?:
            if value.isEmpty { break }
            guard BearerToken.isUsable(value) else {
                throw TokenSourceError.passing(
                    "the backend's refresh token at \(refreshTokenPath) contains spaces, control characters or non-ASCII bytes"
                )
            }
            refreshToken = value
        default:
            throw TokenSourceError.passing("the backend's refresh token at \(refreshTokenPath) is not a string")
        }
        registerSecret(accessToken)
        if let refreshToken { registerSecret(refreshToken) }

        var issued = IssuedToken(accessToken: accessToken, refreshToken: refreshToken, serverDate: response.date)
        if let expiresAtPath, let value = expiresAtPath.lookup(in: answer), value != .null {
            issued.expiresAt = try expiresAt(value, path: expiresAtPath, serverDate: response.date)
        }
        if issued.expiresAt == nil, let expiresInPath, let value = expiresInPath.lookup(in: answer), value != .null {
            guard let seconds = value.number else {
                throw TokenSourceError.passing("the backend's \(expiresInPath) is not a number of seconds")
            }
            guard seconds > 0, seconds <= Self.longestLifetime else {
                throw TokenSourceError.passing(
                    "the backend's \(expiresInPath) (\(formatSeconds(seconds))) is not between 0 and 10 years"
                )
            }
            issued.expiresIn = seconds
        }
        return issued
    }

    /// Epoch seconds, or an RFC 3339 time; a time more than 10 years away (milliseconds?) or before
    /// the epoch is refused.
    private func expiresAt(_ value: JSONValue, path: JSONPath, serverDate: Double?) throws -> Double {
        let seconds: Double
        if let number = value.number {
            seconds = number
        } else if let text = value.string, let parsed = RFC3339.parse(text) {
            seconds = parsed
        } else {
            throw TokenSourceError.passing("the backend's \(path) is neither epoch seconds nor an RFC 3339 time")
        }
        let now = serverDate ?? Date().timeIntervalSince1970
        guard seconds > 0 else {
            throw TokenSourceError.passing("the backend's \(path) is not a time after 1970")
        }
        guard seconds - now <= Self.longestLifetime else {
            throw TokenSourceError.passing("the backend's \(path) is more than 10 years away (milliseconds instead of seconds?)")
        }
        return seconds
    }

    // MARK: - Helpers

    static func jsonBody(_ fields: [String: String]) throws -> [UInt8] {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        do {
            return Array(try encoder.encode(fields))
        } catch {
            throw TokenSourceError.configuration("cannot encode the request body as JSON")
        }
    }

    private static func path(_ text: String, key: String) throws -> JSONPath {
        guard let path = JSONPath(text) else {
            throw ConfigurationError(
                keyPath: "credentials.\(key)",
                reason: "\"\(text)\" is no dotted JSON path (names separated by single dots, e.g. data.tokens.access)"
            )
        }
        return path
    }

    private static func checkURL(_ url: String, key: String) throws {
        let lowered = url.lowercased()
        guard lowered.hasPrefix("http://") || lowered.hasPrefix("https://") else {
            throw ConfigurationError(keyPath: "credentials.\(key)", reason: "must be an http:// or https:// URL")
        }
    }
}
