import Basics
import Config
import Foundation
import IdentityHTTP

/// Where `type: aws` gets its credentials (CONTRACT.md "AWS credentials and SigV4 signing"): one
/// type per `source`, each in its own file. A fetch blocks (it may call STS or a metadata endpoint),
/// so it runs where identity-provider calls run (docs/ARCHITECTURE.md), and returns credentials with
/// their expiry (nil for long-term keys). Secrets never appear in an error.
public protocol AWSCredentialSource: Sendable {
    /// The `source` value, for messages and `status`.
    var name: String { get }
    func fetch() throws -> AWSCredentials
}

/// A failed fetch: the source and why, with no secret in it.
public struct AWSCredentialError: Error, Sendable, CustomStringConvertible {
    public let source: String
    public let reason: String
    public init(_ source: String, _ reason: String) {
        self.source = source
        self.reason = reason
    }
    public var description: String { "aws credentials (\(source)): \(reason)" }
}

/// `type: aws` as an identity provider without a session to log in to (like the metadata
/// identities): each refresh fetches the credentials again, and the token it hands over is their
/// container-endpoint JSON, which the token manager reads back into `TokenSnapshot.aws` (CONTRACT.md:
/// refreshed before `Expiration` like a token before its `exp`; `tokenproxy token` prints it).
public final class AWSIdentityProvider: IdentityProvider {
    public let kind = CredentialsType.aws.rawValue
    public let fetchesWithoutSession = true
    let source: any AWSCredentialSource

    public init(_ source: any AWSCredentialSource) { self.source = source }

    public func refresh(_ session: StoredSession?) throws -> IssuedToken {
        let credentials: AWSCredentials
        do {
            credentials = try source.fetch()
        } catch let error as AWSCredentialError {
            throw TokenSourceError.passing(error.description)
        } catch {
            throw TokenSourceError.passing("aws credentials (\(source.name)): \(type(of: error))")
        }
        let token = credentials.containerEndpointJSON
        registerSecret(token)
        return IssuedToken(accessToken: token, expiresAt: credentials.expiration)
    }

    public func login(_ input: LoginInput, prompt: @escaping (String) -> Void) throws -> IssuedToken { try refresh(nil) }

    public func revoke(refreshToken: String) throws {}
}

/// The source that `configuration.source` names (`default` picks as the SDKs do), with `role_arn`
/// assumed on top of it; web identity takes `role_arn` as its own role.
public func makeAWSCredentialSource(_ configuration: AWSConfiguration, environment: [String: String]) throws -> any AWSCredentialSource {
    let source: any AWSCredentialSource
    switch AWSDefaultChain.pick(configuration, environment: environment) {
    case .environment: source = AWSEnvironmentCredentials(configuration, environment: environment)
    case .webIdentity: source = try AWSWebIdentityCredentials(configuration, environment: environment)
    case .container: source = try AWSContainerCredentials(configuration, environment: environment)
    case .instanceMetadata, .default: source = AWSInstanceMetadataCredentials(configuration)
    }
    guard let roleARN = configuration.roleARN, !(source is AWSWebIdentityCredentials) else { return RegisteringSecrets(source) }
    return RegisteringSecrets(AWSAssumeRoleCredentials(RegisteringSecrets(source), configuration, roleARN: roleARN))
}

/// Every fetched secret access key and session token joins the secrets no log line may show
/// (`SecretRegistry`), whichever source fetched it; the intermediate ones of a chain too.
struct RegisteringSecrets: AWSCredentialSource {
    let source: any AWSCredentialSource
    init(_ source: any AWSCredentialSource) { self.source = source }
    var name: String { source.name }
    func fetch() throws -> AWSCredentials {
        let credentials = try source.fetch()
        registerSecret(credentials.secretAccessKey)
        if let sessionToken = credentials.sessionToken { registerSecret(sessionToken) }
        return credentials
    }
}

