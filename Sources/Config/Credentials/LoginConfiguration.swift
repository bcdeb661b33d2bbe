import Basics

/// The keys of the person-facing login flows (CONTRACT.md "Logging in a person"): `login: browser`
/// for oauth2_refresh, `login: srp` for cognito. Kept apart from the other credentials keys.

/// A `redirect_uri` for a loopback redirect (RFC 8252 §7.3): `http`, a loopback host, an optional
/// port, a path. The text is kept as written: it is sent byte for byte in the authorization request
/// and in the code exchange (RFC 6749 §4.1.3 compares them).
public struct LoopbackRedirect: Sendable, Equatable {
    public enum Host: String, Sendable, Equatable {
        case ipv4 = "127.0.0.1"
        case ipv6 = "::1"
        /// Bound on both 127.0.0.1 and ::1 (RFC 8252 §8.3).
        case localhost
    }

    /// As configured.
    public let text: String
    public let host: Host
    /// nil: a free port is chosen when the listener binds.
    public let port: Int?
    /// The path the listener answers on ("/callback").
    public let path: String
    /// `text` split where a chosen port goes: after the host.
    private let beforePort: String
    private let afterPort: String

    /// The default: 127.0.0.1, a free port, `/callback`.
    public static let standard = try! LoopbackRedirect.parse("http://127.0.0.1/callback")

    public struct Problem: Error, Sendable, Equatable {
        public let reason: String
    }

    public static func parse(_ text: String) throws(Problem) -> LoopbackRedirect {
        func problem(_ reason: String) -> Problem { Problem(reason: reason) }
        guard text.unicodeScalars.allSatisfy({ $0.value > 0x20 && $0.value < 0x7F }) else {
            throw problem("must be printable ASCII without spaces")
        }
        guard text.lowercased().hasPrefix("http://") else {
            throw problem("must be an http:// address on the loopback interface (RFC 8252 §7.3), like http://127.0.0.1:8400/callback")
        }
        let rest = text.dropFirst("http://".count)
        if rest.contains("#") { throw problem("must not have a fragment (RFC 6749 §3.1.2)") }
        if rest.contains("?") { throw problem("must not have a query: the listener matches the path") }
        let authority = rest.prefix { $0 != "/" }
        let path = rest.dropFirst(authority.count)
        if authority.contains("@") { throw problem("must not carry a user name") }
        let span: Authority.Span<String.Index>
        switch Authority.parse(authority.utf8, port: .init(required: false)) {
        case .success(let parsed): span = parsed
        case .failure(.unclosedBracket): throw problem("has an unclosed [")
        case .failure(.textAfterBracket): throw problem("has text after the host")
        case .failure(.badPort), .failure(.missingPort): throw problem("the port must be a number from 1 to 65535 (leave it out for a free port)")
        case .failure(.noHost), .failure(.notIPv6InBrackets), .failure(.ipv6WithoutBrackets), .failure(.hostByte):
            throw problem("the host must be 127.0.0.1, [::1] or localhost (RFC 8252 §7.3), not \(authority)")
        }
        // The host as written, brackets included; the port goes after it.
        let hostEnd = span.isIPv6Literal ? text.utf8.index(after: span.host.upperBound) : span.host.upperBound
        let hostText = text[authority.startIndex..<hostEnd]
        let host: Host
        switch hostText.lowercased() {
        case "127.0.0.1": host = .ipv4
        case "[::1]": host = .ipv6
        case "localhost": host = .localhost
        default:
            throw problem("the host must be 127.0.0.1, [::1] or localhost (RFC 8252 §7.3), not \(hostText)")
        }
        let port = span.port
        return LoopbackRedirect(
            text: text, host: host, port: port, path: path.isEmpty ? "/" : String(path),
            beforePort: String(text[..<hostEnd]), afterPort: String(text[hostEnd...].drop { $0 != "/" }))
    }

