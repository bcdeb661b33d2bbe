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
        let host: String
        let portText: Substring
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]") else { throw AddressProblem("an IPv6 address needs a closing ]") }
            host = String(text[text.index(after: text.startIndex)..<close]).lowercased()
            let rest = text[text.index(after: close)...]
            guard rest.hasPrefix(":") else { throw AddressProblem("expected [ADDRESS]:PORT") }
            portText = rest.dropFirst()
            guard IPAddress.v6(host) != nil else { throw AddressProblem("\(host) is not an IPv6 address") }
        } else {
            guard let colon = text.lastIndex(of: ":") else {
                throw AddressProblem("expected HOST:PORT (e.g. 127.0.0.1:8080) or unix:PATH")
            }
            host = String(text[..<colon]).lowercased()
            portText = text[text.index(after: colon)...]
            guard !host.isEmpty else {
                throw AddressProblem("missing host; write 127.0.0.1:PORT (or 0.0.0.0:PORT with allow_remote: true)")
            }
            guard !host.contains(":") else { throw AddressProblem("write an IPv6 address in brackets: [\(host)]:PORT") }
            guard host == "localhost" || IPAddress.v4(host) != nil else {
                throw AddressProblem("\(host) is not an IPv4 address or localhost (IPv6 goes in brackets)")
            }
        }
        guard !portText.isEmpty, portText.allSatisfy({ $0.isASCII && $0.isNumber }), portText.count <= 5,
            let port = Int(portText), port <= 65535
        else { throw AddressProblem("the port must be a number from 0 to 65535") }
        return .tcp(host: host, port: port)
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
            scheme: parts.scheme, host: takesRequestHost ? UpstreamURL.requestHost : parts.host,
            port: parts.port ?? Authority.defaultPort(scheme: parts.scheme), explicitPort: parts.port != nil, basePath: basePath,
            original: original)
    }

    /// Checks an identity-provider URL (token_url, issuer_url...): http or https with a host, no fragment.
    static func checkEndpoint(_ raw: String) throws(AddressProblem) {
        _ = try httpURL(raw.trimmingWhitespace(), allowQuery: true)
    }

    struct URLParts {
        var scheme: String
        var host: String
        var port: Int?
        var path: String
    }

    static func httpURL(_ text: String, allowQuery: Bool) throws(AddressProblem) -> URLParts {
        guard !text.isEmpty else { throw AddressProblem("must not be empty") }
        guard !text.contains(where: { $0.isWhitespace || ($0.asciiValue.map { $0 < 0x20 || $0 == 0x7f } ?? false) }) else {
            throw AddressProblem("a URL must not contain spaces or control characters")
        }
        guard let schemeEnd = text.firstRange(of: "://") else {
            throw AddressProblem("not an absolute URL; expected http://HOST or https://HOST")
        }
        let scheme = text[..<schemeEnd.lowerBound].lowercased()
        guard scheme == "http" || scheme == "https" else {
            let shown = scheme.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || "+-.".contains($0)) }) ? scheme : "?"
            throw AddressProblem("uses scheme \(shown); only http and https are supported")
        }
        let rest = text[schemeEnd.upperBound...]
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
        var host: String
        var portText: Substring? = nil
        if authority.hasPrefix("[") {
            guard let close = authority.firstIndex(of: "]") else { throw AddressProblem("an IPv6 host needs a closing ]") }
            host = String(authority[authority.index(after: authority.startIndex)..<close]).lowercased()
            guard IPAddress.v6(host) != nil else { throw AddressProblem("the host in brackets is not an IPv6 address") }
            let after = authority[authority.index(after: close)...]
            if !after.isEmpty {
                guard after.hasPrefix(":") else { throw AddressProblem("unexpected characters after the IPv6 host") }
                portText = after.dropFirst()
            }
        } else if let colon = authority.firstIndex(of: ":") {
            host = String(authority[..<colon]).lowercased()
            portText = authority[authority.index(after: colon)...]
        } else {
            host = String(authority).lowercased()
        }
        guard !host.isEmpty else { throw AddressProblem("has no host") }
        if !host.contains(":") {
            guard host.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || "-._~%".contains($0)) }) else {
                throw AddressProblem("the host contains characters a host name cannot have")
            }
        }
        var port: Int? = nil
        if let portText {
            guard !portText.isEmpty, portText.count <= 5, portText.allSatisfy({ $0.isASCII && $0.isNumber }),
                let value = Int(portText), (1...65535).contains(value)
            else { throw AddressProblem("the port must be a number from 1 to 65535") }
            port = value
        }
        return URLParts(scheme: scheme, host: host, port: port, path: path)
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
