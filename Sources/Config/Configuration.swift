import Basics

/// The typed form of the YAML configuration file (CONTRACT.md "The configuration file").
/// Every duration is in seconds (`Double`), every size in bytes. Relative paths are already
/// resolved against the config file's folder. Secrets named by `*_env` / `*_file` are already read.
@dynamicMemberLookup
public struct Configuration: Sendable, Equatable {
    public var listen: ListenAddress = .tcp(host: "127.0.0.1", port: 8080)
    public var allowRemote: Bool = false
    public var drainTimeout: Double = 10
    public var workers: Int = 0
    public var admin: AdminConfiguration? = nil
    /// Every protected API of the file, in file order; never empty. A file without `routes:` is the
    /// one route named `default`, with no `match` (CONTRACT.md "Several APIs in one process").
    public var routes: [RouteConfiguration]
    /// Whether the file has `routes:` (errors from a route's token state then name it).
    public var hasRoutes: Bool = false
    /// `watch_config`: reload when the file changes (CONTRACT.md "Reload without a restart").
    public var watchConfig: Bool = false
    public var limits: LimitsConfiguration = .init()
    public var log: LogConfiguration = .init()
    /// `tls:` at the top: the shared `listen` speaks TLS (CONTRACT.md "HTTPS for clients").
    public var listenTLS: ListenerTLSConfiguration? = nil
    /// `forward_proxy:`: CONNECT to a host route's name is served (nil: CONNECT is 405).
    public var forwardProxy: ForwardProxyConfiguration? = nil
    /// `audit:`: the audit log (nil: none).
    public var audit: AuditConfiguration? = nil
    /// `telemetry:`: OpenTelemetry export (nil: nothing is exported, a client's traceparent passes as it came).
    public var telemetry: TelemetryConfiguration? = nil
    /// The folder of the config file; relative paths were resolved against it.
    public var baseDirectory: String

    public init(upstream: UpstreamURL, credentials: CredentialsConfiguration, store: StoreConfiguration, baseDirectory: String) {
        self.routes = [RouteConfiguration(name: RouteConfiguration.defaultName, upstream: upstream, credentials: credentials, store: store)]
        self.baseDirectory = baseDirectory
    }

    /// The first route's settings (`configuration.upstream`, `.credentials`, `.forward`, …): for a
    /// one-API file, its only route. Each is stored once, in `routes`.
    public subscript<Value>(dynamicMember field: WritableKeyPath<RouteConfiguration, Value>) -> Value {
        get { routes[0][keyPath: field] }
        set { routes[0][keyPath: field] = newValue }
    }

    /// The same configuration reduced to one route (its settings then read as the top-level ones):
    /// what a route's token manager, access policy and forwarder are built from.
    public func selecting(route index: Int) -> Configuration {
        var one = self
        one.routes = [routes[index]]
        return one
    }

    /// The index of the route named `name`, or nil.
    public func routeIndex(named name: String) -> Int? {
        routes.firstIndex { $0.name == name }
    }
}

public enum ListenAddress: Sendable, Equatable, CustomStringConvertible {
    /// `host` is an IP literal without brackets ("127.0.0.1", "::1") or a name such as "localhost".
    case tcp(host: String, port: Int)
    case unix(path: String)

    /// A TCP port 0: the kernel picks a port at each bind, so it names no particular address.
    public var isEphemeral: Bool {
        if case .tcp(_, 0) = self { return true }
        return false
    }

    public var description: String {
        switch self {
        case .tcp(let host, let port): return Authority(host: host, port: port).description
        case .unix(let path): return "unix:\(path)"
        }
    }
}

/// The upstream base URL, split. `basePath` has no trailing slash ("" for the root).
public struct UpstreamURL: Sendable, Equatable, CustomStringConvertible {
    /// http or https (the loader takes no other).
    public var urlScheme: URLScheme
    /// `urlScheme` as written in a URL, lowercased.
    public var scheme: String {
        get { urlScheme.rawValue }
        set { urlScheme = URLScheme(newValue) ?? .http }
    }
    public var host: String  // lowercased; an IPv6 literal without brackets
    public var port: Int  // explicit, or the scheme's default
    public var explicitPort: Bool
    public var basePath: String
    public var original: String

