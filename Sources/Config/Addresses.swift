import Basics
import FoundationEssentials
import Sockets

/// Parsing of `listen`, `admin.listen`, `upstream` and the identity-provider URLs.
/// Reasons describe the problem without echoing the whole value (a URL may carry a password).
enum AddressParser {
    /// `host:port` (IPv4 literal or `localhost`), `[v6]:port`, or `unix:PATH` (relative to `baseDirectory`).
    static func listen(_ raw: String, baseDirectory: String) throws(AddressProblem) -> ListenAddress {
        let text = raw.trimmingWhitespace()
        if text.hasPrefix("unix:") {
            let path = String(text.dropFirst(5))
            guard !path.isEmpty else { throw AddressProblem("unix: needs a socket path, e.g. unix:/run/tokenproxy.sock") }
            guard !path.contains("\0") else { throw AddressProblem("the socket path contains a NUL byte") }
            return .unix(path: Paths.resolve(path, against: baseDirectory))
        }
        let parts: Authority.Parts
        do {
            parts = try Authority.parts(of: text, port: .init(required: true, lowest: 0))
        } catch {
            throw AddressProblem(listenReason(error, text))
        }
        let host = parts.host
        if parts.isIPv6Literal {
            guard IPAddress.v6(host) != nil else { throw AddressProblem("\(host) is not an IPv6 address") }
        } else {
            guard host == "localhost" || IPAddress.v4(host) != nil else {
                throw AddressProblem("\(host) is not an IPv4 address or localhost (IPv6 goes in brackets)")
            }
        }
        guard let port = parts.port else { throw AddressProblem("the port must be a number from 0 to 65535") }
        return .tcp(host: host, port: port)
    }

