import Config
import Foundation
import IdentityHTTP

/// `source: instance_metadata` (EC2 instance profiles), IMDSv2 only: a session token by `PUT
/// /latest/api/token`, then the role's name and its credentials with that token.
/// https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/instance-metadata-retrieval-examples.html
public struct AWSInstanceMetadataCredentials: AWSCredentialSource {
    public let name = "instance_metadata"
    let base: String
    var timeout: Double = 2
    /// Seconds the IMDS session token lives; one token serves the two GETs of a fetch.
    static let sessionTTL = 21_600

    public init(_ configuration: AWSConfiguration) {
        var base = configuration.imdsEndpoint ?? "http://169.254.169.254"
        while base.hasSuffix("/") { base.removeLast() }
        self.base = base
    }

    public func fetch() throws -> AWSCredentials {
        let session = try call("PUT", "/latest/api/token", headers: ["X-aws-ec2-metadata-token-ttl-seconds: \(Self.sessionTTL)"])
        let token = String(decoding: session, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        guard !token.isEmpty, !token.contains(where: { $0.isNewline }) else { throw AWSCredentialError(name, "IMDS gave an empty session token") }
        registerSecret(token)
        let withToken = ["X-aws-ec2-metadata-token: \(token)"]
        let roles = String(decoding: try call("GET", "/latest/meta-data/iam/security-credentials/", headers: withToken), as: UTF8.self)
        guard let role = roles.split(whereSeparator: \.isNewline).first.map({ $0.trimmingCharacters(in: .whitespaces) }), !role.isEmpty,
            !role.contains("/")
        else {
            throw AWSCredentialError(name, "the instance has no IAM role")
        }
        let body = try call("GET", "/latest/meta-data/iam/security-credentials/\(role)", headers: withToken)
        return try AWSCredentialsJSON.parse(body, source: name)
    }

    private func call(_ method: String, _ path: String, headers: [String]) throws -> [UInt8] {
        var request = HTTPCallRequest(url: base + path, method: method, headers: headers, timeout: timeout)
        request.direct = true
        let response = try performAWSCall(request, source: name, what: "\(method) \(base)\(path)")
        guard response.status == 200 else { throw AWSCredentialError(name, "\(method) \(path) refused: \(response.refusalText)") }
        return response.body
    }
}
