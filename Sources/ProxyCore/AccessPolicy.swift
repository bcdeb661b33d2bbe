import Basics
import Config
import HTTP1

/// The checks of CONTRACT.md points 7, 9 and 10 that need only the request head, in the
/// contract's order. Built once per loop from the configuration (a class: each request borrows it
/// instead of copying its arrays); `check` allocates nothing on success.
final class AccessPolicy {
    let allowAnyHost: Bool
    /// Lowercased host names without port, one after another; IPv6 in brackets ("[::1]"). One flat
    /// array: the per-request search touches no array per name.
    private let allowedHostBytes: [UInt8]
    /// Where each name in `allowedHostBytes` ends (the next begins there).
    private let allowedHostEnds: [Int]
    let allowedOrigins: [String]
    /// Lowercased, as `RequestHead.first` wants it.
    let requiredHeader: String?
    let requiredValue: [UInt8]
    let allowedPaths: [String]?
    let allowedMethods: [String]?
    /// The route's credential, the one its `Forwarder` writes: with `client_authorization: reject`,
    /// a client's own credential where the token goes is refused.
    let credential: RouteCredential
    /// `placeholder`: the route's placeholders (nil: none; CONTRACT.md "Programs in a sandbox").
    let placeholders: PlaceholderGate?
    /// `forward.preserve_host`: the client's Host (or absolute-form authority) goes upstream.
    let preserveHost: Bool
    let maxBodyBytes: Int
    let upstream: UpstreamURL
    /// A route matched by host: the route table has already checked an absolute-form target's authority.
    let routedByHost: Bool
    /// `*.example.com` names of a host route, as the suffix `.example.com`: allowed Host values too.
    private let allowedSuffixes: [[UInt8]]
    /// The last Host value found allowed, byte for byte (port and case as sent): a loop's clients send
    /// the same one nearly always, and the lists above never change. Only this loop touches it.
    private var lastAllowedHost: [UInt8]? = nil

    /// A policy with the route's own credential and placeholders, as a test or the admin listener makes one.
    convenience init(configuration c: Configuration) {
        self.init(configuration: c, credential: RouteCredential(c.routes[0]), placeholders: PlaceholderGate(c.routes[0], reader: nil))
    }

    /// `configuration`: the file reduced to this route; `credential`: the route's, shared with its
    /// `Forwarder`; `placeholders`: the loop's gate of the route.
    init(configuration c: Configuration, credential: RouteCredential, placeholders: PlaceholderGate?) {
        allowAnyHost = c.allowRemote && c.access.allowHosts == nil
        var allowed: [[UInt8]]
        if let hosts = c.access.allowHosts {
            allowed = hosts.map { Array($0.lowercased().utf8) }
        } else {
            var hosts = ["localhost", "127.0.0.1", "[::1]"]
            if case .tcp(let host, _) = c.routes[0].match?.listen ?? c.listen {
                hosts.append(Authority.bracketed(host.lowercased()))
            }
            allowed = hosts.map { Array($0.utf8) }
        }
        // A host route's names count as allowed Host values for that route (CONTRACT "Several APIs").
        let routeHosts = c.routes[0].match?.hosts ?? []
        let names = routeHosts.map { host -> String in
            if host.hasPrefix("["), let close = host.firstIndex(of: "]") { return String(host[...close]) }
            return host.split(separator: ":", maxSplits: 1).first.map(String.init) ?? host
        }
        let allowedHosts = allowed + names.filter { !$0.hasPrefix("*.") }.map { Array($0.utf8) }
        allowedHostBytes = allowedHosts.flatMap { $0 }
        var end = 0
        allowedHostEnds = allowedHosts.map { name in
            end += name.count
            return end
        }
        allowedSuffixes = names.filter { $0.hasPrefix("*.") }.map { Array($0.dropFirst().utf8) }
        routedByHost = !routeHosts.isEmpty
        allowedOrigins = c.access.allowOrigins
        requiredHeader = c.access.requireHeader?.lowercased()
        requiredValue = Array((c.access.requireValue?.value ?? "").utf8)
        allowedPaths = c.access.allowPaths
        allowedMethods = c.access.allowMethods
        self.credential = credential
        self.placeholders = placeholders
        preserveHost = c.forward.preserveHost
        maxBodyBytes = c.limits.maxBodyBytes
        upstream = c.upstream
    }

    /// The `Host` rule of the admin listener (issue 29): the proxy listener's default names, with the
    /// admin address for the listen address. nil when the admin listener is a unix socket.
    static func forAdmin(_ c: Configuration) -> AccessPolicy? {
        guard let admin = c.admin, case .tcp = admin.listen else { return nil }
        var adminOnly = c.selecting(route: 0)
        adminOnly.listen = admin.listen
        adminOnly.routes[0].match = nil
        adminOnly.routes[0].access = AccessConfiguration()
        adminOnly.routes[0].placeholder = nil
        return AccessPolicy(configuration: adminOnly)
    }

