import Basics
import Config
import Credentials
import HTTP1
import Telemetry
import Upstream

/// The two head rewritings of a proxied exchange, side by side (bytes in, bytes out; ProxyCoreTests
/// pin them down): the client's request head into the upstream's, and the upstream's answer head
/// into the client's (CONTRACT.md points 1 and 7). Nothing here depends on earlier requests; the one
/// thing kept between them is the last status line written, a cache. A class: each request of a
/// route borrows the one of its loop.
final class Forwarder {
    let upstream: UpstreamURL
    let urlPrefix: String
    /// The Host field for the upstream: its host, with the port when it is not the scheme's default.
    let upstreamHost: String
    let preserveHost: Bool
    /// The route's credential (CONTRACT.md "Where the credential goes"), chosen once for the route;
    /// each request's `RequestCredential` is resolved from it.
    let credential: RouteCredential
    let requiredHeaderLowercased: String?
    /// Location values starting with this (lowercased scheme and host) point into the upstream.
    let locationPrefixes: [String]
    /// The route's `path_prefix` without its trailing `/` when the route strips it, else empty: what
    /// a Location into the upstream gets back in front of its path.
    let strippedPrefix: String
    /// `scrub: true`: the client's Accept-Encoding makes way for `identity` (an answer must be
    /// readable to be scrubbed, CONTRACT.md "Scrubbing"), and its Range and If-Range go nowhere: a
    /// part of a value (a range that cuts a token) could not be recognised in the answer.
    let asksWholeIdentity: Bool
    /// A traced request's CLIENT spans' `server.address` (nil: the upstream takes the request's
    /// host, whose authority the span gives) and `server.port`, read without a copy of `upstream`.
    let spanAddress: String?
    let spanPort: Int
    /// `Host: <upstreamHost>\r\n`, made once: every request sends it.
    private let hostFieldLine = ByteBuffer()

    /// A forwarder with the route's own credential, as a test makes one.
    convenience init(configuration c: Configuration) {
        self.init(configuration: c, credential: RouteCredential(c.routes[0]))
    }

    /// `configuration`: the file reduced to this route; `credential`: the route's, shared with its
    /// `AccessPolicy`.
    init(configuration c: Configuration, credential: RouteCredential) {
        upstream = c.upstream
        urlPrefix = c.upstream.origin + c.upstream.basePath
        upstreamHost = Authority(host: c.upstream.host, port: c.upstream.port).omittingDefaultPort(of: c.upstream.scheme)
        preserveHost = c.forward.preserveHost
        spanAddress = c.upstream.takesRequestHost ? nil : c.upstream.host
        spanPort = c.upstream.port
        RequestWriter.appendField(hostFieldLine, name: "Host", value: upstreamHost)
        self.credential = credential
        asksWholeIdentity = c.routes[0].scrub
        requiredHeaderLowercased = c.access.requireHeader?.lowercased()
        var prefixes = [urlPrefix]
        // The same origin written with or without its default port.
        let host = Authority.bracketed(c.upstream.host)
        let defaultPort = Authority.defaultPort(scheme: c.upstream.scheme)
        if c.upstream.port == defaultPort {
            prefixes.append("\(c.upstream.scheme)://\(host):\(defaultPort)\(c.upstream.basePath)")
            prefixes.append("\(c.upstream.scheme)://\(host)\(c.upstream.basePath)")
        }
        locationPrefixes = Array(Set(prefixes))
        if let match = c.routes[0].match, match.stripPrefix, match.listen == nil, var prefix = match.pathPrefix {
            while prefix.hasSuffix("/") { prefix.removeLast() }
            strippedPrefix = prefix
        } else {
            strippedPrefix = ""
        }
    }

