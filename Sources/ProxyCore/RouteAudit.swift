import Config
import Credentials
import Logs

/// What the audit log says of a route's credential (CONTRACT.md "Programs in a sandbox", "Audit
/// log"), worked out once when the route is built: its type, where it goes, and what a fetch of it
/// is (`refresh` or `mint`; nil when nothing is ever fetched: a static token, a token file, AWS
/// keys read as they are).
struct RouteAudit {
    /// `credentials.type`.
    let credential: String
    /// `authorization` | `header:NAME` | `basic` | `query:NAME` | `sigv4` | `dpop`.
    let placement: String

    init(_ route: RouteConfiguration) {
        credential = route.credentials.type.rawValue
        placement = RouteAudit.placement(route.inject, credentials: route.credentials)
    }

    /// The contract's name for where the credential goes: SigV4 and DPoP first (`inject` does not
    /// move them), then `inject`; a header named Authorization is `authorization` whatever its format.
    static func placement(_ inject: InjectConfiguration?, credentials: CredentialsConfiguration) -> String {
        if credentials.source.awsSigning != nil { return "sigv4" }
        if credentials.source.oauth2Client?.dpop != nil { return "dpop" }
        guard let inject else { return "authorization" }
        switch inject.placement {
        case .header(let name, _): return name.lowercased() == "authorization" ? "authorization" : "header:\(name.lowercased())"
        case .basic: return "basic"
        case .query(let parameter): return "query:\(parameter)"
        }
    }

    /// A token source's call is a `refresh` when it renews a person's session with its refresh token
    /// (the types that need a login), a `mint` when it makes a credential from what the
    /// configuration holds (client credentials, an assertion, a GitHub App's key, a role, a
    /// command); nil when there is no call to audit.
    static func action(_ credentials: CredentialsConfiguration, environment: [String: String]) -> AuditEvent.Action? {
        if credentials.type.sessionNeedsLogin { return .refresh }
        switch credentials.source {
        case .static, .file: return nil
        case .aws(let aws) where !aws.fetchesCredentials(environment: environment): return nil
        default: return .mint
        }
    }
}

/// The client's request target as the audit log shows it: the host of an absolute-form target
/// (without userinfo) and the path without its query or fragment, before `strip_prefix`.
enum AuditTarget {
    /// Read as bytes (the target is ASCII by the parser's rules), once per request.
    static func split(_ target: String) -> (host: String?, path: String) {
        let bytes = target.utf8
        let end = bytes.firstIndex { $0 == UInt8(ascii: "?") || $0 == UInt8(ascii: "#") } ?? bytes.endIndex
        let shown = bytes[..<end]
        // Origin-form (nearly every request): the path as it is.
        guard shown.first != UInt8(ascii: "/") else { return (nil, end == bytes.endIndex ? target : String(decoding: shown, as: UTF8.self)) }
        guard let colon = shown.firstIndex(of: UInt8(ascii: ":")), shown[colon...].starts(with: "://".utf8) else {
            return (nil, String(decoding: shown, as: UTF8.self))
        }
        let rest = shown[shown.index(colon, offsetBy: 3)...]
        let authorityEnd = rest.firstIndex(of: UInt8(ascii: "/")) ?? rest.endIndex
        let authority = rest[..<authorityEnd]
        let hostStart = authority.lastIndex(of: UInt8(ascii: "@")).map { authority.index(after: $0) } ?? authority.startIndex
        let path = rest[authorityEnd...]
        return (String(decoding: authority[hostStart...], as: UTF8.self), path.isEmpty ? "/" : String(decoding: path, as: UTF8.self))
    }
}
