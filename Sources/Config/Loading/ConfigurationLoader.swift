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
        var builder = Builder(baseDirectory: base, environment: environment)
        let configuration = try builder.build(try YAMLSection(node: root, keyPath: ""))
        return LoadedConfiguration(configuration: configuration, warnings: builder.warnings)
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
        "store", "access", "forward", "limits", "log", "routes", "watch_config",
    ]
    /// The keys of one entry of `routes:`.
    static let route = ["name", "match", "upstream", "credentials", "upstream_tls", "sink", "store", "access", "forward"]
    static let match = ["listen", "host", "path_prefix", "strip_prefix"]
    static let sections: [String: [String]] = [
        "admin": ["listen"],
        "credentials": credentials,
        "upstream_tls": ["ca_file", "client_cert_file", "client_key_file", "insecure_skip_verify"],
        "sink": ["path"],
        "store": Builder.storeKeys,
        "access": [
            "require_header", "require_value", "require_value_env", "require_value_file", "allow_paths", "allow_methods",
            "allow_hosts", "allow_origins", "unix_mode",
        ],
        "forward": ["client_authorization", "preserve_host", "retry_body_limit", "retry_memory", "request_buffering", "request_buffering_disk"],
        "limits": Limits.keys.map(\.name),
        "log": ["level", "format", "access_log"],
    ]
}


/// The errors a load found so far. A reference type, so that `collect` can record an error while
/// the step it runs changes the `Builder`.
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

/// Builds a `Configuration` from the parsed file, collecting warnings and every error.
struct Builder {
    let baseDirectory: String
    let environment: [String: String]
    var warnings: [String] = []
    let found = ErrorList()

    init(baseDirectory: String, environment: [String: String]) {
        self.baseDirectory = baseDirectory
        self.environment = environment
    }

    func resolve(_ path: String) -> String { Paths.resolve(path, against: baseDirectory) }

    /// A non-empty environment value, or nil.
    func env(_ name: String) -> String? {
        guard let value = environment[name], !value.isEmpty else { return nil }
        return value
    }

    /// Reads every key and section it can; throws the errors found, all of them, at the end.
    mutating func build(_ root: YAMLSection) throws -> Configuration {
        found.collect {
            try root.rejectUnknownKeys(Keys.root) { key in
                let owners = Keys.root.filter { Keys.sections[$0]?.contains(key) == true }.map { "\($0):" }
                guard let last = owners.last else { return nil }
                let list = owners.count == 1 ? last : owners.dropLast().joined(separator: ", ") + " or " + last
                return "\(key) belongs under \(list)"
            }
        }
        let allowRemote = found.collect { try root.bool("allow_remote") } ?? false
        let hasRoutes = root.has("routes")

        let listen: ListenAddress? = found.collect {
            if let value = env(ConfigurationLoader.listenEnvironmentKey) {
                return try parseListen(value, keyPath: ConfigurationLoader.listenEnvironmentKey, allowRemote: allowRemote)
            } else if let value = try root.string("listen") {
                return try parseListen(value, keyPath: "listen", allowRemote: allowRemote)
            }
            return nil
        }

        // The one-API file is the route `default`; with `routes:` the top-level sections are every route's defaults.
        let routes: [RouteConfiguration]
        if hasRoutes {
            for key in ["upstream", "credentials"] where root.has(key) {
                found.record(ConfigurationError(keyPath: key, reason: "a file with routes: sets \(key) in each route, not at the top"))
            }
            if env(ConfigurationLoader.upstreamEnvironmentKey) != nil {
                warnings.append("\(ConfigurationLoader.upstreamEnvironmentKey): ignored, the file has routes: and each route names its own upstream")
            }
            let defaults = parseRouteSections(root, name: RouteConfiguration.defaultName, defaults: nil, requireAPI: false)
            routes = parseRoutes(root, defaults: defaults, allowRemote: allowRemote)
        } else {
            routes = [parseRouteSections(root, name: RouteConfiguration.defaultName, defaults: nil, requireAPI: true)]
        }

        var config = Configuration(upstream: routes[0].upstream, credentials: routes[0].credentials, store: routes[0].store, baseDirectory: baseDirectory)
        config.routes = routes
        config.hasRoutes = hasRoutes
        config.allowRemote = allowRemote
        if let listen { config.listen = listen }
        if hasRoutes {
            for problem in Configuration.routeProblems(routes, sharedListen: config.listen) { found.record(problem) }
        }
        if let value = found.collect({ try root.bool("watch_config") }) { config.watchConfig = value }

        if let value = found.collect({ try root.duration("drain_timeout") }) { config.drainTimeout = value }
        found.collect {
            guard let value = try root.int("workers") else { return }
            guard value >= 0 else { throw ConfigurationError(keyPath: "workers", reason: "must be 0 (one per CPU) or more") }
            guard value <= 1024 else { throw ConfigurationError(keyPath: "workers", reason: "must be at most 1024") }
            config.workers = value
        }

        found.collect {
            guard let admin = try root.section("admin") else { return }
            found.collect { try admin.rejectUnknownKeys(Keys.sections["admin"]!) }
            guard let value = try admin.string("listen") else {
                throw ConfigurationError(keyPath: "admin.listen", reason: "required when admin: is present (e.g. 127.0.0.1:9901)")
            }
            let address = try parseListen(value, keyPath: "admin.listen", allowRemote: allowRemote)
            if address == config.listen, address != .tcp(host: address.tcpHost ?? "", port: 0) {
                throw ConfigurationError(keyPath: "admin.listen", reason: "is the same address as listen")
            }
            config.admin = AdminConfiguration(listen: address)
        }
        if let limits = found.collect({ try root.section("limits") }) { config.limits = parseLimits(limits) }
        if let log = found.collect({ try root.section("log") }) { config.log = parseLog(log) }

        if let error = ConfigurationError(every: found.errors) { throw error }
        return config
    }

