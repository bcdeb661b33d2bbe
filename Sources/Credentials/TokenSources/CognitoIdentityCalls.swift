import Config
import Foundation
import IdentityHTTP

/// The two calls of Amazon Cognito identity pools' enhanced flow (CONTRACT.md "Amazon Cognito
/// identity pools"; the Cognito Identity API reference, GetId and GetCredentialsForIdentity): AWS
/// JSON 1.1, unsigned, the user pool's ID token in `Logins`. The bodies and the reading of the
/// answers are pure functions (unit-tested); `perform` is the one network step.
enum CognitoIdentityCalls {
    enum Operation: String {
        case getID = "GetId"
        case getCredentials = "GetCredentialsForIdentity"
    }

    /// What a failed call means for the session (decided by the error's type, never its message).
    enum Failure: Error, Equatable {
        /// NotAuthorizedException: the ID token was refused; the session ends like a refused refresh.
        case refused(String)
        /// GetCredentialsForIdentity's ResourceNotFoundException: the identity id is gone (the
        /// identity was deleted, or the pool replaced): GetId again, once.
        case identityGone
        /// The request blames the configuration (an unknown pool, a bad parameter).
        case configuration(String)
        case passing(String, PassingCause)
    }

    private struct GetIDBody: Encodable {
        var IdentityPoolId: String
        var Logins: [String: String]
    }

    private struct CredentialsBody: Encodable {
        var IdentityId: String
        var Logins: [String: String]
    }

    /// `{"IdentityPoolId": …, "Logins": {provider: ID token}}`.
    static func getIDBody(identityPoolID: String, provider: String, idToken: String) -> [UInt8] {
        encode(GetIDBody(IdentityPoolId: identityPoolID, Logins: [provider: idToken]))
    }

    /// `{"IdentityId": …, "Logins": {provider: ID token}}`.
    static func credentialsBody(identityID: String, provider: String, idToken: String) -> [UInt8] {
        encode(CredentialsBody(IdentityId: identityID, Logins: [provider: idToken]))
    }

    private static func encode(_ body: some Encodable) -> [UInt8] {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        // Strings only: encoding cannot fail.
        return Array((try? encoder.encode(body)) ?? Data())
    }

    /// GetId's `IdentityId`.
    static func identityID(in body: [UInt8]) throws(Failure) -> String {
        guard let answer = JSONValue.parse(body), let id = answer["IdentityId"]?.string, isIdentityID(id) else {
            throw .passing("Cognito Identity's GetId answer has no usable IdentityId", .badAnswer)
        }
        return id
    }

    /// GetCredentialsForIdentity's `Credentials` (`Expiration` in seconds since the epoch) and the
    /// `IdentityId` it names (nil when absent).
    static func credentials(in body: [UInt8]) throws(Failure) -> (credentials: AWSCredentials, identityID: String?) {
        let what = "Cognito Identity's GetCredentialsForIdentity answer"
        guard let answer = JSONValue.parse(body), let fields = answer["Credentials"], case .object = fields else {
            throw .passing("\(what) has no Credentials", .badAnswer)
        }
        guard let keyID = fields["AccessKeyId"]?.string, BearerToken.isUsable(keyID),
            let secret = fields["SecretKey"]?.string, BearerToken.isUsable(secret),
            let sessionToken = fields["SessionToken"]?.string, BearerToken.isUsable(sessionToken)
        else {
            throw .passing("\(what) lacks AccessKeyId, SecretKey or SessionToken (or one holds spaces or control characters)", .badAnswer)
        }
        guard let expiration = fields["Expiration"]?.number, expiration.isFinite, expiration > 0 else {
            throw .passing("\(what) has no Expiration in seconds since the epoch", .badAnswer)
        }
        let id = answer["IdentityId"]?.string.flatMap { isIdentityID($0) ? $0 : nil }
        return (AWSCredentials(accessKeyID: keyID, secretAccessKey: secret, sessionToken: sessionToken, expiration: expiration), id)
    }

    /// What an error answer means, by its type (`__type`, else `x-amzn-ErrorType`) and status.
    static func failure(of operation: Operation, status: Int, body: [UInt8], errorTypeField: String?, secrets: [String]) -> Failure {
        let answer = JSONValue.parse(body)
        var type = answer?["__type"]?.string ?? errorTypeField ?? ""
        if let hash = type.lastIndex(of: "#") { type = String(type[type.index(after: hash)...]) }
        if let colon = type.firstIndex(of: ":") { type = String(type[..<colon]) }
        let message = CognitoProvider.safeMessage(answer?["message"]?.string ?? answer?["Message"]?.string, secrets: secrets)
        let shownType = type.utf8.count <= 100 && type.utf8.allSatisfy { $0 > 0x20 && $0 < 0x7F } ? type : ""
        let said = "Cognito Identity \(operation.rawValue): " + (shownType.isEmpty ? "HTTP \(status)" : shownType) + (message.map { ": \($0)" } ?? "")
        switch type {
        case "NotAuthorizedException":
            return .refused("\(said); the identity pool refused the user pool's ID token")
        case "ResourceNotFoundException":
            switch operation {
            case .getCredentials: return .identityGone
            case .getID: return .configuration("\(said); check credentials.identity_pool_id")
            }
        case "InvalidParameterException", "InvalidIdentityPoolConfigurationException", "ResourceConflictException":
            return .configuration("\(said); check credentials.identity_pool_id, user_pool_id and the pool's authentication providers")
        case "TooManyRequestsException", "LimitExceededException":
            return .passing(said, .rateLimited)
        case "InternalErrorException", "ExternalServiceException":
            return .passing(said, .unavailable)
        default:
            return .passing(said, PassingCause.of(status: status))
        }
    }

    /// An identity id as Cognito makes them (`<region>:<uuid>`), checked only as far as it goes into
    /// a JSON string and a message: printable ASCII, short.
    static func isIdentityID(_ text: String) -> Bool {
        !text.isEmpty && text.utf8.count <= 128 && text.utf8.allSatisfy { $0 > 0x20 && $0 < 0x7F && $0 != UInt8(ascii: "\"") }
    }

    /// One call to `endpoint`: the answer's body on 2xx, else the failure it means.
    static func perform(
        _ operation: Operation, body: [UInt8], endpoint: String, timeout: Double, secrets: [String]
    ) throws(Failure) -> HTTPCallResponse {
        let request = HTTPCallRequest(
            url: endpoint,
            headers: [
                "X-Amz-Target: AWSCognitoIdentityService.\(operation.rawValue)",
                "Content-Type: application/x-amz-json-1.1",
                "Accept: application/json",
            ],
            body: body,
            timeout: timeout
        )
        let response: HTTPCallResponse
        do {
            response = try BlockingHTTPClient.perform(request)
        } catch {
            let reached = TokenSourceError.cannotReach("Cognito Identity at \(CognitoProvider.withoutUserinfo(endpoint))", error)
            if case .passing(let reason, let cause) = reached { throw .passing(reason, cause) }
            throw .passing(reached.reason, .unreachable)
        }
        guard (200..<300).contains(response.status) else {
            throw failure(of: operation, status: response.status, body: response.body, errorTypeField: response.header("x-amzn-errortype"), secrets: secrets)
        }
        return response
    }
}
