import Config
import HTTP1
import Upstream

/// Turns a client's request head into what libcurl sends, and the upstream's response head into
/// what the client gets (CONTRACT.md points 1 and 7). A class: each request borrows the one of its loop.
final class Forwarder {
    let upstream: UpstreamURL
    let urlPrefix: String
    let preserveHost: Bool
    let clientAuthorization: ForwardConfiguration.ClientAuthorization
    let requiredHeaderLowercased: String?
    /// Location values starting with this (lowercased scheme and host) point into the upstream.
    let locationPrefixes: [String]

    init(configuration c: Configuration) {
        upstream = c.upstream
        urlPrefix = c.upstream.origin + c.upstream.basePath
        preserveHost = c.forward.preserveHost
        clientAuthorization = c.forward.clientAuthorization
        requiredHeaderLowercased = c.access.requireHeader?.lowercased()
        var prefixes = [urlPrefix]
        // The same origin written with or without its default port.
        let host = c.upstream.host.utf8.contains(UInt8(ascii: ":")) ? "[\(c.upstream.host)]" : c.upstream.host
        let defaultPort = c.upstream.scheme == "https" ? 443 : 80
        if c.upstream.port == defaultPort {
            prefixes.append("\(c.upstream.scheme)://\(host):\(defaultPort)\(c.upstream.basePath)")
            prefixes.append("\(c.upstream.scheme)://\(host)\(c.upstream.basePath)")
        }
        locationPrefixes = Array(Set(prefixes))
    }

    /// Whether a client's own Authorization header goes upstream instead of the token.
    func keepsClientAuthorization(_ head: RequestHead) -> Bool {
        clientAuthorization == .keep && head.first("authorization") != nil
    }

    func url(path: String, query: String?) -> String {
        var url = urlPrefix
        url.reserveCapacity(urlPrefix.count + path.count + (query?.count ?? 0) + 1)
        url += path
        if let query {
            url += "?"
            url += query
        }
        return url
    }

    /// Header lines for libcurl, written into `lines` (emptied first; the caller reuses it so that
    /// a request costs no String or allocation per line). `authorization` is the `Bearer …` value to
    /// inject, or nil to send the client's own (keep mode).
    func headerLines(into lines: inout HeaderLines, for head: RequestHead, authorization: [UInt8]?, peerHost: String) {
        lines.removeAll()
        var sawAccept = false
        var clientHost: String?
        for field in head.fields {
            let name = field.name
            if HopByHop.isHopByHop(name, connectionOptions: head.connectionOptions) { continue }
            let role = Forwarder.role(of: name)
            switch role {
            case .host:
                clientHost = field.value
                if preserveHost { lines.append(name: "Host", value: field.value) }
                continue
            case .authorization:
                if authorization == nil { lines.append(name: field.name, value: field.value) }
                continue
            case .replaced:
                continue  // libcurl frames the body; 100-continue is ours; X-Forwarded-* are set below
            case .accept, .other:
                break
            }
            if let required = requiredHeaderLowercased, asciiCaseInsensitiveEquals(name, required) { continue }
            if role == .accept { sawAccept = true }
            lines.append(name: field.name, value: field.value)
        }
        if let authorization {
            lines.append(name: "Authorization", value: authorization)
        }
        if !peerHost.isEmpty { lines.append(name: "X-Forwarded-For", value: peerHost) }
        lines.append(name: "X-Forwarded-Proto", value: "http")
        if let clientHost { lines.append(name: "X-Forwarded-Host", value: clientHost) }
        // Stop libcurl adding headers of its own (ARCHITECTURE.md): a bare "Name:" removes one.
        if !sawAccept { lines.appendRemoval("Accept") }
        // libcurl adds Expect: 100-continue only to some uploads; a line less costs it a header
        // comparison for each header it might add itself.
        if head.framing != .none { lines.appendRemoval("Expect") }
    }

    private enum RequestFieldRole { case host, authorization, accept, replaced, other }

    /// What the proxy does with a request field of this name; one comparison or two for most names
    /// (the length picks the candidates).
    private static func role(of name: String) -> RequestFieldRole {
        switch name.utf8.count {
        case 4: return asciiCaseInsensitiveEquals(name, "host") ? .host : .other
        case 6:
            if asciiCaseInsensitiveEquals(name, "accept") { return .accept }
            return asciiCaseInsensitiveEquals(name, "expect") ? .replaced : .other
        case 13: return asciiCaseInsensitiveEquals(name, "authorization") ? .authorization : .other
        case 14: return asciiCaseInsensitiveEquals(name, "content-length") ? .replaced : .other
        case 15: return asciiCaseInsensitiveEquals(name, "x-forwarded-for") ? .replaced : .other
        case 16: return asciiCaseInsensitiveEquals(name, "x-forwarded-host") ? .replaced : .other
        case 17: return asciiCaseInsensitiveEquals(name, "x-forwarded-proto") ? .replaced : .other
        default: return .other
        }
    }

    /// A Location into the upstream's base URL, rewritten to point at the proxy (nginx's
    /// `proxy_redirect default`); nil when it points elsewhere.
    func rewrittenLocation(_ value: String, clientHost: String?) -> String? {
        let lowered = value.lowercased()
        for prefix in locationPrefixes where lowered.hasPrefix(prefix.lowercased()) {
            let rest = value.dropFirst(prefix.count)
            guard rest.isEmpty || rest.first == "/" || rest.first == "?" else { continue }
            let path = rest.isEmpty || rest.first == "?" ? "/" + rest : String(rest)
            guard let clientHost else { return path }
            return "http://\(clientHost)\(path)"
        }
        return nil
    }
}