    /// The redirect URI as sent: the configured text when it has a port, otherwise with `port` put in
    /// after the host.
    public func uri(port bound: Int) -> String {
        port != nil ? text : beforePort + ":\(bound)" + afterPort
    }
}

extension Keys {
    static let browserLogin = ["authorization_url", "redirect_uri", "authorization_params"]
    static let cognitoLogin = ["login", "user_pool_id"]
    /// Authorization-request parameters the proxy sets itself (RFC 6749 §4.1.1, RFC 7636 §4.3).
    static let authorizationRequestOwn = [
        "response_type", "client_id", "redirect_uri", "scope", "state", "code_challenge", "code_challenge_method", "login_hint", "audience",
    ]
}

/// `login: browser` of oauth2_refresh (CONTRACT.md "Logging in a person").
public struct BrowserLoginConfiguration: Sendable, Equatable {
    /// nil: from OpenID discovery (`issuer_url`).
    public var authorizationURL: String? = nil
    /// nil: `LoopbackRedirect.standard`.
    public var redirectURI: LoopbackRedirect? = nil
    public var authorizationParams: [String: String] = [:]
    public init() {}
}

extension BrowserLoginConfiguration {
    static func parse(_ s: YAMLSection, in load: LoadContext) -> BrowserLoginConfiguration {
        var c = BrowserLoginConfiguration()
        c.authorizationURL = load.found.collect { try load.checkURL(s, "authorization_url") }
        c.redirectURI = load.found.collect { () throws -> LoopbackRedirect? in
            guard let text = try s.nonEmptyString("redirect_uri") else { return nil }
            do {
                return try LoopbackRedirect.parse(text)
            } catch let problem as LoopbackRedirect.Problem {
                throw ConfigurationError(keyPath: s.path("redirect_uri"), reason: problem.reason)
            }
        }
        load.found.collect {
            guard let params = try s.stringMap("authorization_params") else { return }
            for name in params.keys.sorted() where Keys.authorizationRequestOwn.contains(name) {
                throw ConfigurationError(
                    keyPath: "credentials.authorization_params.\(name)",
                    reason: "is set by the proxy itself (login_hint comes from --username, audience from credentials.audience)")
            }
            c.authorizationParams = params
        }
        return c
    }
}

extension CognitoConfiguration {
    /// `user_pool_id` (login: srp); its region is the default `region`.
    static func parseUserPoolID(_ s: YAMLSection, in load: LoadContext) -> (id: String, region: String)? {
        load.found.collect { () throws -> (id: String, region: String)? in
            guard let value = try s.nonEmptyString("user_pool_id") else { return nil }
            guard let region = Self.poolRegion(value) else {
                throw ConfigurationError(keyPath: s.path("user_pool_id"), reason: "is not a user pool id such as us-east-1_Ab12Cd34E")
            }
            return (value, region)
        }
    }

    /// The region part of a user pool id (`us-east-1_Ab12Cd34E`), or nil when it is none.
    static func poolRegion(_ poolID: String) -> String? {
        let parts = poolID.split(separator: "_", omittingEmptySubsequences: false)
        guard parts.count == 2, !parts[0].isEmpty, !parts[1].isEmpty,
            parts[0].allSatisfy({ $0.isASCII && ($0.isLowercase || $0.isNumber || $0 == "-") }),
            parts[1].allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber) })
        else { return nil }
        return String(parts[0])
    }
}

extension BrowserLoginConfiguration {
    func describe(login: CredentialsConfiguration.LoginFlow, _ line: (String, String?) -> Void) {
        line("authorization_url", authorizationURL)
        if login == .browser {
            line("redirect_uri", redirectURI?.text ?? "http://127.0.0.1:<free port>/callback (default)")
        }
        if !authorizationParams.isEmpty {
            let pairs = authorizationParams.sorted { $0.key < $1.key }.map { "\($0.key): \($0.value)" }
            line("authorization_params", "{" + pairs.joined(separator: ", ") + "}")
        }
    }
}
