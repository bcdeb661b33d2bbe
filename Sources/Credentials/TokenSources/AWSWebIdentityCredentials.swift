import Config
import Foundation
import IdentityHTTP

/// `source: web_identity` (EKS IRSA and every OIDC federation): STS AssumeRoleWithWebIdentity with
/// the token in `web_identity_token_file` (default AWS_WEB_IDENTITY_TOKEN_FILE), read again for
/// every call because the platform rotates it, and `role_arn` (default AWS_ROLE_ARN). The call is
/// not signed. https://docs.aws.amazon.com/STS/latest/APIReference/API_AssumeRoleWithWebIdentity.html
public struct AWSWebIdentityCredentials: AWSCredentialSource {
    public let name = "web_identity"
    let tokenFile: String
    let roleARN: String
    let sessionName: String
    let endpoint: String
    var timeout: Double = 10

    public init(_ configuration: AWSConfiguration, environment: [String: String]) throws {
        guard let tokenFile = configuration.webIdentityTokenFile ?? environment["AWS_WEB_IDENTITY_TOKEN_FILE"].flatMap({ $0.isEmpty ? nil : $0 })
        else {
            throw AWSCredentialError(name, "needs web_identity_token_file or AWS_WEB_IDENTITY_TOKEN_FILE")
        }
        guard let roleARN = configuration.roleARN ?? environment["AWS_ROLE_ARN"].flatMap({ $0.isEmpty ? nil : $0 }) else {
            throw AWSCredentialError(name, "needs role_arn or AWS_ROLE_ARN")
        }
        self.tokenFile = tokenFile
        self.roleARN = roleARN
        sessionName =
            configuration.roleSessionName ?? environment["AWS_ROLE_SESSION_NAME"].flatMap { $0.isEmpty ? nil : $0 }
            ?? AWSWebIdentityCredentials.defaultSessionName()
        endpoint = configuration.stsEndpoint ?? "https://sts.\(configuration.region).amazonaws.com/"
    }

    static func isPresent(_ configuration: AWSConfiguration, environment: [String: String]) -> Bool {
        configuration.webIdentityTokenFile != nil || !(environment["AWS_WEB_IDENTITY_TOKEN_FILE"] ?? "").isEmpty
    }

    /// `tokenproxy-<host name>`, cut to STS's 64 characters of `[\w+=,.@-]`.
    static func defaultSessionName() -> String {
        let host = ProcessInfo.processInfo.hostName.filter { $0.isASCII && ($0.isLetter || $0.isNumber || "+=,.@-_".contains($0)) }
        return String("tokenproxy-\(host)".prefix(64))
    }

    public func fetch() throws -> AWSCredentials {
        guard let data = FileManager.default.contents(atPath: tokenFile) else {
            throw AWSCredentialError(name, "cannot read the web identity token file \(tokenFile)")
        }
        let token = String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        guard !token.isEmpty else { throw AWSCredentialError(name, "the web identity token file \(tokenFile) is empty") }
        registerSecret(token)
        let form = [
            ("Action", "AssumeRoleWithWebIdentity"), ("Version", "2011-06-15"), ("RoleArn", roleARN),
            ("RoleSessionName", sessionName), ("WebIdentityToken", token),
        ].map { "\(FormEncoding.encode($0.0))=\(FormEncoding.encode($0.1))" }.joined(separator: "&")
        let request = HTTPCallRequest(
            url: endpoint, method: "POST", headers: ["Content-Type: application/x-www-form-urlencoded", "Accept: application/xml"],
            body: Array(form.utf8), timeout: timeout)
        let response = try performAWSCall(request, source: name, what: "STS at \(endpoint)")
        guard response.status == 200 else { throw AWSCredentialError(name, "STS refused: \(STSAnswer.errorText(response))") }
        return try STSAnswer.credentials(response.body, source: name)
    }
}

/// STS's XML answers (the query protocol), read with `STSXMLElement`.
/// https://docs.aws.amazon.com/STS/latest/APIReference/API_Credentials.html
enum STSAnswer {
    /// `<XResponse><XResult><Credentials>`: AssumeRole and AssumeRoleWithWebIdentity answer alike.
    static func credentials(_ body: [UInt8], source: String) throws -> AWSCredentials {
        guard let root = STSXMLElement.parse(body), root.name.hasSuffix("Response"),
            let result = root.children.first(where: { $0.name.hasSuffix("Result") }), let c = result.child("Credentials"),
            let accessKeyID = c.value("AccessKeyId"), let secretAccessKey = c.value("SecretAccessKey"),
            let sessionToken = c.value("SessionToken"), let expirationText = c.value("Expiration")
        else {
            throw AWSCredentialError(source, "STS's answer has no Credentials")
        }
        guard let expiration = RFC3339.parse(expirationText) else { throw AWSCredentialError(source, "STS's Expiration is not an RFC 3339 time") }
        return AWSCredentials(accessKeyID: accessKeyID, secretAccessKey: secretAccessKey, sessionToken: sessionToken, expiration: expiration)
    }

    /// `Code: Message` of an `<ErrorResponse><Error>`, else the start of the body.
    static func errorText(_ response: HTTPCallResponse) -> String {
        if let error = STSXMLElement.parse(response.body)?.child("Error"), let code = error.value("Code") {
            return "HTTP \(response.status) \(code)\(error.value("Message").map { ": \($0)" } ?? "")"
        }
        return response.refusalText
    }
}
