import Basics
import Config
import Crypto
import Foundation

/// The pure parts of the browser login (RFC 6749 §4.1 with RFC 7636 and RFC 8252): the PKCE pair,
/// `state`, the authorization URL, and what a request to the loopback redirect means. No I/O.

/// RFC 7636: a fresh code verifier per login and its S256 challenge.
struct PKCE: Sendable, Equatable {
    let verifier: String

    /// §4.1: 32 random octets, base64url-encoded: 43 characters of the unreserved set.
    static func random() -> PKCE { PKCE(verifier: LoginRandom.token()) }

    /// §4.2: BASE64URL-ENCODE(SHA256(ASCII(code_verifier))).
    var challenge: String { Self.challenge(for: verifier) }

    static func challenge(for verifier: String) -> String {
        Base64URL.encode(Array(SHA256.hash(data: Array(verifier.utf8))))
    }
}

enum LoginRandom {
    /// `bytes` octets from the system's CSPRNG (getrandom on Linux), base64url without padding: a
    /// `state` (RFC 6749 §10.12) or a PKCE verifier.
    static func token(bytes: Int = 32) -> String {
        var generator = SystemRandomNumberGenerator()
        return Base64URL.encode((0..<bytes).map { _ in UInt8.random(in: 0...255, using: &generator) })
    }
}

/// The authorization request (RFC 6749 §4.1.1, RFC 7636 §4.3): the address the browser opens.
struct AuthorizationRequest: Sendable {
    var endpoint: String
    var clientID: String
    var redirectURI: String
    var scope: String?
    var state: String
    var codeChallenge: String
    /// OpenID Connect Core §3.1.2.1, from `--username`.
    var loginHint: String?
    /// Auth0 takes `audience` here, not at the token endpoint only.
    var audience: String?
    /// `authorization_params`: added after the parameters above and never replacing one of them.
    var extra: [String: String] = [:]

    var parameters: [(String, String)] {
        var list: [(String, String)] = [
            ("response_type", "code"), ("client_id", clientID), ("redirect_uri", redirectURI),
        ]
        if let scope { list.append(("scope", scope)) }
        list += [("state", state), ("code_challenge", codeChallenge), ("code_challenge_method", "S256")]
        if let loginHint, !loginHint.isEmpty { list.append(("login_hint", loginHint)) }
        if let audience { list.append(("audience", audience)) }
        for (name, value) in extra.sorted(by: { $0.key < $1.key }) where !list.contains(where: { $0.0 == name }) {
            list.append((name, value))
        }
        return list
    }

    /// The endpoint with the parameters added to its own query, if it has one (§3.1: it "MAY
    /// include a query component, which MUST be retained").
    var url: String {
        let query = parameters.map { FormEncoding.encode($0.0) + "=" + FormEncoding.encode($0.1) }.joined(separator: "&")
        var base = endpoint
        if let hash = base.firstIndex(of: "#") { base = String(base[..<hash]) }  // §3.1: no fragment
        if base.contains("?") { return base.hasSuffix("?") || base.hasSuffix("&") ? base + query : base + "&" + query }
        return base + "?" + query
    }
}

/// What a request to the loopback listener (or a pasted address) means for the login.
public enum CallbackDecision: Equatable, Sendable {
    /// 404: not the redirect path.
    case notFound
    /// 405: the redirect path with another method than GET.
    case methodNotAllowed
    /// 400, and the wait goes on: no `state`, a wrong one, a repeated parameter, neither code nor error.
    case badRequest(String)
    /// The right `state` with a code: the wait ends and the code is exchanged.
    case code(String)
    /// The right `state` with `error` (RFC 6749 §4.1.2.1): the wait ends, the login fails.
    case denied(error: String, description: String?)

    /// Whether this request ends the wait.
    public var ends: Bool {
        switch self {
        case .code, .denied: return true
        case .notFound, .methodNotAllowed, .badRequest: return false
        }
    }
}

/// Decides what a request to the redirect URI means (RFC 6749 §4.1.2, RFC 8252 §7.3).
public struct CallbackRules: Sendable {
    /// The redirect URI's path, compared byte for byte.
    public let path: String
    let state: String

    public func decide(method: String, target: String) -> CallbackDecision {
        var rest = Substring(target)
        // Absolute form (RFC 9112 §3.2.2): only its path and query count.
        if rest.lowercased().hasPrefix("http://") {
            rest = rest.dropFirst("http://".count).drop { $0 != "/" && $0 != "?" }
        }
        if let hash = rest.firstIndex(of: "#") { rest = rest[..<hash] }
        let requestPath = rest.prefix { $0 != "?" }
        guard requestPath == path || (requestPath.isEmpty && path == "/") else { return .notFound }
        guard method == "GET" else { return .methodNotAllowed }
        let query = rest.dropFirst(requestPath.count).dropFirst()
        return decide(query: query)
    }

    /// A pasted address (`--no-browser`): the whole address or only its query. nil: not the redirect
    /// path, or not an address at all.
    public func decidePaste(_ text: String) -> CallbackDecision? {
        let trimmed = text.trimmingCharacters(in: .whitespacesAndNewlines)
        guard !trimmed.isEmpty else { return nil }
        let lowered = trimmed.lowercased()
        if lowered.hasPrefix("http://") || lowered.hasPrefix("https://") {
            let afterScheme = trimmed[trimmed.range(of: "://")!.upperBound...]
            let target = afterScheme.drop { $0 != "/" && $0 != "?" }
            let decision = decide(method: "GET", target: target.hasPrefix("?") ? path + target : String(target))
            return decision == .notFound ? nil : decision
        }
        let query = trimmed.hasPrefix("?") ? trimmed.dropFirst() : Substring(trimmed)
        guard query.contains("=") else { return nil }
        return decide(query: query)
    }

    private func decide(query: Substring) -> CallbackDecision {
        var values: [String: String] = [:]
        for pair in query.split(separator: "&", omittingEmptySubsequences: true) {
            let name = Self.formDecode(pair.prefix { $0 != "=" })
            let value = Self.formDecode(pair.drop { $0 != "=" }.dropFirst())
            guard let name, let value else { return .badRequest("a parameter is not valid percent-encoding") }
            // §3.1: "Request and response parameters MUST NOT be included more than once."
            if values[name] != nil, ["state", "code", "error"].contains(name) {
                return .badRequest("the parameter \(name) appears more than once")
            }
            values[name] = value
        }
        guard let given = values["state"], !given.isEmpty else { return .badRequest("the request has no state") }
        guard constantTimeEquals(Array(given.utf8), Array(state.utf8)) else { return .badRequest("the state does not match this login") }
        if let error = values["error"] {
            return .denied(error: Self.shown(error, limit: 100), description: values["error_description"].map { Self.shown($0, limit: 300) })
        }
        guard let code = values["code"], !code.isEmpty else { return .badRequest("the request has neither code nor error") }
        return .code(code)
    }

    /// application/x-www-form-urlencoded decoding; nil for a bad escape or bytes that are no UTF-8.
    static func formDecode(_ text: Substring) -> String? {
        percentDecoded(text, plusIsSpace: true)
    }

    /// Text from the request fit to print: control characters removed, at most `limit` bytes.
    static func shown(_ text: String, limit: Int) -> String {
        var out = ""
        for scalar in text.unicodeScalars where !(scalar.value < 0x20 || (0x7F...0x9F).contains(scalar.value)) {
            if out.utf8.count + String(scalar).utf8.count > limit { break }
            out.unicodeScalars.append(scalar)
        }
        return out
    }
}
