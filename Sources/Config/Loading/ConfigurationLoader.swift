import FoundationEssentials
import Sockets
import Yams

/// A validated configuration and the warnings found while loading it (unused keys, literal
/// secrets, disabled TLS verification). Warnings never contain a secret value.
public struct LoadedConfiguration: Sendable {
    public var configuration: Configuration
    public var warnings: [String]
    /// The file's text and folder, so that its `*_file` secrets can be read again without reading
    /// a file that may have changed since (`load` sets them).
    public var sourceText: String = ""
    public var sourceFolder: String = ""
    /// What `serve` needs at start that the load lets pass (an unset seed variable, a file read later
    /// that is there but unreadable), each with its key: errors for `check` only.
    public var startProblems: [ConfigurationError] = []

    public init(configuration: Configuration, warnings: [String]) {
        self.configuration = configuration
        self.warnings = warnings
    }
}

/// Reads the YAML configuration file (CONTRACT.md "The configuration file"). A file that is not
/// valid YAML fails with one `ConfigurationError`; otherwise every key is read and the errors are
/// thrown together (the first, carrying the others in `further`), each naming the full dotted key
/// path and the reason. No secret value is ever part of an error or a warning.
public enum ConfigurationLoader {
    /// The environment variable that overrides `listen`.
    public static let listenEnvironmentKey = "TOKENPROXY_LISTEN"
    /// The environment variable that overrides `upstream`.
    public static let upstreamEnvironmentKey = "TOKENPROXY_UPSTREAM"
    /// A configuration file larger than this is refused unread (a YAML file of the contract's keys is
    /// a few KiB; this only stops a wrong path, such as a log or a device, from being read whole).
    static let configurationSizeLimit = 16 << 20

    /// Reads the file, applies TOKENPROXY_LISTEN / TOKENPROXY_UPSTREAM from `environment`, reads secrets
    /// named by *_env / *_file, resolves relative paths against the file's folder, validates.
    public static func load(path: String, environment: [String: String]) throws -> LoadedConfiguration {
        let absolute = Paths.resolve(path, against: FileManager.default.currentDirectoryPath)
        guard let kind = Paths.kind(of: absolute) else {
            throw ConfigurationError(keyPath: "", reason: "cannot read the configuration file \(absolute): no such file")
        }
        guard kind != .folder else {
            throw ConfigurationError(keyPath: "", reason: "cannot read the configuration file \(absolute): it is a folder")
        }
        let bytes: [UInt8]
        switch SmallFile.read(absolute, limit: Self.configurationSizeLimit) {
        case .success(let content):
            bytes = content
        case .failure(let failure) where failure.code == nil:
            throw ConfigurationError(keyPath: "", reason: "cannot read the configuration file \(absolute): \(failure.description)")
        case .failure:
            throw ConfigurationError(keyPath: "", reason: "cannot read the configuration file \(absolute): permission denied or unreadable")
        }
        guard let text = String(bytes: bytes, encoding: .utf8) else {
            throw ConfigurationError(keyPath: "", reason: "the configuration file \(absolute) is not UTF-8 text")
        }
        let folder = Paths.folder(of: absolute)
        var loaded = try parse(yaml: text, baseDirectory: folder, environment: environment)
        loaded.sourceText = text
        loaded.sourceFolder = folder
        return loaded
    }

    /// Like `load`, for YAML already in memory; relative paths are resolved against `baseDirectory`.
    public static func parse(yaml: String, baseDirectory: String, environment: [String: String]) throws -> LoadedConfiguration {
        let base = Paths.resolve(baseDirectory, against: FileManager.default.currentDirectoryPath)
        let root: Node?
        do {
            // The basic resolver tags every plain scalar a string without trying Yams's regular
            // expressions (NSRegularExpression, ICU): the typed readers of YAMLSection interpret
            // scalars themselves, so the tags were never read.
            root = try Yams.compose(yaml: yaml, .basic)
        } catch let error as YamlError {
            throw ConfigurationError(keyPath: "", reason: describe(error))
        } catch {
            throw ConfigurationError(keyPath: "", reason: "not valid YAML")
        }
        guard let root, !root.isNull else {
            throw ConfigurationError(keyPath: "", reason: "the configuration file is empty")
        }
        guard case .mapping = root else {
            throw ConfigurationError(
                keyPath: "", reason: "the top level must be a mapping of keys (listen:, upstream:, credentials:...), not \(root.kindDescription)")
        }
        let builder = Builder(baseDirectory: base, environment: environment)
        let configuration = try builder.build(try YAMLSection(node: root, keyPath: ""))
        var loaded = LoadedConfiguration(configuration: configuration, warnings: builder.warnings)
        loaded.startProblems = builder.load.startProblems.errors
        return loaded
    }

    /// Every key path the file may contain ("listen", "credentials.token_url", "limits.max_header_bytes", ...), for docs.
    public static let knownKeys: [String] = Keys.root.flatMap { key -> [String] in
        guard let inner = Keys.sections[key] else { return [key] }
        return [key] + inner.map { "\(key).\($0)" }
    }

