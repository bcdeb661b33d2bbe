import Config
import Foundation

/// `type: cognito` with `identity_pool_id` (CONTRACT.md "Amazon Cognito identity pools"): the user
/// pool's session as `CognitoProvider` keeps it (login, SRP, refresh), with its ID token turned into
/// temporary AWS credentials, the way Amplify does after a user-pool sign-in.
///
/// - The token this provider hands over is the credentials' container-endpoint JSON, expiring at
///   their `Expiration`: the token manager reads it back into `TokenSnapshot.aws`, and the route
///   signs with it as `type: aws` does. The refresh token in the store stays the user pool's.
/// - Each refresh is a user-pool refresh (a new ID token) and then GetCredentialsForIdentity with
///   it; so credentials are fetched again both before they expire and after every user-pool refresh.
/// - The identity id comes from GetId once and is kept in the store with the session; a
///   ResourceNotFoundException (the identity is gone) asks GetId again, once.
public final class CognitoIdentityPoolProvider: IdentityProvider {
    public var kind: String { userPool.kind }
    public let fetchesWithoutSession = false

    let userPool: CognitoProvider
    let pool: CognitoIdentityPoolConfiguration
    /// Seconds for one call to Cognito Identity.
    var timeout: Double = 30
    /// A user-pool answer whose identity-pool step failed in passing, with the refresh token it came
    /// from: the next try reuses its ID token while it is valid instead of refreshing again (a
    /// rotated refresh token in it is saved only once the whole refresh succeeds).
    private var unfinished: (from: String?, issued: IssuedToken)?
    private let now: () -> Double

    public init(_ userPool: CognitoProvider, pool: CognitoIdentityPoolConfiguration, now: @escaping () -> Double = { Date().timeIntervalSince1970 }) {
        self.userPool = userPool
        self.pool = pool
        self.now = now
    }

    public func login(_ input: LoginInput, prompt: @escaping (String) -> Void) throws -> IssuedToken {
        unfinished = nil
        return try credentials(for: try userPool.login(input, prompt: prompt), identityID: nil, from: nil)
    }

    public func refresh(_ session: StoredSession?) throws -> IssuedToken {
        let from = session?.refreshToken
        let issued: IssuedToken
        if let kept = unfinished, kept.from == from, let exp = JWT.expiry(of: kept.issued.accessToken), exp > now() + 60 {
            issued = kept.issued
        } else {
            unfinished = nil
            issued = try userPool.refresh(session)
        }
        return try credentials(for: issued, identityID: session?.identityID, from: from)
    }

    public func revoke(refreshToken: String) throws { try userPool.revoke(refreshToken: refreshToken) }

    /// The user pool's answer (`accessToken` is its ID token: `use_token` is `id` with an identity
    /// pool) turned into the AWS credentials' token, with the user-pool fields kept for the store.
    func credentials(for userPoolAnswer: IssuedToken, identityID known: String?, from: String?) throws -> IssuedToken {
        let idToken = userPoolAnswer.accessToken
        do throws(CognitoIdentityCalls.Failure) {
            var identityID: String
            if let known { identityID = known } else { identityID = try getID(idToken) }
            var answer: (credentials: AWSCredentials, identityID: String?, date: Double?)
            do {
                answer = try getCredentials(identityID, idToken)
            } catch .identityGone where known != nil {
                identityID = try getID(idToken)
                answer = try getCredentials(identityID, idToken)
            }
            unfinished = nil
            let token = answer.credentials.containerEndpointJSON
            registerSecret(token)
            var issued = IssuedToken(
                accessToken: token, refreshToken: userPoolAnswer.refreshToken, expiresAt: answer.credentials.expiration,
                serverDate: answer.date, username: userPoolAnswer.username)
            issued.person = userPoolAnswer.person
            issued.deviceKey = userPoolAnswer.deviceKey
            issued.identityID = answer.identityID ?? identityID
            return issued
        } catch {
            switch error {
            case .refused(let reason):
                unfinished = nil
                throw TokenSourceError.refused(reason)
            case .identityGone:
                unfinished = nil
                throw TokenSourceError.passing("Cognito Identity: the identity is gone again after a new GetId", cause: .badAnswer)
            case .configuration(let reason):
                unfinished = (from, userPoolAnswer)
                throw TokenSourceError.configuration(reason)
            case .passing(let reason, let cause):
                unfinished = (from, userPoolAnswer)
                throw TokenSourceError.passing(reason, cause: cause)
            }
        }
    }

    private func getID(_ idToken: String) throws(CognitoIdentityCalls.Failure) -> String {
        let body = CognitoIdentityCalls.getIDBody(identityPoolID: pool.identityPoolID, provider: pool.loginsProvider, idToken: idToken)
        let response = try CognitoIdentityCalls.perform(.getID, body: body, endpoint: pool.endpoint, timeout: timeout, secrets: [idToken])
        return try CognitoIdentityCalls.identityID(in: response.body)
    }

    private func getCredentials(
        _ identityID: String, _ idToken: String
    ) throws(CognitoIdentityCalls.Failure) -> (credentials: AWSCredentials, identityID: String?, date: Double?) {
        let body = CognitoIdentityCalls.credentialsBody(identityID: identityID, provider: pool.loginsProvider, idToken: idToken)
        let response = try CognitoIdentityCalls.perform(.getCredentials, body: body, endpoint: pool.endpoint, timeout: timeout, secrets: [idToken])
        let answer = try CognitoIdentityCalls.credentials(in: response.body)
        // Secrets from here on (CONTRACT.md: no secret access key or session token in a log line).
        registerSecret(answer.credentials.secretAccessKey)
        if let sessionToken = answer.credentials.sessionToken { registerSecret(sessionToken) }
        return (answer.credentials, answer.identityID, response.date)
    }
}
