import Basics
import FoundationEssentials
import Sockets

/// `store.backend: redis`: where the fleet's shared session lives (docs/FLEET.md).
public struct RedisStoreConfiguration: Sendable, Equatable {
    /// `store.url` as written (it never holds a password: one there is a configuration error).
    public var url: String
    /// `rediss://`: TLS to the server.
    public var tls: Bool
    /// A name or an IP literal (IPv6 without brackets).
    public var host: String
    public var port: Int
    /// The database number (`SELECT`), from the URL's path; 0 when absent.
    public var database: Int
    /// The ACL user (Redis 6 and later), from the URL's user info; nil: the default user.
    public var user: String?
    /// `store.password_env` / `store.password_file`.
    public var password: Secret?
    /// `store.key`: the prefix of this session's keys and channel, so that one Redis holds many sessions.
    public var key: String
    /// `store.ca_file`: the CA bundle that verifies a `rediss://` server.
    public var caFile: String?
    /// `store.client_cert_file` / `store.client_key_file`: a client certificate for a `rediss://`
    /// server with `tls-auth-clients yes`.
    public var clientCertFile: String? = nil
    public var clientKeyFile: String? = nil
    /// `store.sentinel`: the primary is found through Redis Sentinel; `host` and `port` are then unused.
    public var sentinel: RedisSentinelConfiguration? = nil
    public var connectTimeout: Double
    public var commandTimeout: Double
    /// `store.lease_time`: how long one refresh may hold the fleet's refresh lease; a holder that dies
    /// costs at most this long. Keep it above the identity provider's call timeout (30 s).
    public var leaseTime: Double

    public static let defaultPort = URLScheme.redis.defaultPort
    public static let defaultKey = "tokenproxy"
    public static let defaultConnectTimeout = 2.0
    public static let defaultCommandTimeout = 2.0
    public static let defaultLeaseTime = 40.0

    public init(
        url: String, tls: Bool, host: String, port: Int, database: Int = 0, user: String? = nil, password: Secret? = nil,
        key: String = RedisStoreConfiguration.defaultKey, caFile: String? = nil,
        connectTimeout: Double = RedisStoreConfiguration.defaultConnectTimeout,
        commandTimeout: Double = RedisStoreConfiguration.defaultCommandTimeout,
        leaseTime: Double = RedisStoreConfiguration.defaultLeaseTime
    ) {
        self.url = url
        self.tls = tls
        self.host = host
        self.port = port
        self.database = database
        self.user = user
        self.password = password
        self.key = key
        self.caFile = caFile
        self.connectTimeout = connectTimeout
        self.commandTimeout = commandTimeout
        self.leaseTime = leaseTime
    }

    /// `host:port` for logs (`[::1]:6379` for IPv6).
    public var endpoint: String { Authority(host: host, port: port).description }

    /// The server for messages: `endpoint`, or with `sentinel` the primary's name (the URL's host is
    /// not used then).
    public var server: String { sentinel.map { "primary \($0.master) (through sentinels)" } ?? endpoint }
}

/// `store.sentinel` (CONTRACT.md "The fleet store in production"): the monitored master's name and
/// the sentinels to ask for its address, in turn.
public struct RedisSentinelConfiguration: Sendable, Equatable {
    public var master: String
    /// Host (IPv6 without brackets) and port of each sentinel.
    public var addresses: [Address]
    /// `store.sentinel.password_env` / `password_file`: the sentinels' own password (`requirepass`).
    public var password: Secret?

    public struct Address: Sendable, Equatable {
        public var host: String
        public var port: Int
        public init(host: String, port: Int) {
            self.host = host
            self.port = port
        }
    }

    public init(master: String, addresses: [Address], password: Secret? = nil) {
        self.master = master
        self.addresses = addresses
        self.password = password
    }
}

/// The parts of a `redis://` or `rediss://` URL (the scheme's IANA registration: `redis://[user[:password]@]host[:port][/db]`).
/// Pure, so that every rule is unit-tested.
public struct RedisURL: Sendable, Equatable {
    public var tls: Bool
    public var host: String
    public var port: Int
    public var database: Int
    public var user: String?

    /// Why a URL was refused, worded to follow `store.url: `.
    public struct Problem: Error, Sendable, Equatable {
        public var reason: String
    }

