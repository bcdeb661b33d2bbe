import Config
import Foundation
import IdentityHTTP
import Logging
import Sockets

/// `type: oauth2_refresh`, `oauth2_client_credentials` (RFC 6749), `oauth2_jwt_bearer` (RFC 7523
/// §2.1) and `oauth2_token_exchange` (RFC 8693); the last three fetch a new token each time.
///
/// - refresh: the refresh_token grant (§6); client_credentials: §4.4 (no session: every fetch asks
///   for a new token, and a refusal is a passing failure, CONTRACT.md point 5).
/// - login: the password grant (§4.3) or the device authorization grant (RFC 8628).
/// - client authentication: `ClientAuthentication` (`client_auth`: basic, post, private_key_jwt,
///   client_secret_jwt, client_assertion, tls_client_auth, none), the same for every call.
/// - `scope`, `audience` and `extra_params` go with every token request.
/// - OpenID discovery (`issuer_url`) fills token_url, device_authorization_url and revocation_url
///   when they are absent; fetched on first need and cached; a failure is passing and retried.
/// - errors: `invalid_grant` refuses; `invalid_client`, `unauthorized_client`, `invalid_scope` (and
///   other answers that blame the request) are configuration errors; 5xx, 429, network errors,
///   unreadable answers are passing. No reason carries a token, a secret or the raw body.
public final class OAuth2Provider: IdentityProvider {
    public let kind: String
    public let fetchesWithoutSession: Bool

    let issuerURL: String?
    let type: CredentialsType
    let clientID: String?
    let clientSecret: String?
    let clientAuthentication: ClientAuthentication
    /// The grant of oauth2_jwt_bearer and oauth2_token_exchange.
    let grant: SecretlessGrant?
    /// `credentials.dpop` (RFC 9449): proofs on token requests, and the key DPoP tokens are bound to.
    let dpop: DPoPKeySource?
    /// The key of the token request in progress.
    private var prover: DPoPProver?
    /// The identity provider's newest `DPoP-Nonce` (RFC 9449 §8).
    private var identityProviderNonce: String?
    private var warnedBearer = false
    let scope: String?
    let audience: String?
    let extraParams: [(String, String)]
    /// Seconds for one call to the identity provider.
    var timeout: Double = 30
    /// RFC 8628: the longest a device login waits when the answer gives no `expires_in`.
    var deviceWaitLimit: Double = 900
    /// For tests: how the device flow waits between polls.
    var sleep: (Double) -> Void = { seconds in
        Syscall.sleep(min(seconds, 3600))
    }

    private var tokenURL: String?
    private var deviceAuthorizationURL: String?
    private var revocationURL: String?
    private var discovered = false
    /// login: browser (Login/BrowserLogin.swift).
    var authorizationURL: String?
    let redirect: LoopbackRedirect
    let authorizationParams: [String: String]

    /// Answers longer than this many seconds of life are taken for a unit mistake.
    static let longestLifetime: Double = 10 * 365 * 86400

    public init(_ credentials: CredentialsConfiguration) throws {
        type = credentials.type
        kind = type.rawValue
        guard let client = credentials.source.oauth2Client else {
            throw ConfigurationError(keyPath: "credentials.type", reason: "\(kind) is not an oauth2_* type")
        }
        // Only oauth2_refresh keeps a session a person logged in to; the others fetch anew each time.
        fetchesWithoutSession = !type.sessionNeedsLogin
        var refresh: OAuth2RefreshConfiguration? = nil
        if case .oauth2Refresh(let c) = credentials.source { refresh = c }
        let clientID = client.clientID.flatMap { $0.isEmpty ? nil : $0 }
        if clientID == nil, type == .oauth2Refresh || type == .oauth2ClientCredentials {
            throw ConfigurationError(keyPath: "credentials.client_id", reason: "\(kind) needs client_id")
        }
        for (key, value) in [
            ("issuer_url", client.issuerURL), ("token_url", client.tokenURL),
            ("device_authorization_url", refresh?.deviceAuthorizationURL), ("revocation_url", refresh?.revocationURL),
        ] {
            if let value, !Self.isHTTPURL(value) {
                throw ConfigurationError(keyPath: "credentials.\(key)", reason: "must be an http:// or https:// URL")
            }
        }
        guard client.tokenURL != nil || client.issuerURL != nil else {
            throw ConfigurationError(keyPath: "credentials.token_url", reason: "\(kind) needs token_url (or issuer_url for discovery)")
        }
        if type == .oauth2ClientCredentials, client.clientSecret == nil, [.basic, .post].contains(client.authentication.method) {
            throw ConfigurationError(
                keyPath: "credentials.client_secret_env", reason: "oauth2_client_credentials needs a client secret (client_secret_env or client_secret_file)")
        }
        self.clientID = clientID
        self.clientSecret = client.clientSecret.map(\.value).flatMap { $0.isEmpty ? nil : $0 }
        if let clientSecret { registerSecret(clientSecret) }
        self.clientAuthentication = try ClientAuthentication(client.authentication, clientID: clientID, secret: clientSecret)
        self.grant = try SecretlessGrant(credentials.source)
        self.dpop = try client.dpop.map(DPoPKeySource.init)
        self.scope = client.scope.flatMap { $0.isEmpty ? nil : $0 }
        self.audience = client.audience.flatMap { $0.isEmpty ? nil : $0 }
        self.extraParams = client.extraParams.sorted { $0.key < $1.key }.map { ($0.key, $0.value) }
        self.issuerURL = client.issuerURL
        self.tokenURL = client.tokenURL
        self.deviceAuthorizationURL = refresh?.deviceAuthorizationURL
        self.revocationURL = refresh?.revocationURL
        self.authorizationURL = refresh?.browser.authorizationURL
        self.redirect = refresh?.browser.redirectURI ?? .standard
        self.authorizationParams = refresh?.browser.authorizationParams ?? [:]
    }

