import Config
import Crypto
import Foundation
import IdentityHTTP

/// `type: cognito`: Amazon Cognito user pools through the InitiateAuth API (the hosted UI is
/// `oauth2_refresh` with `login: browser`).
///
/// - login: USER_PASSWORD_AUTH with USERNAME, PASSWORD and, for a client with a secret, SECRET_HASH =
///   Base64(HMAC-SHA256(client secret, user name + client id)), or USER_SRP_AUTH (`login: srp`).
///   With a person to ask (`LoginInput.passwordWithChallenges`), the challenges that follow are
///   answered (Login/CognitoLogin.swift); without, a challenge refuses the login, naming it.
/// - refresh: REFRESH_TOKEN_AUTH; its SECRET_HASH uses the pool's own user name (the access token's
///   `username` claim, kept in the store), which differs from the login name when users sign in by
///   e-mail. The answer carries no new refresh token: the caller keeps the old one.
/// - NotAuthorizedException and friends refuse (a refresh refusal ends the session); a bad client id
///   or a disabled flow is a configuration error; throttling, 5xx, network errors and unreadable
///   answers are passing failures.
public final class CognitoProvider: IdentityProvider {
    public let kind = "cognito"
    public let fetchesWithoutSession = false

    let endpoint: String
    let clientID: String
    let clientSecret: String?
    let useToken: CredentialsConfiguration.CognitoTokenUse
    /// password (USER_PASSWORD_AUTH) or srp (USER_SRP_AUTH, Login/CognitoLogin.swift).
    let loginFlow: CredentialsConfiguration.LoginFlow
    /// The part of `user_pool_id` after `_`, which SRP signs.
    let poolName: String?
    /// Seconds for one call to Cognito.
    var timeout: Double = 30

