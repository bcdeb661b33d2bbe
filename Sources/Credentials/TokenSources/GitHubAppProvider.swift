import Basics
import Config
import Foundation
import IdentityHTTP
import Logging
import Sockets

/// `type: github_app` (CONTRACT.md "GitHub App installation tokens"): the app signs a JWT with its
/// RSA key and trades it for an installation token, fetched anew before that token expires like
/// client_credentials (no refresh token; GitHub's own "Authenticating as a GitHub App installation").
///
/// - the app JWT: RS256, `iss` = app_id, `iat` 60 s in the past (GitHub's advice against clock
///   drift), `exp` 9 minutes after `iat` (GitHub takes at most 10), signed afresh for every call;
/// - `POST {api_url}/app/installations/{installation_id}/access_tokens` with GitHub's media type
///   and API version, and a JSON body narrowing the token (`repositories`, `permissions`);
/// - `201 Created` (200 too) with `token` and `expires_at` (RFC 3339), which sets the lifetime;
/// - 401, 403, 404 and 422 refuse the app (a wrong key, app or installation, a narrowing the
///   installation does not have): a configuration error, logged with GitHub's `message` and retried
///   with backoff like every passing failure (CONTRACT.md point 5, "blames the client");
///   a 403 or 429 that says the rate limit ran out, 5xx and timeouts are passing failures;
/// - GitHub checks the JWT's times on its own clock: a 401 whose `Date` shows that clock apart from
///   ours is answered once more with a JWT signed on GitHub's time, but only for an offset of at
///   most 10 minutes (`apiClock`).
public final class GitHubAppProvider: IdentityProvider {
    public let kind = CredentialsType.gitHubApp.rawValue
    public let fetchesWithoutSession = true

    let configuration: GitHubAppConfiguration
    let tokenURL: String
    let body: [UInt8]
    /// nil until the key file is there (a secret volume may be mounted after the start).
    private var key: KeyFile?
    /// GitHub's clock minus ours, learnt from its `Date` when they differ by more than
    /// `TokenExpiry.skewTolerance` and at most `maxClockOffset`: the JWT's times are GitHub's (it
    /// refuses an `iat` in its future).
    private var clockOffset: Double = 0
    var timeout: Double = 30
    var now: () -> Double = { Date().timeIntervalSince1970 }

    static let keyPath = "credentials.private_key_file"

    public init(_ configuration: GitHubAppConfiguration) throws {
        self.configuration = configuration
        tokenURL = "\(configuration.apiURL)/app/installations/\(configuration.installationID)/access_tokens"
        body = Self.requestBody(repositories: configuration.repositories, permissions: configuration.permissions)
        // A key file that is there must hold a usable RSA key now (`check` and `serve` stop on it).
        if FileSignature.of(configuration.privateKeyFile) != nil { key = try Self.keyFile(configuration.privateKeyFile) }
    }

    private static func keyFile(_ path: String) throws -> KeyFile {
        try KeyFile(path, algorithm: .rs256, keyID: nil, keyPath: keyPath)
    }

    // MARK: - Pure parts

    /// The largest offset from the local clock that the JWT follows (CONTRACT.md "GitHub App
    /// installation tokens"): an answer dated further off may not make the proxy sign a JWT that
    /// becomes valid in the future, or one already expired.
    static let maxClockOffset: Double = 600

    /// What the API's clock says of ours.
    enum APIClock: Equatable {
        /// Within `TokenExpiry.skewTolerance` (or no usable date): the JWT is signed on our clock.
        case agrees
        /// The API's clock minus ours, followed by the JWT.
        case off(by: Double)
        /// The API's clock minus ours, beyond `maxClockOffset`: logged, not followed.
        case tooFarOff(by: Double)
    }

    /// How the API's `Date` (`date`, seconds since the epoch) compares with our clock at `now`.
    static func apiClock(date: Double, now: Double) -> APIClock {
        let offset = date - now
        guard offset.isFinite, abs(offset) > TokenExpiry.skewTolerance else { return .agrees }
        return abs(offset) <= maxClockOffset ? .off(by: offset) : .tooFarOff(by: offset)
    }

    /// The app JWT's claims (GitHub: `iat` 60 s back against clock drift, `exp` at most 10 minutes
    /// after it, `iss` the app id or client id).
    static func appClaims(appID: String, now: Double) -> [(String, JOSEValue)] {
        let iat = Int(now) - 60
        return [("iat", .int(iat)), ("exp", .int(iat + 540)), ("iss", .string(appID))]
    }

    /// The app JWT, RS256 (the only algorithm GitHub takes for it).
    static func appJWT(appID: String, key: SigningKey, now: Double) throws -> String {
        try JWS.sign(header: [("alg", .string("RS256")), ("typ", .string("JWT"))], claims: appClaims(appID: appID, now: now), key: key)
    }

    /// `{"repositories":[…],"permissions":{…}}` with what is configured; `{}` without narrowing.
    static func requestBody(repositories: [String]?, permissions: [GitHubAppConfiguration.Permission]) -> [UInt8] {
        var out: [UInt8] = Array("{".utf8)
        func string(_ text: String) {
            out.append(UInt8(ascii: "\""))
            JSONString.appendEscaped(text, to: &out)
            out.append(UInt8(ascii: "\""))
        }
        if let repositories {
            out.append(contentsOf: "\"repositories\":[".utf8)
            for (index, name) in repositories.enumerated() {
                if index > 0 { out.append(UInt8(ascii: ",")) }
                string(name)
            }
            out.append(UInt8(ascii: "]"))
        }
        if !permissions.isEmpty {
            if repositories != nil { out.append(UInt8(ascii: ",")) }
            out.append(contentsOf: "\"permissions\":{".utf8)
            for (index, permission) in permissions.enumerated() {
                if index > 0 { out.append(UInt8(ascii: ",")) }
                string(permission.name)
                out.append(UInt8(ascii: ":"))
                string(permission.access.rawValue)
            }
            out.append(UInt8(ascii: "}"))
        }
        out.append(UInt8(ascii: "}"))
        return out
    }