    public func dpopProver(for session: StoredSession) -> DPoPProver? {
        try? dpop?.prover(for: session)
    }

    /// Whether `logout` has an endpoint to revoke at (configured, or discovered).
    public var revokes: Bool {
        if revocationURL != nil { return true }
        if issuerURL == nil { return false }
        return (try? endpoint(\.revocationURL, name: "revocation_url")) != nil
    }

    // MARK: - IdentityProvider

    public func refresh(_ session: StoredSession?) throws -> IssuedToken {
        prover = try dpop?.prover(for: session)
        if let grant {
            let tokenURL = try endpoint(\.tokenURL, name: "token_url") ?? ""
            let (form, secrets) = try grant.form(clientID: clientID, tokenEndpoint: tokenURL)
            // A nonce retry signs a new assertion: a jti is never sent twice.
            return try tokenRequest(form, call: grant.call, secrets: secrets) { try grant.form(clientID: self.clientID, tokenEndpoint: tokenURL).0 }
        }
        if fetchesWithoutSession {
            return try tokenRequest([("grant_type", "client_credentials")], call: "client_credentials grant", secrets: [])
        }
        guard let refreshToken = session?.refreshToken, !refreshToken.isEmpty else {
            throw TokenSourceError.loginRequired("there is no refresh token; run tokenproxy login")
        }
        return try tokenRequest(
            [("grant_type", "refresh_token"), ("refresh_token", refreshToken)], call: "refresh", secrets: [refreshToken])
    }

    public func login(_ input: LoginInput, prompt: @escaping (String) -> Void) throws -> IssuedToken {
        prover = try dpop?.prover(for: nil)
        switch input {
        case .password(let username, let password):
            registerSecret(password)
            return try tokenRequest(
                [("grant_type", "password"), ("username", username), ("password", password)], call: "login", secrets: [password])
        case .device:
            return try deviceLogin(prompt: prompt)
        case .browser(let options):
            return try browserLogin(options, prompt: prompt)
        case .passwordWithChallenges(let username, let password, _):
            return try login(.password(username: username, password: password), prompt: prompt)
        case .none:
            guard fetchesWithoutSession else {
                throw TokenSourceError.configuration("credentials.login is none: there is no login flow to run")
            }
            return try refresh(nil)
        }
    }

    public func revoke(refreshToken: String) throws {
        guard let url = try endpoint(\.revocationURL, name: "revocation_url") else { return }
        var form = [("token", refreshToken), ("token_type_hint", "refresh_token")]
        let request = try makeRequest(url: url, form: &form)
        let response: HTTPCallResponse
        do {
            response = try BlockingHTTPClient.perform(request)
        } catch {
            throw TokenSourceError.cannotReach("the revocation endpoint", error)
        }
        // RFC 7009 §2.2: 200 whether or not the token was valid.
        guard (200..<300).contains(response.status) else {
            throw failure(response, call: "revocation", secrets: [refreshToken])
        }
    }

    // MARK: - Requests

