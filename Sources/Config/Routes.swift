/// One protected API: how requests reach it and what it forwards them with (CONTRACT.md "Several
/// APIs in one process: routes").
public struct RouteConfiguration: Sendable, Equatable {
    /// The route of a file without `routes:`.
    public static let defaultName = "default"

    /// `[a-z0-9_-]{1,32}`: it labels metrics, logs, errors and `--route`.
    public var name: String
    /// nil: the fallback route, which takes what no other route matched.
    public var match: RouteMatch? = nil
    public var upstream: UpstreamURL
    public var credentials: CredentialsConfiguration
    public var upstreamTLS: UpstreamTLSConfiguration = .init()
    public var sink: SinkConfiguration? = nil
    public var store: StoreConfiguration
    public var access: AccessConfiguration = .init()
    public var forward: ForwardConfiguration = .init()

    public init(name: String, upstream: UpstreamURL, credentials: CredentialsConfiguration, store: StoreConfiguration) {
        self.name = name
        self.upstream = upstream
        self.credentials = credentials
        self.store = store
    }

    /// Whether `name` is a valid route name.
    public static func isValidName(_ name: String) -> Bool {
        (1...32).contains(name.utf8.count)
            && name.utf8.allSatisfy { ($0 >= 0x61 && $0 <= 0x7A) || ($0 >= 0x30 && $0 <= 0x39) || $0 == 0x5F || $0 == 0x2D }
    }
}

/// `match:` of a route. A route with `listen` takes every request of that listener and nothing
/// else; on the shared listener a route with both `hosts` and `pathPrefix` must match both.
public struct RouteMatch: Sendable, Equatable {
    public var listen: ListenAddress? = nil
    /// Lowercased; `*.example.com` matches any name under example.com; `name:port` only that port.
    public var hosts: [String] = []
    /// Compared with the path after dot-segment removal (RFC 3986 §5.2.4).
    public var pathPrefix: String? = nil
    /// Whether the prefix is removed before the path goes upstream (default true).
    public var stripPrefix: Bool = true
    public init() {}
}

extension Configuration {
    /// The file's errors that only the routes together show (each route alone may be valid):
    /// names, duplicate matches, more than one fallback, stores shared with different credentials.
    public static func routeProblems(_ routes: [RouteConfiguration], sharedListen: ListenAddress) -> [ConfigurationError] {
        var problems: [ConfigurationError] = []
        func add(_ index: Int, _ key: String, _ reason: String) {
            problems.append(ConfigurationError(keyPath: "routes[\(index)]\(key.isEmpty ? "" : ".")\(key)", reason: reason))
        }
        var firstByName: [String: Int] = [:]
        var fallback: Int?
        var firstByListen: [String: Int] = [:]
        var firstByHostAndPath: [String: Int] = [:]
        var firstByPath: [String: Int] = [:]
        var firstByStore: [String: Int] = [:]
        var firstBySink: [String: Int] = [:]
        for (i, route) in routes.enumerated() {
            if !RouteConfiguration.isValidName(route.name) {
                add(i, "name", "\"\(route.name)\" is not a route name: 1 to 32 of a-z, 0-9, _ and -")
            } else if let first = firstByName[route.name] {
                add(i, "name", "\"\(route.name)\" is already the name of routes[\(first)]")
            } else {
                firstByName[route.name] = i
            }
            if let match = route.match {
                if let listen = match.listen {
                    let key = listen.description
                    if listen == sharedListen, !key.hasSuffix(":0") {
                        add(i, "match.listen", "is the shared listen address; a route's own listener needs an address of its own")
                    } else if let first = firstByListen[key], !key.hasSuffix(":0") {
                        add(i, "match.listen", "routes[\(first)] already has the listener \(key)")
                    } else {
                        firstByListen[key] = i
                    }
                } else if match.hosts.isEmpty, let prefix = match.pathPrefix {
                    if let first = firstByPath[prefix] {
                        add(i, "match.path_prefix", "routes[\(first)] already matches the path prefix \(prefix)")
                    } else {
                        firstByPath[prefix] = i
                    }
                }
                for host in match.hosts {
                    let key = host + " " + (match.pathPrefix ?? "")
                    if let first = firstByHostAndPath[key] {
                        add(i, "match.host", "routes[\(first)] already matches \(host)\(match.pathPrefix.map { " with the path prefix \($0)" } ?? "")")
                    } else {
                        firstByHostAndPath[key] = i
                    }
                }
            } else if let first = fallback {
                add(i, "match", "required: routes[\(first)] is already the route without match (the fallback); only one may leave it out")
            } else {
                fallback = i
            }
            let storeKey = route.store.identity
            if let first = firstByStore[storeKey] {
                if routes[first].credentials != route.credentials {
                    add(i, "store", "routes[\(first)] keeps its session in the same store (\(storeKey)) with other credentials; give each its own store")
                }
            } else {
                firstByStore[storeKey] = i
            }
            // A sink holds one token: two sessions writing it would overwrite each other's (a
            // top-level `sink:` is every route's unless a route names its own).
            if let sink = route.sink?.path {
                if let first = firstBySink[sink] {
                    if !(routes[first].credentials == route.credentials && routes[first].store == route.store) {
                        add(i, "sink.path", "routes[\(first)] writes another session's token to the same file (\(sink)); give each route its own sink")
                    }
                } else {
                    firstBySink[sink] = i
                }
            }
        }
        return problems
    }
}

extension StoreConfiguration {
    /// Where the session lives: two routes with the same identity share one session.
    public var identity: String {
        if let redis { return "\(redis.url) db \(redis.database) key \(redis.key)" }
        return path
    }

    /// The store of the route `name` when the route names none: `<folder>/<name>.json` beside the
    /// file store, `<key>/<name>` in Redis (CONTRACT.md "Several APIs in one process").
    public func forRoute(_ name: String) -> StoreConfiguration {
        var store = self
        if var redis = store.redis {
            redis.key = "\(redis.key)/\(name)"
            store.redis = redis
        } else {
            let folder = path.lastIndex(of: "/").map { String(path[..<$0]) } ?? "."
            store.path = "\(folder)/\(name).json"
        }
        return store
    }
}

extension Configuration {
    /// Every file a `*_file` key names (secrets, TLS certificates, keys and CAs), each once: read
    /// again when it changes (CONTRACT.md "Reload without a restart").
    public var watchedFiles: [String] {
        var files: [String] = []
        func add(_ path: String?) { if let path, !files.contains(path) { files.append(path) } }
        func add(_ secret: Secret?) { if case .file(let path)? = secret?.origin { add(path) } }
        for route in routes {
            for secret in route.credentials.source.secrets { add(secret) }
            add(route.access.requireValue)
            add(route.store.redis?.password)
            add(route.store.redis?.caFile)
            add(route.store.redis?.clientCertFile)
            add(route.store.redis?.clientKeyFile)
            add(route.store.redis?.sentinel?.password)
            add(route.upstreamTLS.caFile)
            add(route.upstreamTLS.clientCertFile)
            add(route.upstreamTLS.clientKeyFile)
        }
        return files
    }
}
