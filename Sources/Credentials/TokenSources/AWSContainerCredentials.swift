import Basics
import Config
import Foundation
import IdentityHTTP
import Sockets

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
            if let problem = ContainerFullURI.problem(full, resolve: { OutboundSocket.resolve($0, port: 0).map(\.bytes) }) {
                throw AWSCredentialError(name, "AWS_CONTAINER_CREDENTIALS_FULL_URI \(problem)")
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

/// Where `AWS_CONTAINER_CREDENTIALS_FULL_URI` may send the authorization token (CONTRACT.md "AWS
/// credentials and SigV4 signing"): as the AWS SDKs do, a plain-`http` URI is read as a URL, with no
/// user information, and its host must be loopback (an address in 127.0.0.0/8 or `::1`, or a name
/// all of whose addresses are), or the ECS (169.254.170.2) or EKS Pod Identity (169.254.170.23,
/// `fd00:ec2::23`) agent; anything else must be `https`. Pure: the name resolution is handed in.
enum ContainerFullURI {
    /// The agents' addresses (an IPv6 one without its brackets).
    static let agentHosts: Set<String> = ["169.254.170.2", "169.254.170.23", "fd00:ec2::23"]

    /// Why `uri` may not be used, or nil when it may. `resolve` answers the addresses (4 or 16 bytes)
    /// of a host as the transport would connect to it (an IP literal resolves to itself).
    static func problem(_ uri: String, resolve: (String) -> [[UInt8]]) -> String? {
        let split = URLScheme.split(uri[...])
        let scheme = split.flatMap { URLScheme($0.scheme) }
        if scheme == .https { return nil }
        guard let split, scheme == .http else { return "must be an https:// URL (or http:// to the machine itself or a container agent)" }
        // The authority ends at the path, query or fragment (RFC 3986 §3.2); a backslash ends it too
        // for some URL parsers, so it is refused below with every other byte a host cannot hold.
        let authority = split.rest.prefix { $0 != "/" && $0 != "?" && $0 != "#" }
        // `http://127.0.0.1@HOST/` goes to HOST (RFC 3986 §3.2.1): the SDKs refuse user information.
        if authority.contains("@") { return "has user information (user@host), which is refused: the token would go to the host after the @" }
        let parts: Authority.Parts
        do {
            parts = try Authority.parts(of: authority, port: .init(required: false, lowest: 0))
        } catch {
            switch error {
            case .unclosedBracket: return "has an IPv6 host without its closing ]"
            case .notIPv6InBrackets: return "has a host that is no IPv6 address"
            case .ipv6WithoutBrackets: return "has an IPv6 host without brackets"
            case .noHost: return "has no host"
            case .textAfterBracket, .badPort, .missingPort, .hostByte: return "has a port that is not a number"
            }
        }
        let name = parts.host
        guard parts.isIPv6Literal || name.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-" || $0 == ".") }) else {
            return "has a host with a byte a host name cannot hold"
        }
        if agentHosts.contains(name) { return nil }
        let addresses = resolve(name)
        if addresses.isEmpty { return "names the host \(name), which resolves to no address" }
        guard addresses.allSatisfy(isLoopback) else {
            return "is plain http to \(name), which is not the machine itself (127.0.0.0/8, ::1) or a container agent "
                + "(169.254.170.2, 169.254.170.23, fd00:ec2::23): use https"
        }
        return nil
    }

    /// 127.0.0.0/8 (RFC 1122 §3.2.1.3) or ::1 (RFC 4291 §2.5.3).
    static func isLoopback(_ address: [UInt8]) -> Bool {
        if address.count == 4 { return address[0] == 127 }
        return address.count == 16 && address.prefix(15).allSatisfy { $0 == 0 } && address[15] == 1
    }
}