    /// One request's facts for `writeRequestHead`, besides its head and credential. `forwardedFor`:
    /// the client's lines from ``forwardedForLines(peerHost:https:)``; `forwardedHost`: the
    /// X-Forwarded-Host line (``RepeatedFieldLine``). `absoluteAuthority`: an absolute-form target's
    /// authority, which replaces the Host field when the client's Host is preserved (RFC 9112
    /// §3.2.2; `AccessPolicy` has checked it against `access.allow_hosts`). `upgrade`: the client
    /// asks for one. `wholeBodyLength`: a chunked body that goes whole, with Content-Length
    /// (CONTRACT point 8); nil: it goes chunked. `dropsExpect`: the proxy answered the client's
    /// `Expect: 100-continue` itself (`ExchangeMachine.answersContinue`), so the field stays here.
    struct RequestParts {
        var path: String
        var query: String?
        var forwardedFor: ByteBuffer
        var forwardedHost: ByteBuffer? = nil
        var absoluteAuthority: String? = nil
        var upgrade: Bool = false
        var wholeBodyLength: Int? = nil
        var dropsExpect: Bool = false
        /// With telemetry, the attempt's `traceparent` (CONTRACT.md "Telemetry"): it replaces the
        /// client's; nil: the client's goes as it came.
        var traceparent: TraceParent? = nil
    }

    /// Writes the upstream request head into `out` (CONTRACT point 1): the request line with the
    /// upstream's base path, Host, the client's fields in order and byte for byte (hop-by-hop fields,
    /// the proxy's own and the access header left out), the credential's fields, X-Forwarded-*, and
    /// for an upgrade `Connection: upgrade` with the client's Upgrade field. `credential` says which
    /// client fields make way for it, how the target changes and what it appends (the usual
    /// `Authorization: Bearer …` is `TokenSnapshot.authorizationField`, copied). Inlined into its one
    /// caller (`UpstreamSide.send`): the request's parts and credential are then taken apart where
    /// they are made, with no copy of either.
    @inline(__always)
    func writeRequestHead(into out: ByteBuffer, for head: RequestHead, _ request: RequestParts, credential: RequestCredential) {
        // The usual target goes as it came, with no target value made.
        let rewritten = credential.rewritesTarget ? credential.upstreamTarget(basePath: upstream.basePath, path: request.path, query: request.query) : nil
        if let rewritten {
            RequestWriter.appendRequestLine(out, method: head.method, pathPrefix: rewritten.pathPrefix, path: rewritten.path, query: rewritten.query)
        } else {
            RequestWriter.appendRequestLine(out, method: head.method, pathPrefix: upstream.basePath, path: request.path, query: request.query)
        }
        if !preserveHost {
            out.append(hostFieldLine)
        } else if let absoluteAuthority = request.absoluteAuthority {
            RequestWriter.appendField(out, name: "Host", value: absoluteAuthority)
        }
        let sendsClientHost = preserveHost && request.absoluteAuthority == nil
        let dropsAuthorization = credential.dropsClientAuthorization
        let dropsExpect = request.dropsExpect
        let fields = head.fields
        var upgradeField: Int?
        // The Bearer path's one test per field: most requests drop no field by its name.
        let looksAtNames =
            requiredHeaderLowercased != nil || credential.dropsFieldsByName || dropsExpect || asksWholeIdentity
            || request.traceparent != nil
        for i in 0..<fields.count {
            if head.isHopByHop(i) {
                if request.upgrade && fields.nameEquals(i, "upgrade") { upgradeField = i }
                if credential.keepsHopByHop(i, of: fields) { fields.copyField(i, to: out) }
                continue
            }
            switch Forwarder.role(of: i, in: fields) {
            case .host:
                if sendsClientHost { fields.copyField(i, to: out) }
                continue
            case .authorization:
                if !dropsAuthorization { fields.copyField(i, to: out) }
                continue
            case .replaced:
                continue  // X-Forwarded-* are set below
            case .other:
                break
            }
            if looksAtNames {
                if let required = requiredHeaderLowercased, fields.nameEquals(i, lowercasedName: required) { continue }
                if credential.drops(i, of: fields) { continue }
                if dropsExpect, fields.nameEquals(i, "expect") { continue }
                if asksWholeIdentity, Forwarder.scrubbingDrops(i, of: fields) { continue }
                if request.traceparent != nil, fields.nameEquals(i, "traceparent") { continue }
            }
            fields.copyField(i, to: out)
        }
        // The Host that went: the upstream's, an absolute-form authority, or the client's own.
        credential.appendFields(
            to: out, method: head.method,
            target: { rewritten ?? UpstreamTarget(pathPrefix: upstream.basePath, path: request.path, query: request.query) },
            origin: upstream.origin, sentHost: { !preserveHost ? upstreamHost : request.absoluteAuthority ?? head.host })
        if asksWholeIdentity { RequestWriter.appendFieldLine(out, "Accept-Encoding: identity\r\n") }
        if let traceparent = request.traceparent {
            out.append("traceparent: ")
            traceparent.withValue { out.append($0) }
            out.appendCRLF()
        }
        out.append(request.forwardedFor)
        if let forwardedHost = request.forwardedHost { out.append(forwardedHost) }
        // Transfer-Encoding is hop-by-hop: a chunked body is chunked again on the way up.
        if head.framing == .chunked {
            if let wholeBodyLength = request.wholeBodyLength {
                RequestWriter.appendField(out, name: "Content-Length", value: String(wholeBodyLength))
            } else {
                RequestWriter.appendField(out, name: "Transfer-Encoding", value: "chunked")
            }
        }
        if let upgradeField {
            RequestWriter.appendField(out, name: "Connection", value: "upgrade")
            fields.copyField(upgradeField, to: out)
        }
        RequestWriter.appendEndOfHead(out)
    }

