import Config
import Foundation
import IdentityHTTP

/// `source: container` (ECS task roles, EKS Pod Identity): a GET of the container credentials
/// endpoint, AWS_CONTAINER_CREDENTIALS_FULL_URI or http://169.254.170.2 + _RELATIVE_URI
/// (`container_endpoint` overrides both), with the authorization token of
/// AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE (read again at every fetch: EKS rotates it) or
/// AWS_CONTAINER_AUTHORIZATION_TOKEN in `Authorization`.
/// https://docs.aws.amazon.com/sdkref/latest/guide/feature-container-credentials.html
public struct AWSContainerCredentials: AWSCredentialSource {
    public let name = "container"
    let url: String
    let tokenFile: String?
    let token: String?
    var timeout: Double = 5

    public init(_ configuration: AWSConfiguration, environment: [String: String]) throws {
        func variable(_ name: String) -> String? { environment[name].flatMap { $0.isEmpty ? nil : $0 } }
        if let endpoint = configuration.containerEndpoint {
            url = endpoint
        } else if let full = variable("AWS_CONTAINER_CREDENTIALS_FULL_URI") {
            guard Self.allowedFullURI(full) else {
                throw AWSCredentialError(name, "AWS_CONTAINER_CREDENTIALS_FULL_URI must be https, or http to a loopback or the container link-local address")
            }
            url = full
        } else if let relative = variable("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI") {
            url = "http://169.254.170.2" + (relative.hasPrefix("/") ? relative : "/" + relative)
        } else {
            throw AWSCredentialError(name, "needs container_endpoint, AWS_CONTAINER_CREDENTIALS_FULL_URI or AWS_CONTAINER_CREDENTIALS_RELATIVE_URI")
        }
        tokenFile = variable("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE")
        token = variable("AWS_CONTAINER_AUTHORIZATION_TOKEN")
    }

    static func isPresent(_ configuration: AWSConfiguration, environment: [String: String]) -> Bool {
        configuration.containerEndpoint != nil || !(environment["AWS_CONTAINER_CREDENTIALS_FULL_URI"] ?? "").isEmpty
            || !(environment["AWS_CONTAINER_CREDENTIALS_RELATIVE_URI"] ?? "").isEmpty
    }

    /// The SDKs send the token over plain HTTP only to the machine itself or to the ECS (169.254.170.2)
    /// and EKS Pod Identity (169.254.170.23, fd00:ec2::23) agents.
    static func allowedFullURI(_ uri: String) -> Bool {
        let lower = uri.lowercased()
        if lower.hasPrefix("https://") { return true }
        guard lower.hasPrefix("http://") else { return false }
        let rest = lower.dropFirst("http://".count)
        let authority = rest.prefix { $0 != "/" && $0 != "?" && $0 != "#" }
        let host: Substring
        if authority.hasPrefix("[") {
            host = authority.prefix { $0 != "]" }.dropFirst()
        } else {
            host = authority.prefix { $0 != ":" }
        }
        return host == "localhost" || host.hasPrefix("127.") || host == "::1" || host == "169.254.170.2" || host == "169.254.170.23"
            || host == "fd00:ec2::23"
    }

    public func fetch() throws -> AWSCredentials {
        var headers = ["Accept: application/json"]
        if let tokenFile {
            guard let data = FileManager.default.contents(atPath: tokenFile) else {
                throw AWSCredentialError(name, "cannot read the authorization token file \(tokenFile)")
            }
            let value = String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
            // A header value cannot hold a line break (RFC 9110 §5.5).
            guard !value.isEmpty, !value.contains(where: { $0.isNewline }) else {
                throw AWSCredentialError(name, "the authorization token file \(tokenFile) is empty or has more than one line")
            }
            registerSecret(value)
            headers.append("Authorization: \(value)")
        } else if let token {
            registerSecret(token)
            headers.append("Authorization: \(token)")
        }
        var request = HTTPCallRequest(url: url, method: "GET", headers: headers, timeout: timeout)
        request.direct = true
        let response = try performAWSCall(request, source: name, what: url)
        guard response.status == 200 else { throw AWSCredentialError(name, "\(url) refused: \(response.refusalText)") }
        return try AWSCredentialsJSON.parse(response.body, source: name)
    }
}