    /// One call to the token endpoint and its answer as a token set.
    /// `scopeAndAudience: false` for the code exchange, which takes the scope of the authorization
    /// request (RFC 6749 §4.1.3).
    func tokenRequest(
        _ grant: [(String, String)], call: String, secrets: [String], scopeAndAudience: Bool = true,
        again: (() throws -> [(String, String)])? = nil
    ) throws -> IssuedToken {
        guard let url = try endpoint(\.tokenURL, name: "token_url") else {
            throw TokenSourceError.configuration("the discovery document names no token_endpoint; set credentials.token_url")
        }
        var response = try post(url: url, form: grant, call: call, scopeAndAudience: scopeAndAudience, proof: true)
        // RFC 9449 §8: the identity provider demands a nonce; answered once.
        if let nonce = response.header("dpop-nonce"), prover != nil {
            let demanded = (400...401).contains(response.status) && JSONValue.parse(response.body)?["error"]?.string == "use_dpop_nonce"
            identityProviderNonce = nonce
            if demanded {
                response = try post(url: url, form: try again?() ?? grant, call: call, scopeAndAudience: scopeAndAudience, proof: true)
            }
        }
        guard (200..<300).contains(response.status) else {
            throw failure(response, call: call, secrets: secrets)
        }
        return try read(response, call: call)
    }

    private func post(
        url: String, form grant: [(String, String)], call: String, scopeAndAudience: Bool = true, proof: Bool = false
    ) throws -> HTTPCallResponse {
        var form = grant
        if scopeAndAudience, let scope { form.append(("scope", scope)) }
        if scopeAndAudience, let audience { form.append(("audience", audience)) }
        var request = try makeRequest(url: url, form: &form)
        if proof, let prover {
            // RFC 9449 §4.2: htm POST, htu the token endpoint; no ath on a token request.
            let value = prover.proof(
                method: "POST", url: url, accessTokenHash: nil, nonce: identityProviderNonce, now: Date().timeIntervalSince1970)
            request.headers.append("DPoP: \(value)")
        }
        do {
            return try BlockingHTTPClient.perform(request)
        } catch {
            throw TokenSourceError.cannotReach("the token endpoint for the \(call)", error)
        }
    }

    /// Adds the extra parameters and the client authentication.
    private func makeRequest(url: String, form: inout [(String, String)]) throws -> HTTPCallRequest {
        for (name, value) in extraParams where !form.contains(where: { $0.0 == name }) { form.append((name, value)) }
        var headers = ["Content-Type: application/x-www-form-urlencoded", "Accept: application/json"]
        var request = HTTPCallRequest(url: url, timeout: timeout)
        let tokenEndpoint = (try? endpoint(\.tokenURL, name: "token_url")).flatMap { $0 } ?? url
        try clientAuthentication.apply(form: &form, headers: &headers, request: &request, tokenEndpoint: tokenEndpoint)
        let body = form.map { FormEncoding.encode($0.0) + "=" + FormEncoding.encode($0.1) }.joined(separator: "&")
        request.headers = headers
        request.body = Array(body.utf8)
        return request
    }

