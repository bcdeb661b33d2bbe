import Basics
import Credentials
import HTTP1

/// Every answer the proxy itself gives (CONTRACT.md "Errors the proxy itself returns"). Each case
/// knows its status and stable code; messages never carry a token, a secret or an upstream body.
public enum ProxyError: Error, Equatable {
    case badRequest(String)
    case clientAuthorizationRejected
    case loginRequired(String)
    case forbiddenHost
    case forbiddenOrigin
    case forbiddenClient
    case forbiddenPath
    case forbiddenTarget
    /// A route with `placeholder` and a request without one of its placeholders where the
    /// credential goes (403); `challenge`: a Basic route's request with no Authorization (401).
    case placeholderRequired(challenge: Bool)
    /// A CONNECT the forward proxy refuses (403 `forbidden_target`), with why.
    case refusedConnect(String)
    /// A request in a forward-proxy tunnel for another host than the tunnel's (RFC 9110 §15.5.20).
    case misdirectedRequest
    case noRoute
    case methodNotAllowed
    case requestTimeout
    case bodyTooLarge
    case headersTooLarge
    case notImplemented(String)
    case badGateway(String)
    case tokenUnavailable(String, retryAfter: Int)
    /// Over the route's `budget` (CONTRACT "Budgets"): 429 with `Retry-After`.
    case rateLimited(BudgetRefusal, retryAfter: Int)
    case overloaded
    case upstreamTimeout

    public var status: Int {
        switch self {
        case .badRequest, .clientAuthorizationRejected: return 400
        case .loginRequired: return 401
        case .placeholderRequired(let challenge): return challenge ? 401 : 403
        case .forbiddenHost, .forbiddenOrigin, .forbiddenClient, .forbiddenPath, .forbiddenTarget, .refusedConnect: return 403
        case .noRoute: return 404
        case .methodNotAllowed: return 405
        case .misdirectedRequest: return 421
        case .rateLimited: return 429
        case .requestTimeout: return 408
        case .bodyTooLarge: return 413
        case .headersTooLarge: return 431
        case .notImplemented: return 501
        case .badGateway: return 502
        case .tokenUnavailable, .overloaded: return 503
        case .upstreamTimeout: return 504
        }
    }

    public var code: String {
        switch self {
        case .badRequest: return "bad_request"
        case .clientAuthorizationRejected: return "client_authorization_rejected"
        case .loginRequired: return RefreshOutcome.loginRequiredCode
        case .forbiddenHost: return "forbidden_host"
        case .forbiddenOrigin: return "forbidden_origin"
        case .forbiddenClient: return "forbidden_client"
        case .forbiddenPath: return "forbidden_path"
        case .forbiddenTarget, .refusedConnect: return "forbidden_target"
        case .placeholderRequired: return "placeholder_required"
        case .misdirectedRequest: return "misdirected_request"
        case .noRoute: return "no_route"
        case .methodNotAllowed: return "method_not_allowed"
        case .requestTimeout: return "request_timeout"
        case .bodyTooLarge: return "body_too_large"
        case .headersTooLarge: return "headers_too_large"
        case .notImplemented: return "not_implemented"
        case .badGateway: return "bad_gateway"
        case .tokenUnavailable: return RefreshOutcome.tokenUnavailableCode
        case .rateLimited: return "rate_limited"
        case .overloaded: return "overloaded"
        case .upstreamTimeout: return "upstream_timeout"
        }
    }

