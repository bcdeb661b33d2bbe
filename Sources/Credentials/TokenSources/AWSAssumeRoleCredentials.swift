import Config
import Foundation
import IdentityHTTP

/// `role_arn` with a source other than `web_identity`: STS AssumeRole, signed with SigV4 by the
/// source's credentials, gives the role's temporary credentials.
/// https://docs.aws.amazon.com/STS/latest/APIReference/API_AssumeRole.html
public struct AWSAssumeRoleCredentials: AWSCredentialSource {
    public var name: String { "\(base.name) + role_arn" }
    let base: any AWSCredentialSource
    let roleARN: String
    let sessionName: String
    let endpoint: String
    let region: String
    var timeout: Double = 10

    public init(_ base: any AWSCredentialSource, _ configuration: AWSConfiguration, roleARN: String) {
        self.base = base
        self.roleARN = roleARN
        sessionName = configuration.roleSessionName ?? AWSWebIdentityCredentials.defaultSessionName()
        endpoint = configuration.stsEndpoint ?? "https://sts.\(configuration.region).amazonaws.com/"
        region = configuration.region
    }

    public func fetch() throws -> AWSCredentials {
        let source = try base.fetch()
        let form = [("Action", "AssumeRole"), ("Version", "2011-06-15"), ("RoleArn", roleARN), ("RoleSessionName", sessionName)]
            .map { "\(FormEncoding.encode($0.0))=\(FormEncoding.encode($0.1))" }.joined(separator: "&")
        let body = Array(form.utf8)
        guard let target = STSTarget(endpoint) else { throw AWSCredentialError(name, "sts_endpoint \(endpoint) is not an http(s) URL") }
        let contentType = "application/x-www-form-urlencoded; charset=utf-8"
        let signed = SigV4.sign(
            SigV4Request(
                method: "POST", path: target.path, query: target.query, headers: [("Host", target.authority), ("Content-Type", contentType)],
                payload: .hash(SigV4.sha256Hex(body))),
            region: region, service: "sts", credentials: source, time: Date().timeIntervalSince1970)
        let headers = ["Content-Type: \(contentType)", "Accept: application/xml"] + signed.map { "\($0.name): \($0.value)" }
        let request = HTTPCallRequest(url: endpoint, method: "POST", headers: headers, body: body, timeout: timeout)
        let response = try performAWSCall(request, source: name, what: "STS at \(endpoint)")
        guard response.status == 200 else { throw AWSCredentialError(name, "STS AssumeRole refused: \(STSAnswer.errorText(response))") }
        return try STSAnswer.credentials(response.body, source: name)
    }
}

/// The parts of an STS endpoint URL that SigV4 signs: the Host field's value, the path, the query.
struct STSTarget {
    let authority: String
    let path: String
    let query: String

    init?(_ url: String) {
        let lower = url.lowercased()
        guard let scheme = ["https://", "http://"].first(where: { lower.hasPrefix($0) }) else { return nil }
        let rest = url.dropFirst(scheme.count)
        let authorityEnd = rest.firstIndex { $0 == "/" || $0 == "?" || $0 == "#" } ?? rest.endIndex
        var authority = String(rest[..<authorityEnd])
        // The Host field leaves out the scheme's default port (RFC 9110 §7.2), as curl sends it.
        if scheme == "https://", authority.hasSuffix(":443") { authority.removeLast(4) }
        if scheme == "http://", authority.hasSuffix(":80") { authority.removeLast(3) }
        guard !authority.isEmpty else { return nil }
        let target = rest[authorityEnd...].prefix { $0 != "#" }
        let queryStart = target.firstIndex(of: "?")
        let path = String(target[..<(queryStart ?? target.endIndex)])
        self.authority = authority
        self.path = path.isEmpty ? "/" : path
        query = queryStart.map { String(target[target.index(after: $0)...]) } ?? ""
    }
}