    /// The keys of `credentials` that `type` uses; any other credentials key gets a warning.
    public static func credentialsKeys(usedBy type: CredentialsType) -> [String] {
        Keys.credentialsCommon + type.keys
    }

    /// A YAML syntax error, without the snippet of the file Yams adds (the line may hold a secret).
    static func describe(_ error: YamlError) -> String {
        switch error {
        case .scanner(let context, let problem, let mark, _), .parser(let context, let problem, let mark, _),
            .composer(let context, let problem, let mark, _):
            let detail = [context?.text, problem].compactMap { $0 }.filter { !$0.isEmpty }.joined(separator: ", ")
            return "not valid YAML at line \(mark.line), column \(mark.column): \(detail)"
        case .duplicatedKeysInMapping(let duplicates, let context):
            return "duplicate key \(duplicates.joined(separator: ", ")) at line \(context.mark.line)"
        case .reader(let problem, _, _, _):
            return "not valid YAML: \(problem)"
        default:
            return "not valid YAML"
        }
    }
}

enum Keys {
    static let root = [
        "listen", "upstream", "allow_remote", "drain_timeout", "workers", "admin", "credentials", "upstream_tls", "sink",
        "store", "access", "forward", "inject", "limits", "log", "routes", "watch_config", "tls", "forward_proxy", "budget",
        "placeholder", "scrub", "audit", "telemetry",
    ]
    static let sections: [String: [String]] = [
        "admin": ["listen"],
        "credentials": credentials,
        "upstream_tls": ["ca_file", "client_cert_file", "client_key_file", "insecure_skip_verify"],
        "sink": ["path"],
        "store": Keys.store,
        "access": [
            "require_header", "require_value", "require_value_env", "require_value_file", "allow_paths", "allow_methods",
            "allow_hosts", "allow_origins", "unix_mode",
        ],
        "forward": [
            "client_authorization", "preserve_host", "retry_body_limit", "retry_memory", "request_buffering", "request_buffering_disk",
            "request_buffering_disk_total", "request_buffering_path",
        ],
        "inject": InjectConfiguration.keys,
        "budget": BudgetConfiguration.keys,
        "limits": Limits.keys.map(\.name),
        "log": ["level", "format", "access_log"],
        "tls": ListenerTLSConfiguration.keys,
        "forward_proxy": ForwardProxyConfiguration.keys,
        "placeholder": Keys.placeholder,
        "audit": AuditConfiguration.keys,
        "telemetry": TelemetryConfiguration.keys,
    ]
}

/// The errors a load found so far. A reference type, so that `collect` can record an error while
/// the step it runs records others through the same `LoadContext` (steps nest).
final class ErrorList {
    private(set) var errors: [ConfigurationError] = []

    /// Runs one step of the build: a `ConfigurationError` it throws is recorded instead of ending
    /// the load, and nil returned. So one load reports every error of the file (`tokenproxy check`).
    func collect<T>(_ step: () throws -> T?) -> T? {
        do {
            return try step()
        } catch let error as ConfigurationError {
            record(error)
        } catch {
            errors.append(ConfigurationError(keyPath: "", reason: "\(error)"))
        }
        return nil
    }

    func record(_ error: ConfigurationError) {
        errors += error.all
    }

    /// `collect` for a step that only checks.
    func collect(_ step: () throws -> Void) {
        _ = collect { () throws -> Void? in try step() }
    }
}

/// Builds a `Configuration` from the parsed file: the file-level keys, then each section through
/// its own type's `parse`, collecting warnings and every error in `load`.
struct Builder {
    let load: LoadContext

    init(baseDirectory: String, environment: [String: String]) {
        load = LoadContext(baseDirectory: baseDirectory, environment: environment)
    }

    var warnings: [String] { load.warnings }