    public static func parse(_ raw: String) throws(Problem) -> RedisURL {
        let text = raw.trimmingWhitespace()
        guard !text.unicodeScalars.contains(where: { $0.value < 0x21 || $0.value == 0x7f }) else {
            throw Problem(reason: "contains spaces or control characters")
        }
        guard let split = URLScheme.split(text[...]), let scheme = URLScheme(split.scheme), scheme == .redis || scheme == .rediss else {
            throw Problem(reason: "must start with redis:// or rediss:// (TLS), e.g. redis://127.0.0.1:6379/0")
        }
        let rest = split.rest
        guard !rest.contains("?"), !rest.contains("#") else {
            throw Problem(reason: "takes no query or fragment; the password goes in store.password_env or store.password_file")
        }
        let authorityEnd = rest.firstIndex(of: "/") ?? rest.endIndex
        var authority = rest[..<authorityEnd]
        let path = rest[authorityEnd...]
        var user: String? = nil
        if let at = authority.lastIndex(of: "@") {
            let info = authority[..<at]
            authority = authority[authority.index(after: at)...]
            if info.contains(":") {
                throw Problem(
                    reason: "holds a password; a password in the configuration file would be readable by whoever reads the file: "
                        + "use store.password_env or store.password_file (the URL may keep the user name)")
            }
            guard let decoded = percentDecoded(info), !decoded.isEmpty else { throw Problem(reason: "has an empty or badly escaped user name") }
            user = decoded
        }
        let parts: Authority.Parts
        do {
            parts = try Authority.parts(of: authority, port: .init(required: false))
        } catch {
            switch error {
            case .unclosedBracket: throw Problem(reason: "has an unclosed [ in its host")
            case .textAfterBracket: throw Problem(reason: "has text after its IPv6 host")
            case .notIPv6InBrackets: throw Problem(reason: "has brackets around a host that is no IPv6 address")
            case .ipv6WithoutBrackets: throw Problem(reason: "has an IPv6 host without brackets, e.g. redis://[::1]:6379/0")
            case .noHost: throw Problem(reason: "has no host, e.g. redis://127.0.0.1:6379/0")
            case .badPort, .missingPort, .hostByte: throw Problem(reason: "has a port that is not a number from 1 to 65535")
            }
        }
        var database = 0
        let dbText = path.drop { $0 == "/" }
        if !dbText.isEmpty {
            guard let value = Int(dbText), value >= 0, dbText.allSatisfy({ $0.isASCII && $0.isNumber }) else {
                throw Problem(reason: "has a path that is not a database number (redis://host:6379/0)")
            }
            database = value
        }
        return RedisURL(tls: scheme.isTLS, host: parts.host, port: parts.port ?? scheme.defaultPort, database: database, user: user)
    }
}

extension Keys {
    static let store = [
        "path", "backend", "url", "key", "password_env", "password_file", "ca_file", "connect_timeout", "command_timeout",
        "lease_time", "encryption_key_env", "encryption_key_file", "encryption_previous_keys_file", "client_cert_file", "client_key_file",
        "sentinel",
    ]
    static let sentinel = ["master", "addresses", "password_env", "password_file"]
    static let redisOnlyStore = [
        "url", "key", "password_env", "password_file", "ca_file", "client_cert_file", "client_key_file", "connect_timeout", "command_timeout",
        "lease_time", "sentinel",
    ]
}

extension StoreConfiguration {
    /// `store:` (CONTRACT.md): the file store's `path`, or a Redis server's keys.
    static func parse(_ store: YAMLSection?, in load: LoadContext) throws -> StoreConfiguration {
        var configuration = StoreConfiguration(path: load.resolve("./state/tokens.json"))
        guard let store else { return configuration }
        try store.rejectUnknownKeys(Keys.store)
        if let path = try load.pathValue(store, "path") { configuration.path = path }
        configuration.backend = try store.choice("backend", StoreConfiguration.Backend.self) ?? .file
        switch configuration.backend {
        case .file:
            for key in Keys.redisOnlyStore where store.has(key) {
                load.warnings.append("\(store.path(key)): used only with store.backend: redis; ignored")
            }
        case .redis:
            if store.has("path") {
                load.warnings.append(
                    "\(store.path("path")): the session is not kept there with store.backend: redis; only its folder is used, for a forward_proxy CA made at the first start"
                )
            }
            guard let raw = try store.nonEmptyString("url") else {
                throw ConfigurationError(keyPath: store.path("url"), reason: "required with store.backend: redis (e.g. redis://127.0.0.1:6379/0)")
            }
            let url: RedisURL
            do {
                url = try RedisURL.parse(raw)
            } catch let problem {
                throw ConfigurationError(keyPath: store.path("url"), reason: problem.reason)
            }
            var redis = RedisStoreConfiguration(
                url: raw.trimmingWhitespace(), tls: url.tls, host: url.host, port: url.port, database: url.database, user: url.user)
            redis.password = try load.readSecret(store, "password", literal: false)
            if let key = try store.nonEmptyString("key") {
                guard key.unicodeScalars.allSatisfy({ $0.value > 0x20 && $0.value != 0x7f }), key.utf8.count <= 512 else {
                    throw ConfigurationError(keyPath: store.path("key"), reason: "must be printable, without spaces, at most 512 bytes")
                }
                redis.key = key
            }
            redis.caFile = try load.laterFile(store, "ca_file")
            if let caFile = redis.caFile {
                if !url.tls { load.warnings.append("\(store.path("ca_file")): used only with a rediss:// URL; ignored") }
                guard Paths.kind(of: caFile) == .other else {
                    throw ConfigurationError(keyPath: store.path("ca_file"), reason: "no such file: \(caFile)")
                }
            }
            redis.clientCertFile = try load.existingFile(store, "client_cert_file")
            redis.clientKeyFile = try load.privateKeyFile(store, "client_key_file")
            if (redis.clientCertFile == nil) != (redis.clientKeyFile == nil) {
                let missing = redis.clientCertFile == nil ? "client_cert_file" : "client_key_file"
                throw ConfigurationError(keyPath: store.path(missing), reason: "required with the other half of the client certificate")
            }
            if redis.clientCertFile != nil && !url.tls {
                load.warnings.append("\(store.path("client_cert_file")): used only with a rediss:// URL; ignored")
            }
            redis.sentinel = try RedisSentinelConfiguration.parse(store, in: load)
            if let value = try load.positiveDuration(store, "connect_timeout") { redis.connectTimeout = value }
            if let value = try load.positiveDuration(store, "command_timeout") { redis.commandTimeout = value }
            if let value = try load.positiveDuration(store, "lease_time") {
                guard value >= 0.1 else { throw ConfigurationError(keyPath: store.path("lease_time"), reason: "must be at least 100ms") }
                redis.leaseTime = value
            }
            configuration.redis = redis
        }
        configuration.encryption = try StoreEncryption.parse(store, in: load)
        return configuration
    }
}

