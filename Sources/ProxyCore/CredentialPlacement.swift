import Config
import Credentials
import Foundation
import HTTP1

/// Where a route puts its token in each upstream request (CONTRACT.md "Where the credential goes"),
/// chosen once when the route is built, never per request (`RouteCredential`); each request's
/// `RequestCredential` is resolved from it and the token. Every case's bytes are made once per token,
/// not per request. The tokens themselves are visible ASCII: `TokenManager` publishes no token with a
/// space, a line break or another control character (`BearerToken.isUsable`), so none of them can
/// split a field or a query; a request meets 503 `token_unavailable` instead. A request-signing step
/// (SigV4) is one more case of the same kind.
enum CredentialPlacement {
    /// `Authorization: Bearer <token>`: the line the snapshot made when the token was published
    /// (`TokenSnapshot.authorizationField`), so the usual request formats nothing.
    case authorization
    /// Another field, another format, or Basic: a line made once per token.
    case field(InjectedField)
    /// The token as a query parameter of every request.
    case query(InjectedQueryParameter)
    /// `type: aws` (or a Cognito identity pool): the token (AWS credentials) goes in no field; the
    /// request is signed (SigV4) by this route's step (`RequestCredential.signed`). The client's
    /// Authorization makes way for the signature's.
    case signed(SigV4RequestSigner)

    /// The route's placement: signed for `type: aws` and a Cognito identity pool (`inject` does not
    /// apply), else where `inject` says.
    init(_ inject: InjectConfiguration?, credentials: CredentialsConfiguration) {
        guard let aws = credentials.source.awsSigning else {
            self.init(inject)
            return
        }
        self = .signed(
            SigV4RequestSigner(
                region: aws.region, rules: AWSServiceRules(service: aws.service, unsignedPayload: aws.payload == .unsigned),
                refreshMargin: credentials.refreshMargin))
    }

    private init(_ inject: InjectConfiguration?) {
        guard let inject, !inject.isDefault else {
            self = .authorization
            return
        }
        switch inject.placement {
        case .header(let name, let format):
            self = .field(InjectedField(name: name, value: .format(format)))
        case .basic(let username):
            self = .field(InjectedField(name: InjectConfiguration.defaultFieldName, value: .basic(username: username)))
        case .query(let parameter):
            self = .query(InjectedQueryParameter(name: parameter))
        }
    }

    /// The field a client's own copy of follows `forward.client_authorization`, lowercased; nil for
    /// a query parameter.
    var lowercasedFieldName: String? {
        switch self {
        case .authorization, .signed: return "authorization"
        case .field(let field): return field.lowercasedName
        case .query: return nil
        }
    }

    /// The query parameter a client's own copy of follows `forward.client_authorization`.
    var queryParameter: String? {
        switch self {
        case .authorization, .field, .signed: return nil
        case .query(let parameter): return parameter.name
        }
    }

    /// Whether the client carries its own credential where the proxy would put the token: the field,
    /// or the query parameter in `query`.
    func clientSends(_ head: borrowing RequestHead, query: String?) -> Bool {
        switch self {
        case .authorization, .signed: return head.fields.firstIndex("authorization") != nil
        case .field(let field): return head.fields.firstIndex(field.lowercasedName) != nil
        case .query(let parameter): return InjectedQueryParameter.occurs(parameter.name, in: query)
        }
    }
}

/// A field that carries the token in another form than `Authorization: Bearer` (`inject.header`
/// with `format`, or `inject.basic_username`). Each loop's route has its own, so its cache of the
/// last token's line is touched by one thread.
final class InjectedField {
    enum Value: Equatable {
        /// `{token}` in the format stands for the token.
        case format(String)
        /// RFC 7617 §2: `Basic base64(user-id ":" password)`, the token as the password.
        case basic(username: String)
    }

    let name: String
    let lowercasedName: String
    let value: Value
    /// `Authorization` (also for Basic): the client's Authorization is then the field replaced.
    let isAuthorization: Bool
    /// `Proxy-Authorization`: a hop-by-hop field (RFC 9110 §7.6.1), dropped with the others unless
    /// the client's own is kept.
    let isHopByHop: Bool
    private var lastToken: TokenSnapshot?
    private var lastLine: [UInt8] = []

    init(name: String, value: Value) {
        self.name = name
        lowercasedName = name.lowercased()
        self.value = value
        isAuthorization = lowercasedName == "authorization"
        isHopByHop = lowercasedName == "proxy-authorization"
    }

    /// The field line for `token`, made when the token changes.
    func line(for token: TokenSnapshot) -> [UInt8] {
        if token !== lastToken {
            lastToken = token
            lastLine = Self.line(name: name, value: value, token: token.accessToken)
        }
        return lastLine
    }