    /// Reads every key and section it can; throws the errors found, all of them, at the end.
    func build(_ root: YAMLSection) throws -> Configuration {
        load.found.collect {
            try root.rejectUnknownKeys(Keys.root) { key in
                let owners = Keys.root.filter { Keys.sections[$0]?.contains(key) == true }.map { "\($0):" }
                guard let last = owners.last else { return nil }
                let list = owners.count == 1 ? last : owners.dropLast().joined(separator: ", ") + " or " + last
                return "\(key) belongs under \(list)"
            }
        }
        let allowRemote = load.found.collect { try root.bool("allow_remote") } ?? false
        let hasRoutes = root.has("routes")

        let listen: ListenAddress? = load.found.collect {
            if let value = load.env(ConfigurationLoader.listenEnvironmentKey) {
                return try load.parseListen(value, keyPath: ConfigurationLoader.listenEnvironmentKey, allowRemote: allowRemote)
            } else if let value = try root.string("listen") {
                return try load.parseListen(value, keyPath: "listen", allowRemote: allowRemote)
            }
            return nil
        }

        // The one-API file is the route `default`; with `routes:` the top-level sections are every route's defaults.
        var routes: [RouteConfiguration]
        // The top-level store.path: its folder keeps the forward proxy's CA when the file names none.
        let topStorePath: String
        if hasRoutes {
            for key in ["upstream", "credentials", "placeholder"] where root.has(key) {
                load.found.record(ConfigurationError(keyPath: key, reason: "a file with routes: sets \(key) in each route, not at the top"))
            }
            if load.env(ConfigurationLoader.upstreamEnvironmentKey) != nil {
                load.warnings.append("\(ConfigurationLoader.upstreamEnvironmentKey): ignored, the file has routes: and each route names its own upstream")
            }
            let defaults = RouteConfiguration.parse(root, name: RouteConfiguration.defaultName, defaults: nil, requireAPI: false, in: load)
            routes = RouteConfiguration.parseList(root, defaults: defaults, allowRemote: allowRemote, in: load)
            topStorePath = defaults.store.path
        } else {
            routes = [RouteConfiguration.parse(root, name: RouteConfiguration.defaultName, defaults: nil, requireAPI: true, in: load)]
            let upstreamKey = load.env(ConfigurationLoader.upstreamEnvironmentKey) != nil ? ConfigurationLoader.upstreamEnvironmentKey : "upstream"
            if let problem = routes[0].requestHostProblem(keyPath: upstreamKey) { load.found.record(problem) }
            topStorePath = routes[0].store.path
        }

        // What a sealed session names as its route (SessionSeal.Binding).
        for i in routes.indices {
            let identity = routes[i].store.identity
            routes[i].store.sessionRoute = routes.first { $0.store.identity == identity }?.name ?? routes[i].name
        }

        var config = Configuration(upstream: routes[0].upstream, credentials: routes[0].credentials, store: routes[0].store, baseDirectory: load.baseDirectory)
        config.routes = routes
        config.hasRoutes = hasRoutes
        config.allowRemote = allowRemote
        if let listen { config.listen = listen }
        if hasRoutes {
            for problem in Configuration.routeProblems(routes, sharedListen: config.listen) { load.found.record(problem) }
        }
        for problem in Configuration.placeholderProblems(routes, hasRoutes: hasRoutes, environment: load.environment) { load.found.record(problem) }
        if let value = load.found.collect({ try root.bool("watch_config") }) { config.watchConfig = value }

        if let value = load.found.collect({ try root.duration("drain_timeout") }) { config.drainTimeout = value }
        load.found.collect {
            guard let value = try root.int("workers") else { return }
            guard value >= 0 else { throw ConfigurationError(keyPath: "workers", reason: "must be 0 (one per CPU) or more") }
            guard value <= 1024 else { throw ConfigurationError(keyPath: "workers", reason: "must be at most 1024") }
            config.workers = value
        }

        load.found.collect {
            guard let admin = try root.section("admin") else { return }
            load.found.collect { try admin.rejectUnknownKeys(Keys.sections["admin"]!) }
            guard let value = try admin.string("listen") else {
                throw ConfigurationError(keyPath: "admin.listen", reason: "required when admin: is present (e.g. 127.0.0.1:9901)")
            }
            let address = try load.parseListen(value, keyPath: "admin.listen", allowRemote: allowRemote)
            if address == config.listen, address != .tcp(host: address.tcpHost ?? "", port: 0) {
                throw ConfigurationError(keyPath: "admin.listen", reason: "is the same address as listen")
            }
            config.admin = AdminConfiguration(listen: address)
        }
        if let limits = load.found.collect({ try root.section("limits") }) { config.limits = LimitsConfiguration.parse(limits, in: load) }
        if let log = load.found.collect({ try root.section("log") }) { config.log = LogConfiguration.parse(log, in: load) }
        if let tls = load.found.collect({ try root.section("tls") }) { config.listenTLS = ListenerTLSConfiguration.parse(tls, in: load) }
        if let forward = load.found.collect({ try root.section("forward_proxy") }) {
            config.forwardProxy = ForwardProxyConfiguration.parse(forward, storePath: topStorePath, in: load)
            if !routes.contains(where: { !($0.match?.hosts.isEmpty ?? true) }) {
                load.warnings.append("forward_proxy: no route has match.host, so every CONNECT is refused or tunnelled (other_hosts)")
            }
        }
        if let telemetry = load.found.collect({ try root.section("telemetry") }) {
            config.telemetry = TelemetryConfiguration.parse(telemetry, in: load)
        }

        if let audit = load.found.collect({ try root.section("audit") }) { config.audit = AuditConfiguration.parse(audit, in: load) }

        if let error = ConfigurationError(every: load.found.errors) { throw error }
        return config
    }
}

extension ListenAddress {
    var tcpHost: String? {
        if case .tcp(let host, _) = self { return host }
        return nil
    }
}