    /// `X-Forwarded-For` with the client's address (none for a unix socket's client) and
    /// `X-Forwarded-Proto: http`, as field lines: made once per client connection.
    static func forwardedForLines(peerHost: String, https: Bool) -> ByteBuffer {
        let lines = ByteBuffer()
        if !peerHost.isEmpty { RequestWriter.appendField(lines, name: "X-Forwarded-For", value: peerHost) }
        RequestWriter.appendFieldLine(lines, https ? "X-Forwarded-Proto: https\r\n" : "X-Forwarded-Proto: http\r\n")
        return lines
    }

    /// The answer to a CONNECT the forward proxy serves (RFC 9110 §9.3.6: a 2xx has no body, and
    /// neither Content-Length nor Transfer-Encoding).
    static let connectionEstablished = Array("HTTP/1.1 200 Connection established\r\n\r\n".utf8)

    /// The proxy's own interim answer to a client whose chunked body it buffers (CONTRACT
    /// `forward.request_buffering`, RFC 9110 §15.2.1).
    static let continueHead = Array("HTTP/1.1 100 Continue\r\n\r\n".utf8)

    /// The client fields a scrubbing route leaves out (`asksWholeIdentity`).
    private static func scrubbingDrops(_ index: Int, of fields: FieldBlock) -> Bool {
        fields.nameEquals(index, "accept-encoding") || fields.nameEquals(index, "range") || fields.nameEquals(index, "if-range")
    }

    private enum RequestFieldRole { case host, authorization, replaced, other }

    /// What the proxy does with request field `index`; most names fail every comparison on their
    /// length alone.
    private static func role(of index: Int, in fields: FieldBlock) -> RequestFieldRole {
        if fields.nameEquals(index, "host") { return .host }
        if fields.nameEquals(index, "authorization") { return .authorization }
        if fields.nameEquals(index, "x-forwarded-for") || fields.nameEquals(index, "x-forwarded-host")
            || fields.nameEquals(index, "x-forwarded-proto")
        {
            return .replaced
        }
        return .other
    }

    // MARK: the answer's head

