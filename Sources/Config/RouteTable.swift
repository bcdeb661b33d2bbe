import Basics

/// Which route a request on the shared listener belongs to (CONTRACT.md "Several APIs in one
/// process", docs/ROUTES.md): exact host names, then `*.` names (the longest first), then the
/// longest `path_prefix`, then the route without `match`. Built once per configuration; `match`
/// compares bytes and allocates nothing.
public struct RouteTable: Sendable {
    public enum Outcome: Equatable, Sendable {
        /// The route's index in `Configuration.routes`, and how many leading bytes of the path to
        /// drop before it goes upstream (0 when the route keeps its prefix).
        case route(Int, strip: Int)
        /// 404 `no_route`.
        case noRoute
        /// 403 `forbidden_target`: an absolute-form request whose authority no host route names.
        case forbiddenTarget
    }

    struct HostEntry: Sendable {
        /// An exact name, or for `*.example.com` the suffix `.example.com`; lowercase.
        var name: [UInt8]
        var port: Int?
        var prefix: [UInt8]
        var route: Int
    }

    let exact: [HostEntry]
    let wildcard: [HostEntry]
    /// Path-only routes, the longest prefix first.
    let paths: [(prefix: [UInt8], route: Int)]
    let fallback: Int?
    let strips: [Bool]
    /// Routes with a listener of their own, in route order.
    public let ownListeners: [(address: ListenAddress, route: Int)]
    /// One route without `match`: every request on the shared listener is route 0, no lookup.
    public let isSingle: Bool
    /// Whether any route matches by host (absolute-form requests need one).
    public var hasHostRoutes: Bool { !exact.isEmpty || !wildcard.isEmpty }

    public init(_ routes: [RouteConfiguration]) {
        var exact: [HostEntry] = []
        var wildcard: [HostEntry] = []
        var paths: [(prefix: [UInt8], route: Int)] = []
        var fallback: Int?
        var own: [(address: ListenAddress, route: Int)] = []
        for (i, route) in routes.enumerated() {
            guard let match = route.match else {
                if fallback == nil { fallback = i }
                continue
            }
            if let listen = match.listen {
                own.append((listen, i))
                continue
            }
            let prefix = Array((match.pathPrefix ?? "").utf8)
            for host in match.hosts {
                let (name, port) = RouteTable.splitPort(Array(host.lowercased().utf8)[...])
                if name.starts(with: "*.".utf8) {
                    wildcard.append(HostEntry(name: Array(name.dropFirst()), port: port, prefix: prefix, route: i))
                } else {
                    exact.append(HostEntry(name: Array(name), port: port, prefix: prefix, route: i))
                }
            }
            if match.hosts.isEmpty, !prefix.isEmpty { paths.append((prefix, i)) }
        }
        // Longest first, so that the first hit is the most specific (stable for equal lengths).
        self.exact = exact.enumerated().sorted { ($0.element.prefix.count, -$0.offset) > ($1.element.prefix.count, -$1.offset) }.map(\.element)
        self.wildcard = wildcard.enumerated().sorted {
            ($0.element.name.count, $0.element.prefix.count, -$0.offset) > ($1.element.name.count, $1.element.prefix.count, -$1.offset)
        }.map(\.element)
        self.paths = paths.enumerated().sorted { ($0.element.prefix.count, -$0.offset) > ($1.element.prefix.count, -$1.offset) }.map(\.element)
        self.fallback = fallback
        strips = routes.map { $0.match?.stripPrefix ?? false }
        ownListeners = own
        isSingle = routes.count == 1 && routes[0].match == nil
    }