    public init(scheme: String, host: String, port: Int, explicitPort: Bool, basePath: String, original: String) {
        urlScheme = URLScheme(scheme) ?? .http
        self.host = host
        self.port = port
        self.explicitPort = explicitPort
        self.basePath = basePath
        self.original = original
    }

    /// "host" or "host:port" as it goes in a Host header ("[::1]:8443" for IPv6).
    public var authority: String {
        let h = Authority.bracketed(host)
        return explicitPort ? "\(h):\(port)" : h
    }
    /// scheme://authority (no path).
    public var origin: String { "\(scheme)://\(authority)" }
    public var description: String { origin + basePath }

    /// The host of `upstream: "https://{host}"`: the request's own host, the one a route's `*.` name
    /// matched (CONTRACT.md "Several APIs in one process: routes").
    public static let requestHost = "{host}"
    /// Whether the host is the request's own (`requestHost`), filled in per request.
    public var takesRequestHost: Bool { host == UpstreamURL.requestHost }
}

public struct AdminConfiguration: Sendable, Equatable {
    public var listen: ListenAddress
    public init(listen: ListenAddress) { self.listen = listen }
}

public struct SinkConfiguration: Sendable, Equatable {
    public var path: String
    public init(path: String) { self.path = path }
}

public struct StoreConfiguration: Sendable, Equatable {
    /// `store.backend`: where the session lives (CONTRACT.md "store").
    public enum Backend: String, Sendable, Equatable, CaseIterable {
        /// A 0600 file on this machine (`store.path`).
        case file
        /// A Redis server that a fleet of proxies shares (`store.url`, docs/FLEET.md).
        case redis
    }
    /// Absolute. Default: `<config folder>/state/tokens.json`.
    public var path: String
    public var backend: Backend = .file
    /// Set when `backend` is `.redis`.
    public var redis: RedisStoreConfiguration? = nil
    /// `store.encryption_key_*`: sessions sealed at rest (both backends).
    public var encryption: StoreEncryption? = nil
    /// The route whose session this store keeps, named in a sealed session's authenticated data:
    /// the route's own name, or the first in the file of the routes that share this store (their
    /// one session opens for each of them). Set by the loader once every route is read.
    public var sessionRoute = RouteConfiguration.defaultName
    public init(path: String) { self.path = path }
}

/// The keys that seal stored sessions (CONTRACT.md "The fleet store in production"), 32 bytes each:
/// the one every write uses, and earlier ones that still open what they sealed.
public struct StoreEncryption: Sendable, Equatable {
    public var current: [UInt8]
    public var previous: [[UInt8]] = []
    public init(current: [UInt8]) { self.current = current }
}

/// A configuration error: names the key path and the reason (`credentials.tokne_url: unknown key`).
/// A file with several errors gives one error for the first, which carries the others in `further`.
public struct ConfigurationError: Error, Sendable, Equatable, CustomStringConvertible {
    public var keyPath: String
    public var reason: String
    /// The file's other errors, in the order they were found; empty when this is the only one.
    public var further: [ConfigurationError] = []

    public init(keyPath: String, reason: String) {
        self.keyPath = keyPath
        self.reason = reason
    }

    /// The first of `errors` carrying the rest, or nil when there are none.
    public init?(every errors: [ConfigurationError]) {
        let flat = errors.flatMap(\.all)
        guard let first = flat.first else { return nil }
        self.init(keyPath: first.keyPath, reason: first.reason)
        further = Array(flat.dropFirst())
    }

    /// This error and the further ones, each on its own.
    public var all: [ConfigurationError] {
        [ConfigurationError(keyPath: keyPath, reason: reason)] + further.flatMap(\.all)
    }

    /// `key: reason`, then the further errors the same way, separated by `; `.
    public var description: String {
        ([self] + further).map { $0.keyPath.isEmpty ? $0.reason : "\($0.keyPath): \($0.reason)" }.joined(separator: "; ")
    }
}