/// The JSON that the container endpoint and IMDS answer with (the same shape `tokenproxy token`
/// prints): AccessKeyId, SecretAccessKey, Token, Expiration (RFC 3339).
struct AWSCredentialsJSON: Decodable {
    var AccessKeyId: String?
    var SecretAccessKey: String?
    var Token: String?
    var Expiration: String?
    /// IMDS: "Success" when the role's credentials are there.
    var Code: String?
    var Message: String?

    static func parse(_ body: [UInt8], source: String) throws -> AWSCredentials {
        guard let answer = try? JSONDecoder().decode(AWSCredentialsJSON.self, from: Data(body)) else {
            throw AWSCredentialError(source, "the answer is not the credentials JSON")
        }
        if let code = answer.Code, code != "Success" {
            throw AWSCredentialError(source, "the endpoint answered Code \(code)\(answer.Message.map { ": \($0)" } ?? "")")
        }
        guard let keyID = answer.AccessKeyId, !keyID.isEmpty, let secret = answer.SecretAccessKey, !secret.isEmpty else {
            throw AWSCredentialError(source, "the answer has no AccessKeyId or SecretAccessKey")
        }
        var expiration: Double? = nil
        if let text = answer.Expiration {
            guard let time = RFC3339.parse(text) else { throw AWSCredentialError(source, "Expiration is not an RFC 3339 time") }
            expiration = time
        }
        return AWSCredentials(accessKeyID: keyID, secretAccessKey: secret, sessionToken: answer.Token, expiration: expiration)
    }
}

extension AWSCredentials {
    /// What `tokenproxy token` prints for `type: aws` (CONTRACT.md), and the token a `type: aws`
    /// session holds: the container credentials endpoint's JSON, `Token` and `Expiration` (RFC 3339,
    /// UTC) only for credentials that have them.
    public var containerEndpointJSON: String {
        jsonObject([("AccessKeyId", accessKeyID), ("SecretAccessKey", secretAccessKey), ("Token", sessionToken), ("Expiration", expirationText)])
    }

    /// What `tokenproxy token --format credential-process` prints: the JSON a `credential_process`
    /// of `~/.aws/config` answers (`Version` 1; `SessionToken` and `Expiration` only for credentials
    /// that have them; docs/AWS.md).
    public var credentialProcessJSON: String {
        "{\"Version\":1,"
            + jsonObject([
                ("AccessKeyId", accessKeyID), ("SecretAccessKey", secretAccessKey), ("SessionToken", sessionToken), ("Expiration", expirationText),
            ]).dropFirst()
    }

    /// `Expiration` as both formats write it: RFC 3339 in UTC, whole seconds.
    private var expirationText: String? {
        guard let expiration else { return nil }
        let b = Array(SigV4.timestamp(expiration))  // YYYYMMDDTHHMMSSZ
        return "\(String(b[0..<4]))-\(String(b[4..<6]))-\(String(b[6..<8]))T\(String(b[9..<11])):\(String(b[11..<13])):\(String(b[13..<15]))Z"
    }

    /// `{"name":"value",…}` of the members that have a value, in order.
    private func jsonObject(_ members: [(String, String?)]) -> String {
        "{" + members.compactMap { name, value in value.map { "\"\(name)\":\(JSONString.quoted($0))" } }.joined(separator: ",") + "}"
    }
}

/// One call to a credential endpoint; a transport failure becomes the source's error, `what` naming the call.
func performAWSCall(_ request: HTTPCallRequest, source: String, what: String) throws -> HTTPCallResponse {
    do {
        return try BlockingHTTPClient.perform(request)
    } catch let failure as HTTPCallError {
        throw AWSCredentialError(source, "\(what): \(failure.message)")
    }
}

extension HTTPCallResponse {
    /// The start of a refusal's body for a message (never the body of a success, which holds secrets).
    var refusalText: String {
        let text = String(decoding: body.prefix(300), as: UTF8.self).filter { !$0.isNewline }
        return text.isEmpty ? "HTTP \(status)" : "HTTP \(status): \(text)"
    }
}