    /// Writes the upstream's final head for the client: the status line in HTTP/1.1, the upstream's
    /// fields in order and byte for byte except the hop-by-hop ones (RFC 9110 §7.6.1) and a
    /// Content-Length that chunked or close-delimited framing replaces, a Location into the upstream
    /// rewritten to point at the proxy (CONTRACT point 7), then the framing and persistence fields.
    /// `closing`: the client connection closes after this answer; `clientHost`: the Host the client
    /// addressed. `sentToken`: the token the request carried; with `inject.query`, no field takes it
    /// back to the client (CONTRACT.md "Where the credential goes"): a rewritten Location loses the
    /// parameter, and any field that still carries the token has it scrubbed.
    func writeResponseHead(
        into out: ByteBuffer, _ response: ResponseHead, framing: ExchangeRules.ClientFraming, closing: Bool,
        clientVersion: HTTPVersion, clientHost: String?, sentToken: TokenSnapshot? = nil
    ) {
        let dropsContentLength: Bool
        switch framing {
        case .chunked, .close: dropsContentLength = true
        case .none, .length: dropsContentLength = false
        }
        appendStatusLine(out, response)
        let fields = response.fields
        var tokenSpellings: [String]?
        if case .query(let parameter) = credential.placement, let sentToken { tokenSpellings = parameter.spellings(of: sentToken) }
        // Fields that go as they came are copied in runs (one copy for a run of a normalised block).
        var runStart = 0
        for i in 0..<fields.count {
            let rewritten: String?
            if response.isHopByHop(i) || (dropsContentLength && fields.nameEquals(i, "content-length")) {
                rewritten = nil
            } else if tokenSpellings != nil || fields.nameEquals(i, "location"),
                let value = rewrittenField(i, of: fields, clientHost: clientHost, hiding: tokenSpellings)
            {
                rewritten = value
            } else {
                continue
            }
            fields.copyFields(runStart..<i, to: out)
            runStart = i + 1
            if let rewritten { ResponseWriter.appendField(out, name: fields.name(i), value: rewritten) }
        }
        fields.copyFields(runStart..<fields.count, to: out)
        if case .chunked = framing { ResponseWriter.appendField(out, name: "Transfer-Encoding", value: "chunked") }
        if closing {
            ResponseWriter.appendField(out, name: "Connection", value: "close")
        } else if clientVersion == .http1_0 {
            ResponseWriter.appendField(out, name: "Connection", value: "keep-alive")
        }
        ResponseWriter.appendEndOfHead(out)
    }

    /// Response field `i` as it goes to the client when it is not as it came: a Location rewritten
    /// (`rewrittenLocation`), and with `inject.query` any value that carries the token scrubbed.
    /// Out of line: the answer head's loop stays small enough to be inlined on the plain path.
    @inline(never)
    private func rewrittenField(_ i: Int, of fields: FieldBlock, clientHost: String?, hiding tokenSpellings: [String]?) -> String? {
        var value = fields.nameEquals(i, "location") ? rewrittenLocation(fields.value(i), clientHost: clientHost) : nil
        if let tokenSpellings, let scrubbed = InjectedQueryParameter.scrubbed(value ?? fields.value(i), hiding: tokenSpellings) {
            value = scrubbed
        }
        return value
    }

    /// An interim 1xx head for an HTTP/1.1 client (RFC 9110 §15.2): its end-to-end fields as they came.
    static func writeInformationalHead(into out: ByteBuffer, _ head: ResponseHead) {
        ResponseWriter.appendStatusLine(out, version: .http1_1, code: head.status, reason: reason(of: head))
        for i in 0..<head.fields.count where !head.isHopByHop(i) {
            head.fields.copyField(i, to: out)
        }
        ResponseWriter.appendEndOfHead(out)
    }

    /// `101 Switching Protocols` (RFC 9110 §15.2.2): the end-to-end fields, then `Connection: upgrade`
    /// and the upstream's Upgrade (both hop-by-hop, so set here again).
    static func writeSwitchingProtocolsHead(into out: ByteBuffer, _ response: ResponseHead) {
        ResponseWriter.appendStatusLine(out, version: .http1_1, code: 101, reason: reason(of: response))
        let fields = response.fields
        var upgrade: String?
        for i in 0..<fields.count {
            if fields.nameEquals(i, "upgrade") { upgrade = fields.value(i) }
            if response.isHopByHop(i) { continue }
            fields.copyField(i, to: out)
        }
        ResponseWriter.appendField(out, name: "Connection", value: "upgrade")
        if let upgrade { ResponseWriter.appendField(out, name: "Upgrade", value: upgrade) }
        ResponseWriter.appendEndOfHead(out)
    }

    /// A held 401 released as it came, now framed by the length of its body, all of which is at hand.
    static func heldAnswer(_ head: ResponseHead, bodyLength: Int) -> ResponseHead {
        var response = ResponseHead()
        response.status = head.status
        response.reason = head.reason
        response.connectionOptions = head.connectionOptions
        for i in 0..<head.fields.count where !head.fields.nameEquals(i, "content-length") && !head.fields.nameEquals(i, "transfer-encoding") {
            response.fields.append(fieldAt: i, of: head.fields)
        }
        response.fields.append(name: "Content-Length", value: String(bodyLength))
        return response
    }