    /// `host`: the Host field's value or an absolute-form target's authority (nil when absent);
    /// `defaultPort`: the port a host without one means (80, or 443 for an https:// target);
    /// `path`: without dot-segments.
    public func match(
        host: UnsafeBufferPointer<UInt8>?, defaultPort: Int, path: UnsafeBufferPointer<UInt8>, absoluteForm: Bool
    ) -> Outcome {
        if let host, hasHostRoutes {
            let (fullName, explicitPort) = RouteTable.splitPort(host)
            // `api.example.com.` is `api.example.com` (RFC 1034 §3.1), in a tunnel's `Host` as in
            // its CONNECT line and SNI (CONTRACT.md "HTTPS for clients").
            let name = withoutTrailingDot(fullName)
            let port = explicitPort ?? defaultPort
            // Entries are read in place (no copy, so no retain of their arrays per entry).
            let hit = exact.withUnsafeBufferPointer { entries -> Outcome? in
                for i in entries.indices where entries[i].name.count == name.count {
                    if RouteTable.equalsFolded(entries[i].name, name), entries[i].port.map({ $0 == port }) ?? true,
                        RouteTable.hasPrefix(path, entries[i].prefix)
                    {
                        return .route(entries[i].route, strip: strips[entries[i].route] ? entries[i].prefix.count : 0)
                    }
                }
                return nil
            }
            if let hit { return hit }
            let wildHit = wildcard.withUnsafeBufferPointer { entries -> Outcome? in
                for i in entries.indices where entries[i].name.count < name.count {
                    let tail = name[(name.endIndex - entries[i].name.count)...]
                    if RouteTable.equalsFolded(entries[i].name, tail), entries[i].port.map({ $0 == port }) ?? true,
                        RouteTable.hasPrefix(path, entries[i].prefix)
                    {
                        return .route(entries[i].route, strip: strips[entries[i].route] ? entries[i].prefix.count : 0)
                    }
                }
                return nil
            }
            if let wildHit { return wildHit }
        }
        // The proxy never forwards an absolute-form request to a host it was not given.
        if absoluteForm { return .forbiddenTarget }
        let pathHit = paths.withUnsafeBufferPointer { entries -> Outcome? in
            for i in entries.indices where RouteTable.hasPrefix(path, entries[i].prefix) {
                return .route(entries[i].route, strip: strips[entries[i].route] ? entries[i].prefix.count : 0)
            }
            return nil
        }
        if let pathHit { return pathHit }
        if let fallback { return .route(fallback, strip: 0) }
        return .noRoute
    }

    /// Convenience for tests and the command line.
    public func match(host: String?, defaultPort: Int = 80, path: String, absoluteForm: Bool = false) -> Outcome {
        let hostBytes = host.map { Array($0.utf8) }
        let pathBytes = Array(path.utf8)
        return pathBytes.withUnsafeBufferPointer { p in
            guard let hostBytes else { return match(host: nil, defaultPort: defaultPort, path: p, absoluteForm: absoluteForm) }
            return hostBytes.withUnsafeBufferPointer { match(host: $0, defaultPort: defaultPort, path: p, absoluteForm: absoluteForm) }
        }
    }

    /// "name:port" → (name, port); "[::1]:80" → ("::1", 80), by the one authority parser
    /// (Basics/AuthorityParsing.swift; port 0 taken, an empty port not). What it refuses (a port that
    /// is not a number, an unclosed bracket) is kept whole as the name, which names no route.
    static func splitPort<C: BidirectionalCollection>(_ host: C) -> (C.SubSequence, Int?) where C.Element == UInt8 {
        switch Authority.parse(host, port: .init(required: false, lowest: 0)) {
        case .success(let span): return (host[span.host], span.port)
        case .failure: return (host[...], nil)
        }
    }

    /// `lower` is lowercase; `other`'s ASCII capitals are folded (host names are case-insensitive, RFC 9110 §4.2.3).
    static func equalsFolded<C: Collection>(_ lower: [UInt8], _ other: C) -> Bool where C.Element == UInt8 {
        var k = 0
        for b in other {
            let folded = asciiLower(b)
            guard folded == lower[k] else { return false }
            k += 1
        }
        return true
    }

    /// Whether `name` ends with the lowercase `suffix`, ASCII capitals folded.
    public static func endsWithFolded(_ name: UnsafeBufferPointer<UInt8>, _ suffix: [UInt8]) -> Bool {
        guard suffix.count <= name.count else { return false }
        return equalsFolded(suffix, name[(name.count - suffix.count)...])
    }

    /// Whether `path` starts with `prefix` in whole segments: `/orders` matches `/orders` and
    /// `/orders/7`, never `/orders..` or `/ordersx` (a stripped rest must not climb out of the
    /// upstream's base path, docs/ROUTES.md); `/orders/` matches what starts with it.
    static func hasPrefix(_ path: UnsafeBufferPointer<UInt8>, _ prefix: [UInt8]) -> Bool {
        guard prefix.count <= path.count else { return false }
        var k = 0
        while k < prefix.count {
            guard path[k] == prefix[k] else { return false }
            k += 1
        }
        return k == 0 || prefix[k - 1] == UInt8(ascii: "/") || k == path.count || path[k] == UInt8(ascii: "/")
    }
}