    /// Why `text` is no `listen` address, with the spelling to write instead.
    private static func listenReason(_ problem: Authority.Problem, _ text: String) -> String {
        switch problem {
        case .unclosedBracket: return "an IPv6 address needs a closing ]"
        case .textAfterBracket: return "expected [ADDRESS]:PORT"
        case .missingPort: return text.hasPrefix("[") ? "expected [ADDRESS]:PORT" : "expected HOST:PORT (e.g. 127.0.0.1:8080) or unix:PATH"
        case .notIPv6InBrackets: return "\(text.dropFirst().prefix { $0 != "]" }.lowercased()) is not an IPv6 address"
        case .noHost: return "missing host; write 127.0.0.1:PORT (or 0.0.0.0:PORT with allow_remote: true)"
        case .ipv6WithoutBrackets: return "write an IPv6 address in brackets: [\(text[..<(text.lastIndex(of: ":") ?? text.endIndex)].lowercased())]:PORT"
        case .badPort, .hostByte: return "the port must be a number from 0 to 65535"
        }
    }

    /// True for a unix socket, 127.0.0.0/8, ::1 (and ::ffff:127.x.x.x) and `localhost`.
    static func isLoopback(_ address: ListenAddress) -> Bool {
        switch address {
        case .unix: return true
        case .tcp(let host, _):
            if host == "localhost" { return true }
            if let v4 = IPAddress.v4(host) { return v4[0] == 127 }
            if let v6 = IPAddress.v6(host) {
                if v6 == [UInt8](repeating: 0, count: 15) + [1] { return true }
                return v6[0..<10].allSatisfy { $0 == 0 } && v6[10] == 0xff && v6[11] == 0xff && v6[12] == 127
            }
            return false
        }
    }

    /// An http(s) base URL: host required; no userinfo, query or fragment.
    /// `{host}` as the whole host (`https://{host}`, `http://{host}:8080/base`) is kept as the host:
    /// the request's own, filled in per request (`UpstreamURL.takesRequestHost`).
    static func upstream(_ raw: String) throws(AddressProblem) -> UpstreamURL {
        let original = raw.trimmingWhitespace()
        // A name that parses like any other stands in for `{host}` while the rest is checked.
        let standIn = "request-host.invalid"
        var text = original
        var takesRequestHost = false
        if let marker = original.firstRange(of: "://" + UpstreamURL.requestHost) {
            let after = original[marker.upperBound...].first
            if after == nil || after == ":" || after == "/" {
                text = original[..<marker.lowerBound] + "://" + standIn + original[marker.upperBound...]
                takesRequestHost = true
            }
        }
        let parts = try httpURL(text, allowQuery: false)
        var basePath = parts.path
        while basePath.hasSuffix("/") { basePath.removeLast() }
        return UpstreamURL(
            scheme: parts.scheme.rawValue, host: takesRequestHost ? UpstreamURL.requestHost : parts.host,
            port: parts.port ?? parts.scheme.defaultPort, explicitPort: parts.port != nil, basePath: basePath,
            original: original)
    }

    /// Checks an identity-provider URL (token_url, issuer_url...): http or https with a host, no fragment.
    static func checkEndpoint(_ raw: String) throws(AddressProblem) {
        _ = try httpURL(raw.trimmingWhitespace(), allowQuery: true)
    }

    struct URLParts {
        var scheme: URLScheme
        var host: String
        var port: Int?
        var path: String
    }

    static func httpURL(_ text: String, allowQuery: Bool) throws(AddressProblem) -> URLParts {
        guard !text.isEmpty else { throw AddressProblem("must not be empty") }
        guard !text.contains(where: { $0.isWhitespace || ($0.asciiValue.map { $0 < 0x20 || $0 == 0x7f } ?? false) }) else {
            throw AddressProblem("a URL must not contain spaces or control characters")
        }
        guard let split = URLScheme.split(text[...]) else {
            throw AddressProblem("not an absolute URL; expected http://HOST or https://HOST")
        }
        let scheme = split.scheme.lowercased()
        guard let known = URLScheme(scheme), known == .http || known == .https else {
            let shown = scheme.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || "+-.".contains($0)) }) ? scheme : "?"
            throw AddressProblem("uses scheme \(shown); only http and https are supported")
        }
        let rest = split.rest
        if rest.contains("#") { throw AddressProblem("must not have a fragment (#...)") }
        let authorityEnd = rest.firstIndex(where: { $0 == "/" || $0 == "?" }) ?? rest.endIndex
        let authority = rest[..<authorityEnd]
        let pathAndQuery = rest[authorityEnd...]
        if authority.contains("@") {
            throw AddressProblem("must not contain user information (user:password@); credentials belong under credentials:")
        }
        if !allowQuery, pathAndQuery.contains("?") {
            throw AddressProblem("must not have a query (?...); the request's query is appended as it comes")
        }
        let path = String(pathAndQuery.prefix { $0 != "?" })
        let parts: Authority.Parts
        do {
            parts = try Authority.parts(of: authority, port: .init(required: false))
        } catch {
            switch error {
            case .unclosedBracket: throw AddressProblem("an IPv6 host needs a closing ]")
            case .notIPv6InBrackets: throw AddressProblem("the host in brackets is not an IPv6 address")
            case .textAfterBracket: throw AddressProblem("unexpected characters after the IPv6 host")
            case .ipv6WithoutBrackets: throw AddressProblem("an IPv6 host goes in brackets: [ADDRESS]:PORT")
            case .noHost: throw AddressProblem("has no host")
            case .badPort, .missingPort, .hostByte: throw AddressProblem("the port must be a number from 1 to 65535")
            }
        }
        let host = parts.host
        if parts.isIPv6Literal {
            guard IPAddress.v6(host) != nil else { throw AddressProblem("the host in brackets is not an IPv6 address") }
        } else {
            guard host.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || "-._~%".contains($0)) }) else {
                throw AddressProblem("the host contains characters a host name cannot have")
            }
        }
        return URLParts(scheme: known, host: host, port: parts.port, path: path)
    }
}

struct AddressProblem: Error {
    var reason: String
    init(_ reason: String) { self.reason = reason }
}

enum Paths {
    /// Absolute form of `path`: relative paths are joined to `base`; `.` and `..` are removed
    /// lexically (symlinks are not followed; the file need not exist).
    static func resolve(_ path: String, against base: String) -> String {
        let joined = path.hasPrefix("/") ? path : base + "/" + path
        var parts: [Substring] = []
        for part in joined.split(separator: "/", omittingEmptySubsequences: true) {
            switch part {
            case ".": continue
            case "..": if !parts.isEmpty { parts.removeLast() }
            default: parts.append(part)
            }
        }
        return "/" + parts.joined(separator: "/")
    }

    /// The folder holding `path` ("/a/b/c" → "/a/b", "/c" → "/"), for an absolute path.
    static func folder(of path: String) -> String {
        guard let slash = path.lastIndex(of: "/"), slash != path.startIndex else { return "/" }
        return String(path[..<slash])
    }

    /// What is at `path` after following symlinks, or nil when nothing is (stat(2), without Foundation).
    static func kind(of path: String) -> FileKind? { FileKind.of(path) }
}
