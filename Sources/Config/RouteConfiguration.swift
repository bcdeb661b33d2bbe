import Sockets
import Yams

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
    /// `inject`: where the token goes (nil: `Authorization: Bearer <token>`).
    public var inject: InjectConfiguration? = nil
    /// `tls:` of a route with its own `match.listen`: that listener speaks TLS. (Not `listenTLS`,
    /// which is the shared listener's, at the top of `Configuration`.)
    public var ownListenerTLS: ListenerTLSConfiguration? = nil
    /// `placeholder`: the values a sandbox holds instead of the credential (nil: none asked for).
    public var placeholder: PlaceholderConfiguration? = nil
    /// `scrub` as written (nil: not written).
    public var scrubSetting: Bool? = nil
    /// `scrub`: the route's credential values are scrubbed from its responses; default true when
    /// `placeholder` is set (CONTRACT.md "Programs in a sandbox").
    public var scrub: Bool { scrubSetting ?? (placeholder != nil) }
    /// `budget:`: requests in flight and a rate per caller (nil: none).
    public var budget: BudgetConfiguration? = nil

    /// Where bodies spooled under `forward.request_buffering_disk` are kept, resolved once at load:
    /// `forward.request_buffering_path`, or `defaultSpoolFolder`.
    public var spoolFolder: String

    public init(name: String, upstream: UpstreamURL, credentials: CredentialsConfiguration, store: StoreConfiguration) {
        self.name = name
        self.upstream = upstream
        self.credentials = credentials
        self.store = store
        spoolFolder = Self.defaultSpoolFolder(beside: store)
    }

    /// `forward.request_buffering_path`'s default: `spool/` beside the store's file (with a Redis
    /// store, beside `store.path`, which then keeps only such folders; docs/CONFIGURATION.md).
    public static func defaultSpoolFolder(beside store: StoreConfiguration) -> String {
        AtomicFile.parentFolder(of: store.path) + "/spool"
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
            if case .value(let secret)? = route.placeholder?.source { add(secret) }
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

extension Keys {
    /// The keys of one entry of `routes:`.
    static let route = [
        "name", "match", "upstream", "credentials", "upstream_tls", "sink", "store", "access", "forward", "inject", "tls", "placeholder", "scrub",
        "budget",
    ]
    static let match = ["listen", "host", "path_prefix", "strip_prefix"]
}

extension RouteConfiguration {
    /// What a route whose credentials could not be read holds: the load fails, the route is never used.
    static let unreadCredentials = CredentialsConfiguration(.static(StaticTokenConfiguration(token: Secret(value: "", origin: .literal))))

    /// The sections a route has: `upstream` and `credentials` (required when `requireAPI`), and
    /// `upstream_tls`, `sink`, `store`, `access`, `forward`, `inject`, each replacing the one of `defaults` as a whole.
    static func parse(_ s: YAMLSection, name: String, defaults: RouteConfiguration?, requireAPI: Bool, in load: LoadContext) -> RouteConfiguration {
        let upstream: UpstreamURL? = load.found.collect {
            if defaults == nil, requireAPI, let value = load.env(ConfigurationLoader.upstreamEnvironmentKey) {
                return try load.parseUpstream(value, keyPath: ConfigurationLoader.upstreamEnvironmentKey)
            } else if let value = try s.string("upstream") {
                return try load.parseUpstream(value, keyPath: "upstream")
            } else if requireAPI {
                throw ConfigurationError(keyPath: "upstream", reason: "required: the base URL requests are forwarded to (e.g. https://api.example.com)")
            }
            return nil
        }
        let credentials: CredentialsConfiguration? = load.found.collect {
            guard let credentialsSection = try s.section("credentials") else {
                guard requireAPI else { return nil }
                throw ConfigurationError(keyPath: "credentials", reason: "required: where the proxy gets its tokens (credentials.type)")
            }
            return try CredentialsConfiguration.parse(credentialsSection, in: load)
        }
        let ownStore = load.found.collect { try s.section("store") }
        let store: StoreConfiguration
        if let ownStore {
            store = load.found.collect { try StoreConfiguration.parse(ownStore, in: load) } ?? StoreConfiguration(path: load.resolve("./state/tokens.json"))
        } else if let defaults {
            store = defaults.store.forRoute(name)
        } else {
            store = load.found.collect { try StoreConfiguration.parse(nil, in: load) } ?? StoreConfiguration(path: load.resolve("./state/tokens.json"))
        }
        // Without an upstream or credentials the file is invalid already (recorded above); the rest
        // is still read, for its own errors, into a route that is never used.
        var route = RouteConfiguration(
            name: name,
            upstream: upstream ?? UpstreamURL(scheme: "http", host: "", port: 0, explicitPort: false, basePath: "", original: ""),
            credentials: credentials ?? Self.unreadCredentials, store: store)
        if let defaults {
            route.upstreamTLS = defaults.upstreamTLS
            route.sink = defaults.sink
            route.access = defaults.access
            route.forward = defaults.forward
            route.inject = defaults.inject
            route.scrubSetting = defaults.scrubSetting
            route.budget = defaults.budget
        }
        load.found.collect {
            guard let tls = try s.section("upstream_tls") else { return }
            route.upstreamTLS = UpstreamTLSConfiguration.parse(tls, upstream: upstream, in: load)
        }
        load.found.collect {
            guard let sink = try s.section("sink") else { return }
            load.found.collect { try sink.rejectUnknownKeys(Keys.sections["sink"]!) }
            guard let path = try load.pathValue(sink, "path") else {
                throw ConfigurationError(keyPath: "sink.path", reason: "required when sink: is present")
            }
            route.sink = SinkConfiguration(path: path)
        }
        if let access = load.found.collect({ try s.section("access") }) { route.access = AccessConfiguration.parse(access, in: load) }
        if let forward = load.found.collect({ try s.section("forward") }) { route.forward = ForwardConfiguration.parse(forward, in: load) }
        if let inject = load.found.collect({ try s.section("inject") }) { route.inject = InjectConfiguration.parse(inject, in: load) }
        parseSandbox(s, into: &route, in: load)
        if let budget = load.found.collect({ try s.section("budget") }) { route.budget = BudgetConfiguration.parse(budget, in: load) }
        // Once both are known: the store is the route's own or the defaults', `forward` too.
        route.spoolFolder = route.forward.requestBufferingPath ?? Self.defaultSpoolFolder(beside: route.store)
        // RFC 9449 §7.1 fixes a DPoP-bound token's field: `inject` is ignored for it.
        if let inject = route.inject, !inject.isDefault, route.credentials.source.oauth2Client?.dpop != nil {
            load.warnings.append("inject: ignored for DPoP-bound tokens (credentials.dpop), which always go as Authorization: DPoP <token>")
        }
        return route
    }

    /// `routes:`: each entry read with a context of its own, whose errors and warnings are then named
    /// `routes[i].…`, so that every route's errors are found (`check`).
    static func parseList(_ root: YAMLSection, defaults: RouteConfiguration, allowRemote: Bool, in load: LoadContext) -> [RouteConfiguration] {
        guard let node = root.node("routes") else { return [defaults] }
        guard case .sequence(let sequence) = node, !sequence.isEmpty else {
            load.found.record(ConfigurationError(keyPath: "routes", reason: "must be a list of routes, each with name, match, upstream and credentials"))
            return [defaults]
        }
        var routes: [RouteConfiguration] = []
        for (i, entry) in sequence.enumerated() {
            let prefix = "routes[\(i)]"
            let sub = LoadContext(baseDirectory: load.baseDirectory, environment: load.environment)
            var route = defaults
            route.name = ""
            if let section = sub.found.collect({ try YAMLSection(node: entry, keyPath: "") }) {
                sub.found.collect { try section.rejectUnknownKeys(Keys.route) }
                let name = sub.found.collect { try section.string("name") } ?? nil
                if name == nil {
                    sub.found.record(ConfigurationError(keyPath: "name", reason: "required: the route's name ([a-z0-9_-], 1 to 32 characters)"))
                }
                route = Self.parse(section, name: name ?? "route\(i)", defaults: defaults, requireAPI: true, in: sub)
                route.name = name ?? ""
                route.match = RouteMatch.parse(section, allowRemote: allowRemote, in: sub)
                if let problem = route.requestHostProblem(keyPath: "upstream") { sub.found.record(problem) }
                // `tls` belongs to a listener: a route has one only with `match.listen`.
                if let tls = sub.found.collect({ try section.section("tls") }) {
                    route.ownListenerTLS = ListenerTLSConfiguration.parse(tls, in: sub)
                    if route.match?.listen == nil {
                        sub.found.record(
                            ConfigurationError(
                                keyPath: "tls",
                                reason: "only a route with its own match.listen has a listener of its own; the shared listener's tls is at the top"))
                    }
                }
            }
            for error in sub.found.errors {
                load.found.record(ConfigurationError(keyPath: error.keyPath.isEmpty ? prefix : "\(prefix).\(error.keyPath)", reason: error.reason))
            }
            for problem in sub.startProblems.errors {
                load.startProblems.record(ConfigurationError(keyPath: "\(prefix).\(problem.keyPath)", reason: problem.reason))
            }
            load.warnings += sub.warnings.map { "\(prefix).\($0)" }
            routes.append(route)
        }
        return routes
    }
}

extension RouteConfiguration {
    /// `{host}` in the upstream of a route that no `*.` name matches: the request's Host (any value
    /// a client sends) would choose where the credentials go, so it is refused.
    func requestHostProblem(keyPath: String) -> ConfigurationError? {
        guard upstream.takesRequestHost, !(match?.hosts.contains { $0.hasPrefix("*.") } ?? false) else { return nil }
        return ConfigurationError(
            keyPath: keyPath,
            reason: "\(UpstreamURL.requestHost) stands for the request's own host: only a route whose match.host has a \"*.\" name may use it")
    }
}

extension RouteMatch {
    /// A route's `match:`; nil when it has none (the fallback route).
    static func parse(_ route: YAMLSection, allowRemote: Bool, in load: LoadContext) -> RouteMatch? {
        guard let s = load.found.collect({ try route.section("match") }) else { return nil }
        load.found.collect { try s.rejectUnknownKeys(Keys.match) }
        var match = RouteMatch()
        load.found.collect {
            guard let value = try s.string("listen") else { return }
            match.listen = try load.parseListen(value, keyPath: "match.listen", allowRemote: allowRemote)
        }
        load.found.collect {
            guard let node = s.node("host") else { return }
            let names: [String]
            var isList = false
            if case .sequence = node { isList = true }
            if isList {
                names = try s.stringList("host", example: "[api.example.com, \"*.example.com\"]") ?? []
            } else {
                names = [try s.nonEmptyString("host") ?? ""]
            }
            for (index, name) in names.enumerated() {
                let key = !isList ? "match.host" : "match.host[\(index)]"
                let (bare, _) = RouteTable.splitPort(Array(name.utf8)[...])
                let label = bare.starts(with: "*.".utf8) ? Array(bare.dropFirst(2)) : Array(bare)
                let nameOK =
                    !label.isEmpty
                    && label.allSatisfy { b in
                        (b >= 0x61 && b <= 0x7A) || (b >= 0x41 && b <= 0x5A) || (b >= 0x30 && b <= 0x39) || b == 0x2D || b == 0x2E || b == 0x5B || b == 0x5D
                            || b == 0x3A
                    }
                if !nameOK {
                    throw ConfigurationError(keyPath: key, reason: "\"\(name)\" is not a host name (a name, \"*.\" and a name, or either with :port)")
                }
            }
            match.hosts = names.map { $0.lowercased() }
        }
        load.found.collect {
            guard let prefix = try s.nonEmptyString("path_prefix") else { return }
            guard prefix.hasPrefix("/") else { throw ConfigurationError(keyPath: "match.path_prefix", reason: "\"\(prefix)\" must start with /") }
            match.pathPrefix = prefix
        }
        if let strip = load.found.collect({ try s.bool("strip_prefix") }) { match.stripPrefix = strip }
        if match.listen == nil, match.hosts.isEmpty, match.pathPrefix == nil {
            load.found.record(ConfigurationError(keyPath: "match", reason: "needs listen, host or path_prefix (leave match out for the fallback route)"))
        }
        if match.listen != nil, !match.hosts.isEmpty || match.pathPrefix != nil {
            load.found.record(
                ConfigurationError(
                    keyPath: "match.listen", reason: "a route on a listener of its own takes every request there; host and path_prefix do not go with it"))
        }
        return match
    }
}