    public init(_ credentials: CognitoConfiguration) throws {
        let clientID = credentials.clientID
        guard !clientID.isEmpty else {
            throw ConfigurationError(keyPath: "credentials.client_id", reason: "cognito needs the app client's id")
        }
        if let endpoint = credentials.endpoint {
            let lowered = endpoint.lowercased()
            guard lowered.hasPrefix("http://") || lowered.hasPrefix("https://") else {
                throw ConfigurationError(keyPath: "credentials.endpoint", reason: "must be an http:// or https:// URL")
            }
            self.endpoint = endpoint
        } else if let region = credentials.region {
            let allowed = region.utf8.allSatisfy { byte in
                (byte >= UInt8(ascii: "a") && byte <= UInt8(ascii: "z")) || (byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9"))
                    || byte == UInt8(ascii: "-")
            }
            guard !region.isEmpty, allowed else {
                throw ConfigurationError(keyPath: "credentials.region", reason: "\"\(region)\" is no AWS region (like us-east-1)")
            }
            self.endpoint = "https://cognito-idp.\(region).amazonaws.com/"
        } else {
            throw ConfigurationError(keyPath: "credentials.region", reason: "cognito needs region (or endpoint)")
        }
        self.clientID = clientID
        if let secret = credentials.clientSecret?.value, !secret.isEmpty {
            self.clientSecret = secret
        } else {
            self.clientSecret = nil
        }
        self.useToken = credentials.useToken
        self.loginFlow = credentials.login
        self.poolName = credentials.userPoolID.flatMap { id in id.firstIndex(of: "_").map { String(id[id.index(after: $0)...]) } }
    }

    // MARK: - IdentityProvider

    public func login(_ input: LoginInput, prompt: @escaping (String) -> Void) throws -> IssuedToken {
        if case .passwordWithChallenges(let username, let password, let questions) = input {
            return try personLogin(username: username, password: password, questions: questions)
        }
        if loginFlow == .srp, case .password(let username, let password) = input {
            return try personLogin(username: username, password: password, questions: nil)
        }
        guard case .password(let username, let password) = input else {
            throw TokenSourceError.configuration("cognito logs in with a user name and a password only (USER_PASSWORD_AUTH)")
        }
        var parameters = ["USERNAME": username, "PASSWORD": password]
        if let hash = secretHash(for: username) { parameters["SECRET_HASH"] = hash }
        let answer = try call(
            "InitiateAuth",
            ["AuthFlow": .string("USER_PASSWORD_AUTH"), "ClientId": .string(clientID), "AuthParameters": .object(parameters)],
            secrets: Array(parameters.values.filter { $0 != username }),
            operation: .login
        )
        return try tokens(from: answer, previousUsername: nil)
    }

    public func refresh(_ session: StoredSession?) throws -> IssuedToken {
        guard let session, let refreshToken = session.refreshToken, !refreshToken.isEmpty else {
            throw TokenSourceError.refused("there is no refresh token; run tokenproxy login")
        }
        var parameters = ["REFRESH_TOKEN": refreshToken]
        // With device tracking, Cognito refuses a refresh without the login's device key.
        if let deviceKey = session.deviceKey { parameters["DEVICE_KEY"] = deviceKey }
        var username = session.username.flatMap { $0.isEmpty ? nil : $0 }
        if clientSecret != nil {
            if username == nil, let token = session.accessToken { username = Self.poolUsername(in: token) }
            guard let username else {
                throw TokenSourceError.configuration(
                    "the client has a secret, so the refresh needs SECRET_HASH, which is computed with the pool's "
                        + "user name; the store has none and the stored token carries no username claim: run tokenproxy login"
                )
            }
            parameters["SECRET_HASH"] = secretHash(for: username)
        }
        let answer = try call(
            "InitiateAuth",
            ["AuthFlow": .string("REFRESH_TOKEN_AUTH"), "ClientId": .string(clientID), "AuthParameters": .object(parameters)],
            secrets: Array(parameters.values),
            operation: .refresh
        )
        var issued = try tokens(from: answer, previousUsername: username)
        // REFRESH_TOKEN_AUTH answers carry no refresh token; should one come, Cognito rotates (a
        // feature of newer pools) and the new one is handed on.
        if issued.refreshToken == refreshToken { issued.refreshToken = nil }
        return issued
    }

    /// Cognito's RevokeToken. An endpoint without the operation (moto answers it with an HTML page
    /// and HTTP 500; AWS would say UnknownOperationException) and a token that is already invalid
    /// count as done: there is nothing left to revoke.
    public func revoke(refreshToken: String) throws {
        var body: [String: JSONBodyValue] = ["Token": .string(refreshToken), "ClientId": .string(clientID)]
        if let clientSecret { body["ClientSecret"] = .string(clientSecret) }
        do {
            _ = try call("RevokeToken", body, secrets: [refreshToken], operation: .revoke)
        } catch RevokeOutcome.nothingToRevoke {
            return
        }
    }

    // MARK: - The call

    enum Operation { case login, refresh, revoke }

    private enum RevokeOutcome: Error { case nothingToRevoke }

    /// A request body: strings and one level of string maps are all InitiateAuth and RevokeToken take.
    enum JSONBodyValue: Encodable {
        case string(String)
        case object([String: String])

        func encode(to encoder: Encoder) throws {
            var container = encoder.singleValueContainer()
            switch self {
            case .string(let value): try container.encode(value)
            case .object(let value): try container.encode(value)
            }
        }
    }

    func call(
        _ target: String, _ body: [String: JSONBodyValue], secrets: [String], operation: Operation
    ) throws -> (answer: JSONValue, response: HTTPCallResponse) {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        guard let bytes = try? encoder.encode(body) else {
            throw TokenSourceError.configuration("cannot encode the \(target) request as JSON")
        }
        let request = HTTPCallRequest(
            url: endpoint,
            headers: [
                "X-Amz-Target: AWSCognitoIdentityProviderService.\(target)",
                "Content-Type: application/x-amz-json-1.1",
                "Accept: application/json",
            ],
            body: Array(bytes),
            timeout: timeout
        )
        let response: HTTPCallResponse
        do {
            response = try BlockingHTTPClient.perform(request)
        } catch {
            throw TokenSourceError.cannotReach("Cognito at \(Self.withoutUserinfo(endpoint))", error)
        }
        return try read(response, secrets: secrets, operation: operation)
    }

    /// The JSON object of a 2xx answer, or the error a non-2xx answer means (internal for the fuzz
    /// target, docs/RELIABILITY.md).
    func read(
        _ response: HTTPCallResponse, secrets: [String], operation: Operation
    ) throws -> (answer: JSONValue, response: HTTPCallResponse) {
        let answer = JSONValue.parse(response.body)
        if (200..<300).contains(response.status) {
            if operation == .revoke { return (answer ?? .null, response) }
            guard let answer, case .object = answer else {
                throw TokenSourceError.passing(unreadableAnswer(response, from: "Cognito"), cause: .of(status: response.status))
            }
            return (answer, response)
        }
        guard let answer, case .object = answer else {
            if operation == .revoke && response.status == 500 { throw RevokeOutcome.nothingToRevoke }
            throw TokenSourceError.passing(unreadableAnswer(response, from: "Cognito"), cause: .of(status: response.status))
        }
        throw failure(answer, response: response, secrets: secrets + [clientSecret].compactMap { $0 }, operation: operation)
    }

    /// Classifies a Cognito error answer (`{"__type": "…#NotAuthorizedException", "message": …}`).
    private func failure(_ answer: JSONValue, response: HTTPCallResponse, secrets: [String], operation: Operation) -> Error {
        var type = answer["__type"]?.string ?? response.header("x-amzn-errortype") ?? ""
        if let hash = type.lastIndex(of: "#") { type = String(type[type.index(after: hash)...]) }
        if let colon = type.firstIndex(of: ":") { type = String(type[..<colon]) }
        type = Self.identifier(type) ?? ""
        let rawMessage = answer["message"]?.string ?? answer["Message"]?.string
        let message = Self.safeMessage(rawMessage, secrets: secrets)
        let said = (type.isEmpty ? "HTTP \(response.status)" : type) + (message.map { ": \($0)" } ?? "")

        if operation == .revoke {
            switch type {
            case "UnknownOperationException", "UnsupportedOperationException", "UnsupportedTokenTypeException":
                return RevokeOutcome.nothingToRevoke
            default: break
            }
        }
        switch type {
        case "NotAuthorizedException":
            // A wrong or missing SECRET_HASH is the configuration's fault, not the session's: it must not
            // end the session. Cognito tells it apart only in its message (the one answer where a
            // decision reads an identity provider's words; an expired challenge session is a refusal
            // like the others, and its message is in `said`).
            if let rawMessage, rawMessage.lowercased().contains("secret") {
                return TokenSourceError.configuration("Cognito did not accept the client secret (\(said))")
            }
            switch operation {
            case .login: return TokenSourceError.refused("Cognito refused the login (\(said))")
            case .refresh: return TokenSourceError.refused("Cognito refused the refresh token (\(said))")
            case .revoke: return RevokeOutcome.nothingToRevoke  // already invalid
            }
        case "UserNotFoundException", "UserNotConfirmedException", "PasswordResetRequiredException", "CodeMismatchException",
            "ExpiredCodeException", "InvalidPasswordException":
            switch operation {
            case .login: return TokenSourceError.refused("Cognito refused the login (\(said))")
            default: return TokenSourceError.refused("Cognito refused the refresh token (\(said))")
            }
        case "ResourceNotFoundException", "InvalidParameterException", "InvalidUserPoolConfigurationException",
            "UnrecognizedClientException", "InvalidLambdaResponseException", "UnexpectedLambdaException",
            "UserLambdaValidationException":
            return TokenSourceError.configuration("Cognito rejected the request (\(said)); check credentials.client_id and the app client's settings")
        case "TooManyRequestsException":
            return TokenSourceError.passing("Cognito is unavailable for now (\(said))", cause: .rateLimited)
        case "LimitExceededException", "InternalErrorException", "ThrottlingException":
            return TokenSourceError.passing("Cognito is unavailable for now (\(said))", cause: .unavailable)
        default:
            let cause = PassingCause.of(status: response.status)
            if type.isEmpty && message == nil { return TokenSourceError.passing("Cognito answered HTTP \(response.status)", cause: cause) }
            return TokenSourceError.passing("Cognito answered HTTP \(response.status) (\(said))", cause: cause)
        }
    }

    /// The token set of a successful InitiateAuth answer, or the challenge it asks for.
    func tokens(from call: (answer: JSONValue, response: HTTPCallResponse), previousUsername: String?) throws -> IssuedToken {
        let answer = call.answer
        if let challenge = answer["ChallengeName"]?.string, !challenge.isEmpty {
            let name = Self.identifier(challenge) ?? "a challenge"
            throw TokenSourceError.refused(
                "Cognito asks for \(name), which tokenproxy cannot answer; complete it with the AWS console or CLI"
            )
        }
        guard let result = answer["AuthenticationResult"], case .object = result else {
            throw TokenSourceError.passing("Cognito's answer has neither AuthenticationResult nor ChallengeName")
        }
        let accessToken = try Self.token(result, "AccessToken", required: true)!
        let chosen: String
        switch useToken {
        case .access: chosen = accessToken
        case .id: chosen = try Self.token(result, "IdToken", required: true)!
        }
        let refreshToken = try Self.token(result, "RefreshToken", required: false)
        var issued = IssuedToken(accessToken: chosen, refreshToken: refreshToken, serverDate: call.response.date)
        if let value = result["ExpiresIn"], value != .null {
            guard let seconds = value.number, seconds > 0, seconds <= 10 * 365 * 86400 else {
                throw TokenSourceError.passing("Cognito's ExpiresIn is not a number of seconds between 0 and 10 years")
            }
            issued.expiresIn = seconds
        }
        issued.username = Self.poolUsername(in: accessToken) ?? previousUsername
        issued.person = LoginIdentity.person(idToken: result["IdToken"]?.string, accessToken: accessToken)
        if case .object? = result["NewDeviceMetadata"], let deviceKey = result["NewDeviceMetadata"]?["DeviceKey"]?.string, !deviceKey.isEmpty {
            issued.deviceKey = deviceKey
        }
        registerSecret(accessToken)
        registerSecret(chosen)
        if let refreshToken { registerSecret(refreshToken) }
        return issued
    }

    private static func token(_ result: JSONValue, _ name: String, required: Bool) throws -> String? {
        switch result[name] {
        case .string(let value)? where !value.isEmpty:
            guard BearerToken.isUsable(value) else {
                throw TokenSourceError.passing("Cognito's \(name) contains spaces, control characters or non-ASCII bytes")
            }
            return value
        case nil, .null?, .string?:
            if required { throw TokenSourceError.passing("Cognito's answer has no \(name)") }
            return nil
        default:
            throw TokenSourceError.passing("Cognito's \(name) is not a string")
        }
    }

    // MARK: - Helpers

    /// SECRET_HASH (Cognito developer guide, "Computing secret hash values"), or nil without a secret.
    func secretHash(for username: String) -> String? {
        guard let clientSecret else { return nil }
        let mac = HMAC<SHA256>.authenticationCode(
            for: Data((username + clientID).utf8), using: SymmetricKey(data: Data(clientSecret.utf8)))
        return Data(mac).base64EncodedString()
    }

    /// The pool's own user name in a Cognito token: `username` (access tokens) or `cognito:username`
    /// (id tokens).
    static func poolUsername(in token: String) -> String? {
        if let name = JWT.claims(of: token)?.username, !name.isEmpty { return name }
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, let payload = JWT.base64URLDecode(parts[1]),
            let claims = JSONValue.parse(Array(payload)),
            let name = claims["cognito:username"]?.string, !name.isEmpty
        else { return nil }
        return name
    }

    /// The endpoint for a message: without a `user:password@` part, should one be configured.
    static func withoutUserinfo(_ url: String) -> String {
        guard var components = URLComponents(string: url), components.user != nil || components.password != nil else { return url }
        components.user = nil
        components.password = nil
        return components.string ?? "the configured endpoint"
    }

    /// `text` when it is a plain identifier (letters, digits, `_`, `.`, `-`; at most 100 characters).
    private static func identifier(_ text: String) -> String? {
        let allowed = text.utf8.allSatisfy { byte in
            (byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z")) || (byte >= UInt8(ascii: "a") && byte <= UInt8(ascii: "z"))
                || (byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9")) || byte == UInt8(ascii: "_")
                || byte == UInt8(ascii: ".") || byte == UInt8(ascii: "-")
        }
        return allowed && !text.isEmpty && text.utf8.count <= 100 ? text : nil
    }

    /// Cognito's error message, when it can be shown: printable, short, without anything that was
    /// sent (a token, a password, the secret) and without a long unbroken word that could be one
    /// (moto, for one, puts the rejected SECRET_HASH into the message).
    static func safeMessage(_ message: String?, secrets: [String]) -> String? {
        guard let message else { return nil }
        let trimmed = message.trimmingWhitespace()
        guard !trimmed.isEmpty, trimmed.utf8.count <= 300 else { return nil }
        guard trimmed.unicodeScalars.allSatisfy({ $0.value >= 0x20 && $0.value != 0x7F }) else { return nil }
        for secret in secrets where secret.utf8.count >= 4 && trimmed.contains(secret) { return nil }
        for word in trimmed.split(separator: " ") where word.utf8.count > 40 { return nil }
        return trimmed
    }
}