    public var message: String {
        switch self {
        case .badRequest(let why): return why
        case .clientAuthorizationRejected:
            return "this proxy does not accept a client's own credential where it puts its token (Authorization, or what inject names)"
        case .loginRequired(let why): return why
        case .forbiddenHost: return "the Host header is not one this proxy answers to"
        case .forbiddenOrigin: return "requests from this Origin are not allowed"
        case .forbiddenClient: return "the request lacks the proxy's access header or its value is wrong"
        case .forbiddenPath: return "this path or method is not allowed through the proxy"
        case .forbiddenTarget: return "this proxy forwards only to its upstream"
        case .placeholderRequired: return "this route takes a request only with one of its placeholders where its credential goes"
        case .refusedConnect(let why): return why
        case .misdirectedRequest: return "this tunnel was opened for another host; open one for this host"
        case .noRoute: return "no route of this proxy matches the request"
        case .methodNotAllowed: return "CONNECT is not supported"
        case .requestTimeout: return "the request did not arrive in time"
        case .bodyTooLarge: return "the request body is larger than this proxy accepts"
        case .headersTooLarge: return "the request head is larger than this proxy accepts"
        case .notImplemented(let why): return why
        case .badGateway(let why): return why
        case .tokenUnavailable(let why, _): return why
        case .rateLimited(.concurrency, _): return "too many requests of this caller are in flight on this route (budget.max_concurrent)"
        case .rateLimited(.rate, _): return "this caller is over this route's request rate (budget.rate)"
        case .overloaded: return "too many connections"
        case .upstreamTimeout: return "the upstream did not answer in time"
        }
    }

    /// Errors after which the request's framing can no longer be trusted: the connection closes.
    public var closesConnection: Bool {
        switch self {
        case .badRequest, .requestTimeout, .bodyTooLarge, .headersTooLarge, .notImplemented, .overloaded: return true
        case .clientAuthorizationRejected, .loginRequired, .forbiddenHost, .forbiddenOrigin, .forbiddenClient,
            .forbiddenPath, .forbiddenTarget, .placeholderRequired, .refusedConnect, .misdirectedRequest, .noRoute, .methodNotAllowed, .badGateway,
            .tokenUnavailable, .upstreamTimeout, .rateLimited:
            return false
        }
    }

    init(_ parseError: RequestParseError) {
        switch parseError {
        case .badRequest(let why): self = .badRequest(why)
        case .headersTooLarge: self = .headersTooLarge
        case .bodyTooLarge: self = .bodyTooLarge
        case .notImplemented(let why): self = .notImplemented(why)
        }
    }

    /// The whole response: status line, headers, JSON body (none for HEAD). `route`: the route
    /// whose token state the error comes from, named in the body (CONTRACT "Several APIs").
    func response(keepAlive: Bool, isHead: Bool, route: String? = nil) -> [UInt8] {
        var body: [UInt8] = []
        body.append(contentsOf: #"{"error":""#.utf8)
        body.append(contentsOf: code.utf8)
        body.append(contentsOf: #"","message":""#.utf8)
        JSONString.appendEscaped(message, to: &body)
        if let route {
            body.append(contentsOf: #"","route":""#.utf8)
            JSONString.appendEscaped(route, to: &body)
        }
        body.append(contentsOf: #""}"#.utf8)
        body.append(10)
        let out = ByteBuffer()
        ResponseWriter.appendStatusLine(out, version: .http1_1, code: status, reason: ResponseWriter.reasonPhrase(for: status))
        ResponseWriter.appendField(out, name: "Content-Type", value: "application/json")
        ResponseWriter.appendField(out, name: "Content-Length", value: String(body.count))
        ResponseWriter.appendField(out, name: "Cache-Control", value: "no-store")
        switch self {
        case .loginRequired:
            ResponseWriter.appendField(out, name: "WWW-Authenticate", value: #"Bearer realm="tokenproxy""#)
        case .placeholderRequired(challenge: true):
            ResponseWriter.appendField(out, name: "WWW-Authenticate", value: #"Basic realm="tokenproxy""#)
        case .tokenUnavailable(_, let retryAfter):
            ResponseWriter.appendField(out, name: "Retry-After", value: String(max(1, retryAfter)))
        case .overloaded:
            ResponseWriter.appendField(out, name: "Retry-After", value: "1")
        case .rateLimited(_, let retryAfter):
            ResponseWriter.appendField(out, name: "Retry-After", value: String(max(1, retryAfter)))
        case .methodNotAllowed:
            ResponseWriter.appendField(out, name: "Allow", value: "GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS")
        default:
            break
        }
        if !keepAlive { ResponseWriter.appendField(out, name: "Connection", value: "close") }
        ResponseWriter.appendEndOfHead(out)
        if !isHead { out.append(body) }
        return out.bytes
    }
}
