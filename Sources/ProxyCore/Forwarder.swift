import Config
import HTTP1
import Upstream

/// Turns a client's request head into the upstream's, and the upstream's Location into the
/// client's (CONTRACT.md points 1 and 7). A class: each request borrows the one of its loop.
final class Forwarder {
    let upstream: UpstreamURL
    let urlPrefix: String
    /// The Host field for the upstream: its host, with the port when it is not the scheme's default.
    let upstreamHost: String
    let preserveHost: Bool
    let clientAuthorization: ForwardConfiguration.ClientAuthorization
    let requiredHeaderLowercased: String?
    /// Location values starting with this (lowercased scheme and host) point into the upstream.
    let locationPrefixes: [String]

    init(configuration c: Configuration) {
        upstream = c.upstream
        urlPrefix = c.upstream.origin + c.upstream.basePath
        let bracketed = c.upstream.host.utf8.contains(UInt8(ascii: ":")) ? "[\(c.upstream.host)]" : c.upstream.host
        upstreamHost = c.upstream.port == (c.upstream.scheme == "https" ? 443 : 80) ? bracketed : "\(bracketed):\(c.upstream.port)"
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
        clientAuthorization == .keep && head.firstIndex("authorization") != nil
    }

    /// Writes the upstream request head into `out` (CONTRACT point 1): the request line with the
    /// upstream's base path, Host, the client's fields in order and byte for byte (hop-by-hop fields,
    /// the proxy's own and the access header left out), Authorization, X-Forwarded-*, and for an
    /// upgrade `Connection: upgrade` with the client's Upgrade field. `authorization` is the
    /// `Bearer …` value to inject, or nil to send the client's own (keep mode). `wholeBodyLength`: a
    /// chunked body that goes whole, with Content-Length (CONTRACT point 8); nil: it goes chunked.
    func writeRequestHead(
        into out: inout [UInt8], for head: RequestHead, path: String, query: String?, authorization: [UInt8]?,
        peerHost: String, forwardedHost: String?, upgrade: Bool, wholeBodyLength: Int? = nil
    ) {
        RequestWriter.appendRequestLine(&out, method: head.method, pathPrefix: upstream.basePath, path: path, query: query)
        if !preserveHost { RequestWriter.appendField(&out, name: "Host", value: upstreamHost) }
        var upgradeField: Int?
        for i in 0..<head.count {
            if head.isHopByHop(i, connectionOptions: head.connectionOptions) {
                if upgrade && head.nameEquals(i, "upgrade") { upgradeField = i }
                continue
            }
            switch Forwarder.role(of: i, in: head) {
            case .host:
                if preserveHost { head.copyField(i, to: &out) }
                continue
            case .authorization:
                if authorization == nil { head.copyField(i, to: &out) }
                continue
            case .replaced:
                continue  // X-Forwarded-* are set below
            case .other:
                break
            }
            if let required = requiredHeaderLowercased, head.nameEquals(i, lowercasedName: required) { continue }
            head.copyField(i, to: &out)
        }
        if let authorization { RequestWriter.appendField(&out, name: "Authorization", value: authorization) }
        if !peerHost.isEmpty { RequestWriter.appendField(&out, name: "X-Forwarded-For", value: peerHost) }
        RequestWriter.appendField(&out, name: "X-Forwarded-Proto", value: "http")
        if let forwardedHost { RequestWriter.appendField(&out, name: "X-Forwarded-Host", value: forwardedHost) }
        // Transfer-Encoding is hop-by-hop: a chunked body is chunked again on the way up.
        if head.framing == .chunked {
            if let wholeBodyLength {
                RequestWriter.appendField(&out, name: "Content-Length", value: String(wholeBodyLength))
            } else {
                RequestWriter.appendField(&out, name: "Transfer-Encoding", value: "chunked")
            }
        }
        if let upgradeField {
            RequestWriter.appendField(&out, name: "Connection", value: "upgrade")
            head.copyField(upgradeField, to: &out)
        }
        RequestWriter.appendEndOfHead(&out)
    }

    private enum RequestFieldRole { case host, authorization, replaced, other }

    /// What the proxy does with request field `index`; most names fail every comparison on their
    /// length alone.
    private static func role(of index: Int, in head: RequestHead) -> RequestFieldRole {
        if head.nameEquals(index, "host") { return .host }
        if head.nameEquals(index, "authorization") { return .authorization }
        if head.nameEquals(index, "x-forwarded-for") || head.nameEquals(index, "x-forwarded-host")
            || head.nameEquals(index, "x-forwarded-proto")
        {
            return .replaced
        }
        return .other
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