    /// What a route whose credentials could not be read holds: the load fails, the route is never used.
    static let unreadCredentials = CredentialsConfiguration(.static(StaticTokenConfiguration(token: Secret(value: "", origin: .literal))))

    /// The sections a route has: `upstream` and `credentials` (required when `requireAPI`), and
    /// `upstream_tls`, `sink`, `store`, `access`, `forward`, each replacing the one of `defaults` as a whole.
    mutating func parseRouteSections(_ s: YAMLSection, name: String, defaults: RouteConfiguration?, requireAPI: Bool) -> RouteConfiguration {
        let upstream: UpstreamURL? = found.collect {
            if defaults == nil, requireAPI, let value = env(ConfigurationLoader.upstreamEnvironmentKey) {
                return try parseUpstream(value, keyPath: ConfigurationLoader.upstreamEnvironmentKey)
            } else if let value = try s.string("upstream") {
                return try parseUpstream(value, keyPath: "upstream")
            } else if requireAPI {
                throw ConfigurationError(keyPath: "upstream", reason: "required: the base URL requests are forwarded to (e.g. https://api.example.com)")
            }
            return nil
        }
        let credentials: CredentialsConfiguration? = found.collect {
            guard let credentialsSection = try s.section("credentials") else {
                guard requireAPI else { return nil }
                throw ConfigurationError(keyPath: "credentials", reason: "required: where the proxy gets its tokens (credentials.type)")
            }
            return try parseCredentials(credentialsSection)
        }
        let ownStore = found.collect { try s.section("store") }
        let store: StoreConfiguration
        if let ownStore {
            store = found.collect { try parseStore(ownStore) } ?? StoreConfiguration(path: resolve("./state/tokens.json"))
        } else if let defaults {
            store = defaults.store.forRoute(name)
        } else {
            store = found.collect { try parseStore(nil) } ?? StoreConfiguration(path: resolve("./state/tokens.json"))
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
        }
        found.collect {
            guard let tls = try s.section("upstream_tls") else { return }
            route.upstreamTLS = parseUpstreamTLS(tls, upstream: upstream)
        }
        found.collect {
            guard let sink = try s.section("sink") else { return }
            found.collect { try sink.rejectUnknownKeys(Keys.sections["sink"]!) }
            guard let path = try pathValue(sink, "path") else {
                throw ConfigurationError(keyPath: "sink.path", reason: "required when sink: is present")
            }
            route.sink = SinkConfiguration(path: path)
        }
        if let access = found.collect({ try s.section("access") }) { route.access = parseAccess(access) }
        if let forward = found.collect({ try s.section("forward") }) { route.forward = parseForward(forward) }
        return route
    }