    /// The last status line written, kept while the answers repeat it (nearly always `200 OK`).
    private var lastStatus = 0
    private var lastReason = ""
    private let lastStatusLine = ByteBuffer()

    private func appendStatusLine(_ out: ByteBuffer, _ response: ResponseHead) {
        if response.status != lastStatus || response.reason != lastReason {
            lastStatus = response.status
            lastReason = response.reason
            lastStatusLine.removeAll()
            ResponseWriter.appendStatusLine(lastStatusLine, version: .http1_1, code: response.status, reason: Forwarder.reason(of: response))
        }
        out.append(lastStatusLine)
    }

    private static func reason(of head: ResponseHead) -> String {
        head.reason.isEmpty ? ResponseWriter.reasonPhrase(for: head.status) : head.reason
    }

    /// A Location into the upstream's base URL, rewritten to point at the proxy for the same route
    /// (nginx's `proxy_redirect default`, which keeps the location's prefix): `https://api/v1/next`
    /// on a route that strips `/orders/` becomes `http://<client's Host>/orders/next`. A path-absolute
    /// Location (`/v1/next`, RFC 9110 §10.2.2) resolves against the upstream, so it is rewritten
    /// the same way and stays relative. With `inject.query`, the rewritten Location loses that
    /// parameter: the upstream put the token there, and the client must not get it (CONTRACT.md
    /// "Where the credential goes"). nil when it points elsewhere or nothing changes.
    func rewrittenLocation(_ value: String, clientHost: String?) -> String? {
        if value.hasPrefix("/") && !value.hasPrefix("//") {
            guard value.hasPrefix(upstream.basePath), let rest = Forwarder.restAtBoundary(value.dropFirst(upstream.basePath.count)) else {
                return nil
            }
            let path = withoutInjectedParameter(clientPath(rest))
            return path == value ? nil : path
        }
        let lowered = value.lowercased()
        for prefix in locationPrefixes where lowered.hasPrefix(prefix.lowercased()) {
            guard let rest = Forwarder.restAtBoundary(value.dropFirst(prefix.count)) else { continue }
            let path = withoutInjectedParameter(clientPath(rest))
            guard let clientHost else { return path }
            return "http://\(clientHost)\(path)"
        }
        return nil
    }

    /// `location` without the `inject.query` parameter in its query (a `?` left with nothing after
    /// it goes too); as it is on any other route.
    private func withoutInjectedParameter(_ location: String) -> String {
        guard case .query(let parameter) = credential.placement, let question = location.firstIndex(of: "?") else { return location }
        let queryStart = location.index(after: question)
        let queryEnd = location[queryStart...].firstIndex(of: "#") ?? location.endIndex
        let query = location[queryStart..<queryEnd]
        let kept = InjectedQueryParameter.removing(parameter.name, from: query)
        guard kept != query else { return location }
        return String(location[..<question]) + (kept.isEmpty ? "" : "?" + kept) + location[queryEnd...]
    }

    /// What follows a base path when the base ends a segment there (`/v1` is not the base of `/v1x`).
    private static func restAtBoundary(_ rest: Substring) -> Substring? {
        rest.isEmpty || rest.first == "/" || rest.first == "?" ? rest : nil
    }

    /// The client's path for what follows the upstream's base path: the route's stripped prefix
    /// put back in front (CONTRACT point 7, docs/ROUTES.md).
    private func clientPath(_ rest: Substring) -> String {
        let path = rest.isEmpty || rest.first == "?" ? "/" + rest : String(rest)
        return strippedPrefix + path
    }
}

/// A field line kept for as long as its value repeats (a client connection names the same Host
/// request after request): made once, then one copy per request.
final class RepeatedFieldLine {
    private let name: StaticString
    private var value: String?
    private let line = ByteBuffer()

    init(name: StaticString) { self.name = name }

    func line(for value: String) -> ByteBuffer {
        if value != self.value {
            self.value = value
            line.removeAll()
            RequestWriter.appendField(line, name: name, value: value)
        }
        return line
    }
}