    /// What an answer to the token call means: the token, or the failure it is.
    static func read(_ response: HTTPCallResponse, sent secrets: [String]) throws -> IssuedToken {
        let answer = JSONValue.parse(response.body)
        guard response.status == 201 || response.status == 200 else {
            throw failure(response, message: answer?["message"]?.string, sent: secrets)
        }
        guard let token = answer?["token"]?.string, BearerToken.isUsable(token) else {
            throw TokenSourceError.passing("github_app: the answer to the installation token request has no usable token")
        }
        registerSecret(token)
        var issued = IssuedToken(accessToken: token, serverDate: response.date)
        if let text = answer?["expires_at"]?.string {
            guard let expiresAt = RFC3339.parse(text) else {
                throw TokenSourceError.passing("github_app: the installation token's expires_at is not an RFC 3339 time")
            }
            issued.expiresAt = expiresAt
        }
        return issued
    }

    /// A refusal of the app, a rate limit (GitHub answers 403 or 429 with `x-ratelimit-remaining: 0`
    /// or `retry-after`), or an answer that says "later" or nothing usable.
    static func failure(_ response: HTTPCallResponse, message: String?, sent secrets: [String]) -> TokenSourceError {
        let said = OAuth2ErrorAnswer.safeDescription(message, secrets: secrets).map { ": \($0)" } ?? ""
        let status = response.status
        let rateLimited = status == 429 || (status == 403 && (response.header("retry-after") != nil || response.header("x-ratelimit-remaining") == "0"))
        if rateLimited {
            return .passing("github_app: GitHub's rate limit for the installation token request ran out (HTTP \(status))\(said)", cause: .rateLimited)
        }
        switch status {
        case 401, 403, 404, 422:
            return .configuration(
                "GitHub refused the app's installation token request (HTTP \(status))\(said); check app_id, installation_id, "
                    + "private_key_file, and that repositories and permissions are within the installation's")
        default:
            return .passing("github_app: the installation token request was answered HTTP \(status)\(said)", cause: .of(status: status))
        }
    }

    // MARK: - IdentityProvider

    public func refresh(_ session: StoredSession?) throws -> IssuedToken {
        let offsetUsed = clockOffset
        var (response, jwt) = try mint()
        // A JWT refused because GitHub's clock disagrees with ours: once more, signed on GitHub's time.
        if response.status == 401, abs(clockOffset - offsetUsed) > TokenExpiry.skewTolerance {
            (response, jwt) = try mint()
        }
        return try Self.read(response, sent: [jwt])
    }

    /// One token call with a JWT signed now; the answer and the JWT it carried.
    private func mint() throws -> (HTTPCallResponse, String) {
        let signingKey = try currentKey()
        let jwt: String
        do {
            jwt = try Self.appJWT(appID: configuration.appID, key: signingKey, now: now() + clockOffset)
        } catch {
            throw TokenSourceError.configuration("\(Self.keyPath): cannot sign the app JWT (\(type(of: error)))")
        }
        registerSecret(jwt)
        var call = HTTPCallRequest(
            url: tokenURL, method: "POST",
            headers: [
                "Authorization: Bearer \(jwt)", "Accept: application/vnd.github+json", "X-GitHub-Api-Version: 2022-11-28",
                "User-Agent: tokenproxy", "Content-Type: application/json",
            ],
            body: body)
        call.timeout = timeout
        let response: HTTPCallResponse
        do {
            response = try BlockingHTTPClient.perform(call)
        } catch {
            throw TokenSourceError.cannotReach("\(tokenURL) for github_app", error)
        }
        if let date = response.date {
            switch Self.apiClock(date: date, now: now()) {
            case .agrees:
                clockOffset = 0
            case .off(let offset):
                clockOffset = offset
            case .tooFarOff(let offset):
                clockOffset = 0
                Logger(label: "tokenproxy").warning(
                    "github_app: the API's Date is \(Int(offset)) s from the local clock, more than \(Int(Self.maxClockOffset)) s: not followed, the app JWT is signed on the local clock (check this machine's clock)"
                )
            }
        }
        return (response, jwt)
    }

    /// The key, parsed again when its file changed; an absent file is a configuration error until it is there.
    private func currentKey() throws -> SigningKey {
        if let key { return try key.current() }
        guard FileSignature.of(configuration.privateKeyFile) != nil else {
            throw TokenSourceError.configuration("\(Self.keyPath): cannot read \(configuration.privateKeyFile): no such file")
        }
        do {
            let file = try Self.keyFile(configuration.privateKeyFile)
            key = file
            return try file.current()
        } catch let error as ConfigurationError {
            throw TokenSourceError.configuration(error.description)
        }
    }

    public func login(_ input: LoginInput, prompt: @escaping (String) -> Void) throws -> IssuedToken {
        try refresh(nil)
    }

    /// Installation tokens are not revoked at logout: each expires within the hour.
    public func revoke(refreshToken: String) throws {}
}