extension RedisSentinelConfiguration {
    /// `store.sentinel`: `master`, `addresses` (`host:port`, IPv6 in brackets), an optional password.
    static func parse(_ store: YAMLSection, in load: LoadContext) throws -> RedisSentinelConfiguration? {
        guard let section = try store.section("sentinel") else { return nil }
        try section.rejectUnknownKeys(Keys.sentinel)
        guard let master = try section.nonEmptyString("master") else {
            throw ConfigurationError(keyPath: section.path("master"), reason: "required: the name the sentinels monitor the primary by")
        }
        guard let listed = try section.stringList("addresses", example: "[10.0.0.1:26379, 10.0.0.2:26379]"), !listed.isEmpty else {
            throw ConfigurationError(keyPath: section.path("addresses"), reason: "required: one sentinel or more, as host:port")
        }
        var addresses: [RedisSentinelConfiguration.Address] = []
        for text in listed {
            guard let parts = try? Authority.parts(of: text, port: .init(required: true)), !parts.host.contains(" ") else {
                throw ConfigurationError(keyPath: section.path("addresses"), reason: "\(text) is not host:port")
            }
            addresses.append(.init(host: parts.host, port: parts.port ?? RedisStoreConfiguration.defaultPort))
        }
        return RedisSentinelConfiguration(master: master, addresses: addresses, password: try load.readSecret(section, "password", literal: false))
    }
}

extension StoreEncryption {
    /// `store.encryption_key_env` / `_file` and `store.encryption_previous_keys_file`: base64 of 32
    /// bytes each (AES-256); a key file readable by group or others is refused like other keys.
    static func parse(_ store: YAMLSection, in load: LoadContext) throws -> StoreEncryption? {
        if store.has("encryption_key_file") { _ = try load.privateKeyFile(store, "encryption_key_file") }
        guard let secret = try load.readSecret(store, "encryption_key", literal: false) else {
            if store.has("encryption_previous_keys_file") {
                throw ConfigurationError(
                    keyPath: store.path("encryption_previous_keys_file"), reason: "needs store.encryption_key_env or encryption_key_file (the current key)")
            }
            return nil
        }
        let keyPath = store.path(store.has("encryption_key_env") ? "encryption_key_env" : "encryption_key_file")
        var encryption = StoreEncryption(current: try Self.key(secret.value, keyPath: keyPath))
        if let path = try load.privateKeyFile(store, "encryption_previous_keys_file") {
            let keyPath = store.path("encryption_previous_keys_file")
            let text = try load.readSecretFile(path, keyPath: keyPath)
            for (number, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
                let key = String(line).trimmingWhitespace()
                if key.isEmpty { continue }
                encryption.previous.append(try Self.key(key, keyPath: "\(keyPath) (line \(number + 1))"))
            }
        }
        return encryption
    }

    /// The 32 bytes a base64 key stands for (its value is never in the message).
    static func key(_ text: String, keyPath: String) throws -> [UInt8] {
        guard let data = Data(base64Encoded: text.trimmingWhitespace()) else {
            throw ConfigurationError(keyPath: keyPath, reason: "is not base64 (make one with: openssl rand -base64 32)")
        }
        guard data.count == 32 else {
            throw ConfigurationError(keyPath: keyPath, reason: "holds \(data.count) bytes; an AES-256 key is 32 (openssl rand -base64 32)")
        }
        return Array(data)
    }
}