    /// What a request that passed the checks goes upstream with.
    struct CheckedTarget {
        /// Normalised (dot-segments removed).
        var path: String
        var query: String?
        /// An absolute-form target's authority (host, and port when given): the X-Forwarded-Host,
        /// since such a request's Host field was not checked.
        var authority: String?
        /// The caller whose placeholder the request carried (nil: the route has no `placeholder`).
        var caller: String? = nil
    }

    /// A request target read once: what the route table and the checks both need.
    struct ParsedTarget {
        /// Without dot-segments (RFC 3986 §5.2.4).
        var path: String
        var query: String?
        /// An absolute-form target's scheme, host (without brackets) and port as written.
        var absolute: AbsoluteTarget?
        /// An absolute-form target's authority (host, and port when given).
        var authority: String?
    }

    struct AbsoluteTarget {
        var scheme: String
        var host: String
        var port: Int?
    }

    /// Whether a CONNECT carries `access.require_header`'s value, as that header or as
    /// `Proxy-Authorization: Bearer <value>` (CONTRACT "HTTPS for clients": checked once, on the CONNECT).
    func admitsConnect(_ head: RequestHead) -> Bool {
        guard let name = requiredHeader else { return true }
        if let value = head.first(name), constantTimeEquals(Array(value.utf8), requiredValue) { return true }
        guard let credentials = head.first("proxy-authorization") else { return false }
        let bytes = Array(credentials.utf8)
        // RFC 9110 §11.1: the scheme is case-insensitive; one or more spaces before the credentials.
        guard bytes.count > 7, bytes[0..<6].map({ $0 | 0x20 }) == Array("bearer".utf8), bytes[6] == 0x20 else { return false }
        let value = bytes[7...].drop { $0 == 0x20 }
        return constantTimeEquals(Array(value), requiredValue)
    }

    /// `method == "CONNECT"`, the length compared first: the usual method costs no String compare.
    @inline(__always)
    static func isConnect(_ method: String) -> Bool {
        method.utf8.count == 7 && method == "CONNECT"
    }

    static let climbingPath = "the path climbs above the root, or hides a dot-segment behind an encoded slash"

    /// CONNECT, the target's form and its path: the errors that come before any route (point 10).
    @inline(__always)
    static func parse(_ head: RequestHead) throws(ProxyError) -> ParsedTarget {
        // CONNECT first (point 10), in any target form.
        if isConnect(head.method) { throw .methodNotAllowed }
        // The usual target: a path that parsing and dot-segment removal would both give back as it is.
        if head.targetIsPlainPath {
            return ParsedTarget(path: head.target, query: nil, absolute: nil, authority: nil)
        }
        guard let target = RequestTarget.parse(head.target) else { throw .badRequest("malformed request target") }
        switch target {
        case .origin(let p, let q):
            guard let path = removeDotSegments(p) else { throw .badRequest(AccessPolicy.climbingPath) }
            return ParsedTarget(path: path, query: q, absolute: nil, authority: nil)
        case .absolute(let scheme, let host, let port, let p, let q):
            guard let path = removeDotSegments(p.isEmpty ? "/" : p) else { throw .badRequest(AccessPolicy.climbingPath) }
            let bracketed = host.utf8.contains(UInt8(ascii: ":")) ? "[\(host)]" : host
            return ParsedTarget(
                path: path, query: q, absolute: AbsoluteTarget(scheme: scheme, host: host, port: port),
                authority: port.map { "\(bracketed):\($0)" } ?? bracketed)
        case .authority, .asterisk:
            throw .badRequest("this request-target form is only for CONNECT or OPTIONS *")
        }
    }

    /// Returns the first error that applies, or the normalized path and query to forward.
    func check(_ head: RequestHead) -> Result<CheckedTarget, ProxyError> {
        // The usual request: a plain path (what `parse` would return for it), checked without a
        // ParsedTarget made and destroyed.
        if head.targetIsPlainPath && !AccessPolicy.isConnect(head.method) {
            return check(head, path: head.target, query: nil, absolute: nil, authority: nil, strip: 0)
        }
        do {
            return check(head, try AccessPolicy.parse(head))
        } catch {
            return .failure(error)
        }
    }

    /// The checks after the route is known, for a target already parsed. `strip`: how many leading
    /// bytes of the path the route removes (its `path_prefix`).
    @inline(__always)
    /// `inTunnel`: a request in a forward-proxy tunnel, whose CONNECT showed `require_header`'s value
    /// (CONTRACT "HTTPS for clients": checked once, there).
    func check(_ head: RequestHead, _ target: consuming ParsedTarget, strip: Int = 0, inTunnel: Bool = false) -> Result<CheckedTarget, ProxyError> {
        check(head, path: target.path, query: target.query, absolute: target.absolute, authority: target.authority, strip: strip, inTunnel: inTunnel)
    }