    /// `<name>: <value with the token>\r\n`.
    static func line(name: String, value: Value, token: String) -> [UInt8] {
        let text: String
        switch value {
        case .format(let format): text = format.replacingOccurrences(of: InjectConfiguration.tokenMark, with: token)
        case .basic(let username): text = "Basic " + Data((username + ":" + token).utf8).base64EncodedString()
        }
        return Array("\(name): \(text)\r\n".utf8)
    }
}

/// `inject.query`: the token, percent-encoded, as one query parameter. The rest of the query keeps
/// its bytes and order; a client's own parameter of that name is replaced where it stands (and any
/// further one dropped), or the parameter is appended when absent. Pairs are separated by `&` or
/// `;` (CONTRACT.md "Where the credential goes": some upstream frameworks split on both, so a
/// client's `;api_key=` would reach them beside the injected one).
final class InjectedQueryParameter {
    let name: String
    private let encodedName: String
    private var lastToken: TokenSnapshot?
    private var lastPair: String = ""
    private var lastEncodedToken: String = ""

    init(name: String) {
        self.name = name
        encodedName = FormEncoding.encode(name)
    }

    /// The query to send with `token`.
    func query(_ query: String?, with token: TokenSnapshot) -> String {
        remember(token)
        return Self.rewritten(query, name: name, pair: lastPair)
    }

    /// The spellings of `token` that went upstream and that an answer's field may carry back: the
    /// token, and the token percent-encoded as the query has it.
    func spellings(of token: TokenSnapshot) -> [String] {
        remember(token)
        return lastEncodedToken == token.accessToken ? [token.accessToken] : [token.accessToken, lastEncodedToken]
    }

    private func remember(_ token: TokenSnapshot) {
        guard token !== lastToken else { return }
        lastToken = token
        lastEncodedToken = FormEncoding.encode(token.accessToken)
        lastPair = encodedName + "=" + lastEncodedToken
    }

    /// `query` (without its `?`; nil when the target had none) with `pair` (`name=value`, already
    /// encoded) in place of the first parameter named `name` and without any later one, or with
    /// `pair` appended when there is none.
    static func rewritten(_ query: String?, name: String, pair: String) -> String {
        guard let query, !query.isEmpty else { return pair }
        var result = ""
        var first = true
        var placed = false
        for (separator, parameter) in parameters(query[...]) {
            let named = isNamed(parameter, name)
            if named && placed { continue }
            // A dropped parameter takes its separator along; the first one kept has none.
            if !first { result += separator }
            first = false
            if named {
                result += pair
                placed = true
            } else {
                result += parameter
            }
        }
        if !placed { result += (first ? "" : "&") + pair }
        return result
    }

    /// `query` without any parameter named `name`, the rest as it came: a `Location` the proxy
    /// rewrites does not hand the injected token to the client.
    static func removing(_ name: String, from query: Substring) -> String {
        var result = ""
        var first = true
        for (separator, parameter) in parameters(query) where !isNamed(parameter, name) {
            if !first { result += separator }
            first = false
            result += parameter
        }
        return result
    }

    /// Whether `query` holds a parameter named `name`.
    static func occurs(_ name: String, in query: String?) -> Bool {
        guard let query else { return false }
        return parameters(query[...]).contains { isNamed($0.parameter, name) }
    }

    /// `value` with every occurrence of each of `spellings` replaced by as many `*` (CONTRACT.md
    /// "Where the credential goes": a length stays right); nil when it holds none.
    static func scrubbed(_ value: String, hiding spellings: [String]) -> String? {
        var result = value
        for spelling in spellings where !spelling.isEmpty && result.contains(spelling) {
            result = result.replacingOccurrences(of: spelling, with: String(repeating: "*", count: spelling.utf8.count))
        }
        return result == value ? nil : result
    }

    /// The query's parameters as `&` and `;` separate them, each with the separator before it
    /// (empty for the first).
    private static func parameters(_ query: Substring) -> [(separator: Substring, parameter: Substring)] {
        var result: [(separator: Substring, parameter: Substring)] = []
        var separatorStart = query.startIndex
        var start = query.startIndex
        var i = query.utf8.startIndex
        while i < query.utf8.endIndex {
            let byte = query.utf8[i]
            if byte == UInt8(ascii: "&") || byte == UInt8(ascii: ";") {
                result.append((query[separatorStart..<start], query[start..<i]))
                separatorStart = i
                start = query.utf8.index(after: i)
            }
            i = query.utf8.index(after: i)
        }
        result.append((query[separatorStart..<start], query[start...]))
        return result
    }

    /// A parameter's name is what comes before its first `=`, compared after percent-decoding (a
    /// client's `api%5Fkey` is the upstream's `api_key`; `+` is a space in a form-encoded query).
    private static func isNamed(_ parameter: Substring, _ name: String) -> Bool {
        let rawName = parameter.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false).first ?? parameter
        if rawName == name { return true }
        guard rawName.utf8.contains(where: { $0 == UInt8(ascii: "%") || $0 == UInt8(ascii: "+") }) else { return false }
        return percentDecoded(rawName, plusIsSpace: true) == name
    }
}