    /// `routes:`: each entry read by a builder of its own, whose errors and warnings are then named
    /// `routes[i].…`, so that every route's errors are found (`check`).
    mutating func parseRoutes(_ root: YAMLSection, defaults: RouteConfiguration, allowRemote: Bool) -> [RouteConfiguration] {
        guard let node = root.node("routes") else { return [defaults] }
        guard case .sequence(let sequence) = node, !sequence.isEmpty else {
            found.record(ConfigurationError(keyPath: "routes", reason: "must be a list of routes, each with name, match, upstream and credentials"))
            return [defaults]
        }
        var routes: [RouteConfiguration] = []
        for (i, entry) in sequence.enumerated() {
            let prefix = "routes[\(i)]"
            var sub = Builder(baseDirectory: baseDirectory, environment: environment)
            var route = defaults
            route.name = ""
            if let section = sub.found.collect({ try YAMLSection(node: entry, keyPath: "") }) {
                sub.found.collect { try section.rejectUnknownKeys(Keys.route) }
                let name = sub.found.collect { try section.string("name") } ?? nil
                if name == nil {
                    sub.found.record(ConfigurationError(keyPath: "name", reason: "required: the route's name ([a-z0-9_-], 1 to 32 characters)"))
                }
                route = sub.parseRouteSections(section, name: name ?? "route\(i)", defaults: defaults, requireAPI: true)
                route.name = name ?? ""
                route.match = sub.parseMatch(section, allowRemote: allowRemote)
            }
            for error in sub.found.errors {
                found.record(ConfigurationError(keyPath: error.keyPath.isEmpty ? prefix : "\(prefix).\(error.keyPath)", reason: error.reason))
            }
            warnings += sub.warnings.map { "\(prefix).\($0)" }
            routes.append(route)
        }
        return routes
    }