    /// The same for a target's parts.
    @inline(__always)
    private func check(
        _ head: RequestHead, path: String, query: String?, absolute: AbsoluteTarget?, authority: String?, strip: Int, inTunnel: Bool = false
    ) -> Result<CheckedTarget, ProxyError> {
        var path = path
        let isAbsolute = absolute != nil
        var targetMatchesUpstream = true
        if let absolute {
            let effectivePort = absolute.port ?? Authority.defaultPort(scheme: absolute.scheme)
            targetMatchesUpstream =
                routedByHost || (absolute.scheme == upstream.scheme && absolute.host == upstream.host && effectivePort == upstream.port)
        }
        if strip > 0 {
            // The rest keeps a leading slash: the prefix's own last one when it ends with "/".
            let utf8 = path.utf8
            let prefixEndsWithSlash = utf8[utf8.index(utf8.startIndex, offsetBy: strip - 1)] == UInt8(ascii: "/")
            let rest = Substring(utf8.dropFirst(prefixEndsWithSlash ? strip - 1 : strip))
            // Normalised again before it is appended to the base path: nothing may climb out of it
            // (CONTRACT point 1; the route table matches whole segments, so this is a second guard).
            guard let normal = removeDotSegments(rest.first == "/" ? String(rest) : "/" + rest) else {
                return .failure(.badRequest(AccessPolicy.climbingPath))
            }
            path = normal
        }
        // Point 9: DNS rebinding. Only origin-form requests carry a Host that a browser chose; with
        // `forward.preserve_host` an absolute-form target's authority is the Host that goes upstream
        // (RFC 9112 §3.2.2), so it passes the same check.
        if !allowAnyHost {
            if !isAbsolute, let host = head.host, !hostAllowed(host) { return .failure(.forbiddenHost) }
            if isAbsolute && preserveHost, let authority, !hostAllowed(authority) { return .failure(.forbiddenHost) }
        }
        if let origin = head.first(named: "origin"), !allowedOrigins.contains(origin) {
            return .failure(.forbiddenOrigin)
        }
        if let name = requiredHeader, !inTunnel {
            guard let value = head.first(name), constantTimeEquals(Array(value.utf8), requiredValue) else {
                return .failure(.forbiddenClient)
            }
        }
        if let methods = allowedMethods, !methods.contains(head.method) { return .failure(.forbiddenPath) }
        if let prefixes = allowedPaths {
            // An encoded slash or a backslash could be decoded upstream into a path outside the prefix.
            let lowered = path.lowercased()
            if lowered.contains("%2f") || lowered.contains("%5c") || lowered.contains("\\") { return .failure(.forbiddenPath) }
            if !prefixes.contains(where: { path.hasPrefix($0) }) { return .failure(.forbiddenPath) }
        }
        if !targetMatchesUpstream { return .failure(.forbiddenTarget) }
        var caller: String? = nil
        if let placeholders {
            switch placeholders.admit(head, query: query) {
            case .success(let name): caller = name
            case .failure(let refusal): return .failure(refusal)
            }
        } else if credential.rejectsClientAuthorization(head, query: query) {
            return .failure(.clientAuthorizationRejected)
        }
        if maxBodyBytes > 0, case .contentLength(let n) = head.framing, n > maxBodyBytes { return .failure(.bodyTooLarge) }
        return .success(CheckedTarget(path: path, query: query, authority: authority, caller: caller))
    }

    /// Host header value without its port, compared case-insensitively (RFC 9110 §7.2).
    func hostAllowed(_ value: String) -> Bool {
        // Closures, not `hostAllowed` by name: a partially applied method would retain `self`.
        if let allowed = value.utf8.withContiguousStorageIfAvailable({ hostAllowed($0) }) { return allowed }
        var value = value
        return value.withUTF8 { hostAllowed($0) }
    }

    /// The same for the value's bytes, the last allowed value remembered.
    private func hostAllowed(_ v: UnsafeBufferPointer<UInt8>) -> Bool {
        if let last = lastAllowedHost, last.count == v.count, let value = v.baseAddress,
            last.withUnsafeBytes({ $0.baseAddress.map { memoryEqual($0, value, count: v.count) } ?? false })
        {
            return true
        }
        guard searchHostLists(v) else { return false }
        lastAllowedHost = Array(v)
        return true
    }

    /// Whether the host in `v` (without its port) is in the allow-list or ends with an allowed suffix.
    private func searchHostLists(_ v: UnsafeBufferPointer<UInt8>) -> Bool {
        var end = v.count
        if v.first == UInt8(ascii: "[") {
            if let close = v.firstIndex(of: UInt8(ascii: "]")) { end = close + 1 }
        } else if let colon = v.lastIndex(of: UInt8(ascii: ":")) {
            end = colon
        }
        // One trailing dot is the same name (RFC 1034 §3.1): `localhost.`, a route's `api.example.com.`.
        if end > 1, v[end - 1] == UInt8(ascii: ".") { end -= 1 }
        let host = UnsafeBufferPointer(rebasing: v[0..<end])
        var start = 0
        for nameEnd in allowedHostEnds {
            defer { start = nameEnd }
            guard nameEnd - start == host.count else { continue }
            // Allowed names are lowercase: fold the Host's ASCII capitals to compare.
            var k = 0
            while k < host.count && allowedHostBytes[start + k] == asciiLower(host[k]) { k += 1 }
            if k == host.count { return true }
        }
        for suffix in allowedSuffixes where suffix.count < host.count {
            if RouteTable.endsWithFolded(host, suffix) { return true }
        }
        return false
    }
}