    /// The token set of a 2xx answer (RFC 6749 §5.1).
    func read(_ response: HTTPCallResponse, call: String) throws -> IssuedToken {
        guard let answer = JSONValue.parse(response.body), case .object = answer else {
            throw TokenSourceError.passing(unreadableAnswer(response, from: "the token endpoint") + " to the \(call)")
        }
        guard case .string(let accessToken)? = answer["access_token"], !accessToken.isEmpty else {
            throw TokenSourceError.passing("the token endpoint's answer to the \(call) has no access_token")
        }
        guard BearerToken.isUsable(accessToken) else {
            throw TokenSourceError.passing("the access_token in the answer to the \(call) contains spaces, control characters or non-ASCII bytes")
        }
        registerSecret(accessToken)
        var boundTo: DPoPProver? = nil
        if let type = answer["token_type"]?.string, type.lowercased() == "dpop" {
            // RFC 9449 §5: bound to the key of this request's proof.
            guard let prover else {
                throw TokenSourceError.configuration("the token endpoint issued a DPoP token, but credentials.dpop is not set")
            }
            boundTo = prover
        } else if dpop != nil, !warnedBearer {
            warnedBearer = true
            Logger(label: "tokenproxy").warning(
                "\(kind): dpop is set, but the token endpoint answered token_type \"Bearer\"; the token goes upstream as it was issued")
        }
        // RFC 8693 §2.2.1: "N_A" when the issued token is not an access token.
        if boundTo == nil, let type = answer["token_type"]?.string, type.lowercased() != "bearer",
            !(grant?.isExchange == true && type == "N_A")
        {
            let shown = type.utf8.count <= 20 && type.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) ? type : "?"
            throw TokenSourceError.configuration("the token endpoint issued a \(shown) token, not a Bearer token")
        }
        var refreshToken: String? = nil
        switch answer["refresh_token"] {
        case nil, .null?:
            break
        case .string(let value)?:
            if !value.isEmpty {
                guard BearerToken.isUsable(value) else {
                    throw TokenSourceError.passing("the refresh_token in the answer to the \(call) contains spaces or control characters")
                }
                registerSecret(value)
                refreshToken = value
            }
        default:
            throw TokenSourceError.passing("the refresh_token in the answer to the \(call) is not a string")
        }
        var issued = IssuedToken(accessToken: accessToken, refreshToken: refreshToken, serverDate: response.date)
        issued.person = LoginIdentity.person(idToken: answer["id_token"]?.string, accessToken: accessToken)
        issued.dpop = boundTo
        if let value = answer["expires_in"], value != .null {
            guard let seconds = value.number, seconds > 0, seconds <= Self.longestLifetime else {
                throw TokenSourceError.passing("the expires_in in the answer to the \(call) is not a number of seconds between 0 and 10 years")
            }
            issued.expiresIn = seconds
        }
        return issued
    }

    /// Classifies a non-2xx answer (RFC 6749 §5.2).
    func failure(_ response: HTTPCallResponse, call: String, secrets: [String]) -> TokenSourceError {
        let status = response.status
        let answer = JSONValue.parse(response.body)
        let code = answer?["error"]?.string.flatMap(OAuth2ErrorAnswer.errorCode)
        let description = OAuth2ErrorAnswer.safeDescription(answer?["error_description"]?.string, secrets: secrets + [clientSecret].compactMap { $0 })
        let said = (code ?? "HTTP \(status)") + (description.map { ": \($0)" } ?? "")
        if status == 429 || status >= 500 {
            return .passing(
                "the identity provider is unavailable for the \(call) (HTTP \(status)\(code.map { ", \($0)" } ?? ""))",
                cause: status == 429 ? .rateLimited : .unavailable)
        }
        guard let code else {
            if answer == nil {
                return .passing(unreadableAnswer(response, from: "the identity provider") + " to the \(call)", cause: .of(status: status))
            }
            if status == 401 || status == 403 {
                return .configuration("the identity provider rejected the client for the \(call) (HTTP \(status)); check client_id and the secret")
            }
            return .passing("the identity provider answered the \(call) with HTTP \(status) and no OAuth error code")
        }
        switch code {
        case "invalid_grant":
            return .refused("the token endpoint answered the \(call) with \(said)")
        case "access_denied":
            return .refused("the identity provider denied the \(call) (\(said))")
        case "invalid_dpop_proof", "use_dpop_nonce":
            // RFC 9449 §5, §8: the proof itself was refused (or a second nonce demand in a row).
            return .configuration("the identity provider refused the DPoP proof of the \(call) (\(said)); check credentials.dpop")
        case "invalid_client", "unauthorized_client", "invalid_scope", "unsupported_grant_type", "invalid_request",
            "unsupported_token_type", "invalid_target":
            return .configuration("the identity provider blames the client for the \(call) (\(said)); check credentials")
        case "temporarily_unavailable":
            // RFC 6749 §4.1.2.1: the server cannot answer now; some token endpoints say so too.
            return .passing("the identity provider answered the \(call) with \(said)", cause: .unavailable)
        default:
            return .passing("the identity provider answered the \(call) with \(said)", cause: .of(status: status))
        }
    }

    // MARK: - Device authorization (RFC 8628)

    private func deviceLogin(prompt: @escaping (String) -> Void) throws -> IssuedToken {
        guard let url = try endpoint(\.deviceAuthorizationURL, name: "device_authorization_url") else {
            throw TokenSourceError.configuration("login: device needs credentials.device_authorization_url (or an issuer that names one)")
        }
        let response = try post(url: url, form: [], call: "device authorization")
        guard (200..<300).contains(response.status) else {
            throw failure(response, call: "device authorization", secrets: [])
        }
        guard let answer = JSONValue.parse(response.body), case .object = answer else {
            throw TokenSourceError.passing(unreadableAnswer(response, from: "the device authorization endpoint"))
        }
        guard let authorization = DeviceAuthorization(answer) else {
            throw TokenSourceError.passing("the device authorization answer lacks device_code, user_code or verification_uri")
        }
        let deviceCode = authorization.deviceCode
        registerSecret(deviceCode)
        var interval = authorization.interval
        let deadline = Date().timeIntervalSince1970 + max(1, min(authorization.lifetime ?? deviceWaitLimit, deviceWaitLimit))
        prompt(authorization.message)
        let grant = [("grant_type", "urn:ietf:params:oauth:grant-type:device_code"), ("device_code", deviceCode)]
        guard let tokenURL = try endpoint(\.tokenURL, name: "token_url") else {
            throw TokenSourceError.configuration("the discovery document names no token_endpoint; set credentials.token_url")
        }
        var nonceRetry = false
        while true {
            if !nonceRetry { sleep(interval) }
            let retryingForNonce = nonceRetry
            nonceRetry = false
            if Date().timeIntervalSince1970 > deadline {
                throw TokenSourceError.refused("the device code expired before the sign-in was approved")
            }
            let response: HTTPCallResponse
            do {
                response = try post(url: tokenURL, form: grant, call: "device login", proof: true)
            } catch {
                continue  // a passing failure: polled again at the interval until the code expires
            }
            // RFC 9449 §8: the newest nonce goes into the next proof, whatever the answer.
            if let nonce = response.header("dpop-nonce"), prover != nil { identityProviderNonce = nonce }
            if (200..<300).contains(response.status) { return try read(response, call: "device login") }
            // The poll answers are OAuth error codes (RFC 8628 §3.5).
            switch JSONValue.parse(response.body)?["error"]?.string {
            case "use_dpop_nonce"? where prover != nil:
                // Asked again at once with the nonce (RFC 9449 §8); a second demand in a row waits
                // for the interval, as any poll does.
                nonceRetry = !retryingForNonce
                continue
            case "authorization_pending"?:
                continue
            case "slow_down"?:
                interval += 5
                continue
            case "expired_token"?:
                throw TokenSourceError.refused("the device code expired before the sign-in was approved")
            case "access_denied"?:
                throw TokenSourceError.refused("the sign-in was denied")
            default:
                let error = failure(response, call: "device login", secrets: [deviceCode])
                if case .passing = error { continue }
                throw error
            }
        }
    }

    // MARK: - Discovery

    /// The configured URL, or the discovered one; nil when neither exists.
    func endpoint(_ key: KeyPath<OAuth2Provider, String?>, name: String) throws -> String? {
        if let url = self[keyPath: key] { return url }
        guard issuerURL != nil, !discovered else { return nil }
        try discover()
        return self[keyPath: key]
    }

    /// Reads `/.well-known/openid-configuration` once (OpenID Connect Discovery 1.0 §4).
    func discover() throws {
        guard let issuerURL, !discovered else { return }
        var base = issuerURL
        while base.hasSuffix("/") { base.removeLast() }
        let url = base + "/.well-known/openid-configuration"
        let response: HTTPCallResponse
        do {
            response = try BlockingHTTPClient.perform(HTTPCallRequest(url: url, method: "GET", headers: ["Accept: application/json"], timeout: timeout))
        } catch {
            throw TokenSourceError.cannotReach("the discovery document \(url)", error)
        }
        guard (200..<300).contains(response.status) else {
            throw TokenSourceError.passing("the discovery document \(url) answered HTTP \(response.status)", cause: .of(status: response.status))
        }
        guard let answer = JSONValue.parse(response.body), case .object = answer else {
            throw TokenSourceError.passing(unreadableAnswer(response, from: "the discovery document \(url)"))
        }
        // RFC 8414 §3.3, OpenID Connect Discovery §4.3: the document must name the issuer it was
        // asked of, or another server could send our client to its endpoints (a mix-up). A trailing
        // slash on either side is no other server.
        let issuer = answer["issuer"]?.string
        guard let issuer, Self.withoutTrailingSlash(issuer) == Self.withoutTrailingSlash(issuerURL) else {
            throw TokenSourceError.configuration(
                "the discovery document \(url) names the issuer \(issuer.map { "\"\($0)\"" } ?? "(none)"), not credentials.issuer_url \"\(issuerURL)\"")
        }
        func field(_ name: String) -> String? {
            guard let value = answer[name]?.string, Self.isHTTPURL(value) else { return nil }
            return value
        }
        if tokenURL == nil { tokenURL = field("token_endpoint") }
        if deviceAuthorizationURL == nil { deviceAuthorizationURL = field("device_authorization_endpoint") }
        if revocationURL == nil { revocationURL = field("revocation_endpoint") }
        if authorizationURL == nil { authorizationURL = field("authorization_endpoint") }
        discovered = true
    }

    // MARK: - Helpers

    static func withoutTrailingSlash(_ url: String) -> Substring {
        var url = url[...]
        while url.hasSuffix("/") { url.removeLast() }
        return url
    }

    static func isHTTPURL(_ text: String) -> Bool {
        let lowered = text.lowercased()
        return (lowered.hasPrefix("http://") || lowered.hasPrefix("https://")) && !text.contains(where: { $0 == " " || $0.isNewline })
    }
}