    /// A route's `match:`; nil when it has none (the fallback route).
    func parseMatch(_ route: YAMLSection, allowRemote: Bool) -> RouteMatch? {
        guard let s = found.collect({ try route.section("match") }) else { return nil }
        found.collect { try s.rejectUnknownKeys(Keys.match) }
        var match = RouteMatch()
        found.collect {
            guard let value = try s.string("listen") else { return }
            match.listen = try parseListen(value, keyPath: "match.listen", allowRemote: allowRemote)
        }
        found.collect {
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
                let nameOK = !label.isEmpty && label.allSatisfy { b in
                    (b >= 0x61 && b <= 0x7A) || (b >= 0x41 && b <= 0x5A) || (b >= 0x30 && b <= 0x39) || b == 0x2D || b == 0x2E || b == 0x5B || b == 0x5D || b == 0x3A
                }
                if !nameOK {
                    throw ConfigurationError(keyPath: key, reason: "\"\(name)\" is not a host name (a name, \"*.\" and a name, or either with :port)")
                }
            }
            match.hosts = names.map { $0.lowercased() }
        }
        found.collect {
            guard let prefix = try s.nonEmptyString("path_prefix") else { return }
            guard prefix.hasPrefix("/") else { throw ConfigurationError(keyPath: "match.path_prefix", reason: "\"\(prefix)\" must start with /") }
            match.pathPrefix = prefix
        }
        if let strip = found.collect({ try s.bool("strip_prefix") }) { match.stripPrefix = strip }
        if match.listen == nil, match.hosts.isEmpty, match.pathPrefix == nil {
            found.record(ConfigurationError(keyPath: "match", reason: "needs listen, host or path_prefix (leave match out for the fallback route)"))
        }
        if match.listen != nil, !match.hosts.isEmpty || match.pathPrefix != nil {
            found.record(ConfigurationError(
                keyPath: "match.listen", reason: "a route on a listener of its own takes every request there; host and path_prefix do not go with it"))
        }
        return match
    }

    // MARK: - Addresses

    func parseUpstream(_ value: String, keyPath: String) throws -> UpstreamURL {
        do {
            return try AddressParser.upstream(value)
        } catch let problem {
            throw ConfigurationError(keyPath: keyPath, reason: problem.reason)
        }
    }

    func parseListen(_ value: String, keyPath: String, allowRemote: Bool) throws -> ListenAddress {
        let address: ListenAddress
        do {
            address = try AddressParser.listen(value, baseDirectory: baseDirectory)
        } catch let problem {
            throw ConfigurationError(keyPath: keyPath, reason: problem.reason)
        }
        if !allowRemote, !AddressParser.isLoopback(address) {
            throw ConfigurationError(
                keyPath: keyPath,
                reason: "\(address) is not a loopback address; set allow_remote: true to accept connections from other machines")
        }
        return address
    }

    func checkURL(_ section: YAMLSection, _ key: String) throws -> String? {
        guard let value = try section.string(key) else { return nil }
        do {
            try AddressParser.checkEndpoint(value)
        } catch let problem {
            throw ConfigurationError(keyPath: section.path(key), reason: problem.reason)
        }
        return value.trimmingWhitespace()
    }

    func pathValue(_ section: YAMLSection, _ key: String) throws -> String? {
        guard let value = try section.nonEmptyString(key) else { return nil }
        guard !value.contains("\0") else { throw ConfigurationError(keyPath: section.path(key), reason: "contains a NUL byte") }
        return resolve(value)
    }

    func positiveDuration(_ section: YAMLSection, _ key: String) throws -> Double? {
        guard let value = try section.duration(key) else { return nil }
        guard value > 0 else { throw ConfigurationError(keyPath: section.path(key), reason: "must be more than 0") }
        return value
    }

    // MARK: - Secrets

    /// Reads `<base>` (literal, only when `literal` is true), `<base>_env` or `<base>_file`; at most one may be set.
    /// An unset or empty variable is an error unless `unsetEnvIsAbsent`; a named file must be readable.
    mutating func readSecret(_ section: YAMLSection, _ base: String, literal: Bool, unsetEnvIsAbsent: Bool = false) throws -> Secret? {
        let keys = (literal ? [base] : []) + ["\(base)_env", "\(base)_file"]
        let present = keys.filter { section.has($0) }
        if present.count > 1 {
            throw ConfigurationError(
                keyPath: section.path(present[1]),
                reason: "set only one of \(keys.joined(separator: ", ")); \(present.joined(separator: " and ")) are both set")
        }
        guard let key = present.first else { return nil }
        let keyPath = section.path(key)
        if key == base {
            guard let value = try section.string(key), !value.isEmpty else {
                throw ConfigurationError(keyPath: keyPath, reason: "must not be empty")
            }
            warnings.append("\(keyPath): a literal secret in the config file; prefer \(base)_env or \(base)_file")
            return Secret(value: value, origin: .literal)
        }
        if key.hasSuffix("_env") {
            let name = try section.nonEmptyString(key)!.trimmingWhitespace()
            guard !name.contains("="), !name.contains("\0") else {
                throw ConfigurationError(keyPath: keyPath, reason: "is not a valid environment variable name")
            }
            guard let value = environment[name], !value.isEmpty else {
                if unsetEnvIsAbsent { return nil }
                let state = environment[name] == nil ? "is not set" : "is empty"
                throw ConfigurationError(keyPath: keyPath, reason: "the environment variable \(name) \(state)")
            }
            return Secret(value: value, origin: .env(name))
        }
        let path = try pathValue(section, key)!
        return Secret(value: try readSecretFile(path, keyPath: keyPath), origin: .file(path))
    }

    /// The file's text without one trailing newline (LF or CRLF).
    func readSecretFile(_ path: String, keyPath: String) throws -> String {
        func fail(_ why: String) -> ConfigurationError {
            ConfigurationError(keyPath: keyPath, reason: "cannot read \(path): \(why)")
        }
        guard let kind = Paths.kind(of: path) else { throw fail("no such file") }
        guard kind != .folder else { throw fail("it is a folder") }
        var bytes: [UInt8]
        switch SmallFile.read(path, limit: 1 << 20) {
        case .success(let content): bytes = content
        case .failure(let failure) where failure.code == nil: throw fail("larger than 1MiB, too large for a secret")
        case .failure(let failure) where failure.call == "open": throw fail("permission denied or unreadable")
        case .failure: throw fail("read failed")
        }
        if bytes.last == 0x0A {
            bytes.removeLast()
            if bytes.last == 0x0D { bytes.removeLast() }
        }
        guard let text = String(bytes: bytes, encoding: .utf8) else { throw fail("not UTF-8 text") }
        guard !text.isEmpty else { throw ConfigurationError(keyPath: keyPath, reason: "the file \(path) is empty") }
        return text
    }

    // MARK: - Other sections

    mutating func parseUpstreamTLS(_ s: YAMLSection, upstream: UpstreamURL?) -> UpstreamTLSConfiguration {
        found.collect { try s.rejectUnknownKeys(Keys.sections["upstream_tls"]!) }
        var tls = UpstreamTLSConfiguration()
        tls.caFile = found.collect { try pathValue(s, "ca_file") }
        tls.clientCertFile = found.collect { try pathValue(s, "client_cert_file") }
        tls.clientKeyFile = found.collect { try privateKeyFile(s, "client_key_file", mustExist: false) }
        if tls.clientKeyFile != nil, tls.clientCertFile == nil, !s.has("client_cert_file") {
            found.record(ConfigurationError(keyPath: "upstream_tls.client_cert_file", reason: "required when client_key_file is set"))
        }
        tls.insecureSkipVerify = found.collect { try s.bool("insecure_skip_verify") } ?? false
        if tls.insecureSkipVerify {
            warnings.append("upstream_tls.insecure_skip_verify: the upstream's TLS certificate is not verified; use this only for tests")
        }
        if upstream?.scheme == "http", !s.presentKeys.isEmpty {
            warnings.append("upstream_tls: not used, the upstream is http")
        }
        return tls
    }

    mutating func parseAccess(_ s: YAMLSection) -> AccessConfiguration {
        found.collect { try s.rejectUnknownKeys(Keys.sections["access"]!) }
        var a = AccessConfiguration()
        let headerBefore = found.errors.count
        found.collect {
            guard let header = try s.nonEmptyString("require_header") else { return }
            guard header.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || "!#$%&'*+-.^_`|~".contains($0)) }) else {
                throw ConfigurationError(keyPath: "access.require_header", reason: "is not a valid header name")
            }
            a.requireHeader = header
        }
        a.requireValue = found.collect { try readSecret(s, "require_value", literal: true) }
        if found.errors.count == headerBefore {
            found.collect {
                if a.requireHeader != nil, a.requireValue == nil {
                    throw ConfigurationError(
                        keyPath: "access.require_header", reason: "needs require_value_env or require_value_file (the value clients must send)")
                }
                if a.requireHeader == nil, a.requireValue != nil {
                    throw ConfigurationError(keyPath: "access.require_header", reason: "required when a require_value is set (the header that carries it)")
                }
            }
        }
        found.collect {
            guard let paths = try s.stringList("allow_paths", example: "[/users/, /orders/]") else { return }
            for (index, path) in paths.enumerated() where !path.hasPrefix("/") {
                throw ConfigurationError(keyPath: "access.allow_paths[\(index)]", reason: "\"\(path)\" must start with /")
            }
            a.allowPaths = paths
        }
        found.collect {
            guard let methods = try s.stringList("allow_methods", example: "[GET, POST]") else { return }
            for (index, method) in methods.enumerated()
            where method.isEmpty || !method.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || "-_".contains($0)) }) {
                throw ConfigurationError(keyPath: "access.allow_methods[\(index)]", reason: "\"\(method)\" is not an HTTP method")
            }
            a.allowMethods = methods.map { $0.uppercased() }
        }
        found.collect {
            guard let hosts = try s.stringList("allow_hosts", example: "[localhost, 127.0.0.1]") else { return }
            for (index, host) in hosts.enumerated() where host.trimmingWhitespace().isEmpty {
                throw ConfigurationError(keyPath: "access.allow_hosts[\(index)]", reason: "must not be empty")
            }
            a.allowHosts = hosts.map { $0.lowercased() }
        }
        if let origins = found.collect({ try s.stringList("allow_origins", example: "[https://app.example.com]") }) { a.allowOrigins = origins }
        found.collect {
            guard let mode = try s.string("unix_mode") else { return }
            let digits = mode.trimmingWhitespace()
            guard !digits.isEmpty, digits.count <= 4, digits.allSatisfy({ ("0"..."7").contains($0) }), let value = UInt32(digits, radix: 8) else {
                throw ConfigurationError(keyPath: "access.unix_mode", reason: "\"\(mode)\" is not an octal file mode such as \"0660\"")
            }
            a.unixMode = value
        }
        return a
    }

    func parseForward(_ s: YAMLSection) -> ForwardConfiguration {
        found.collect { try s.rejectUnknownKeys(Keys.sections["forward"]!) }
        var f = ForwardConfiguration()
        if let value = found.collect({ try s.choice("client_authorization", ForwardConfiguration.ClientAuthorization.self) }) {
            f.clientAuthorization = value
        }
        if let value = found.collect({ try s.bool("preserve_host") }) { f.preserveHost = value }
        if let value = found.collect({ try s.size("retry_body_limit") }) { f.retryBodyLimit = value }
        if let value = found.collect({ try s.size("retry_memory") }) { f.retryMemory = value }
        if let value = found.collect({ try s.size("request_buffering") }) { f.requestBuffering = value }
        if let value = found.collect({ try s.size("request_buffering_disk") }) { f.requestBufferingDisk = value }
        // The disk takes over where memory stops: it means nothing below `request_buffering`.
        if f.requestBufferingDisk > 0 && f.requestBufferingDisk <= f.requestBuffering {
            found.record(ConfigurationError(keyPath: s.path("request_buffering_disk"), reason: "must be 0 or larger than forward.request_buffering"))
        } else if f.requestBufferingDisk > 0 && f.requestBuffering == 0 {
            found.record(ConfigurationError(keyPath: s.path("request_buffering_disk"), reason: "needs forward.request_buffering (the body is spooled beyond it)"))
        }
        return f
    }

    func parseLimits(_ s: YAMLSection) -> LimitsConfiguration {
        found.collect { try s.rejectUnknownKeys(Keys.sections["limits"]!) }
        var l = LimitsConfiguration()
        for key in Limits.keys {
            found.collect {
                switch key.value {
                case .size(let field, let minimum, _):
                    guard let value = try s.size(key.name) else { return }
                    guard value >= minimum else { throw ConfigurationError(keyPath: key.keyPath, reason: Self.atLeast(minimum)) }
                    l[keyPath: field] = value
                case .count(let field, let minimum, _):
                    guard let value = try s.int(key.name) else { return }
                    guard value >= minimum else { throw ConfigurationError(keyPath: key.keyPath, reason: Self.atLeast(minimum)) }
                    l[keyPath: field] = value
                case .duration(let field):
                    if let value = try positiveDuration(s, key.name) { l[keyPath: field] = value }
                }
            }
        }
        return l
    }

    /// The reason a number below `minimum` is refused.
    private static func atLeast(_ minimum: Int) -> String {
        minimum == 1 ? "must be 1 or more" : "must be \(minimum) or more"
    }

    func parseLog(_ s: YAMLSection) -> LogConfiguration {
        found.collect { try s.rejectUnknownKeys(Keys.sections["log"]!) }
        var l = LogConfiguration()
        if let value = found.collect({ try s.choice("level", LogConfiguration.Level.self) }) { l.level = value }
        if let value = found.collect({ try s.choice("format", LogConfiguration.Format.self) }) { l.format = value }
        if let value = found.collect({ try s.bool("access_log") }) { l.accessLog = value }
        return l
    }
}

extension ListenAddress {
    var tcpHost: String? {
        if case .tcp(let host, _) = self { return host }
        return nil
    }
}
