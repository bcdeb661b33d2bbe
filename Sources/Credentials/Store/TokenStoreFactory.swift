import Basics
import Config
import Logging
internal import Redis

/// The session store that `store.backend` names: the one place a store is built from configuration.
public func makeTokenStore(_ configuration: StoreConfiguration, logger: Logger) throws -> (store: any TokenStore, metrics: StoreMetrics) {
    let seal = configuration.encryption.map { SessionSeal($0, binding: SessionSeal.Binding(configuration)) }
    switch configuration.backend {
    case .file:
        return (FileTokenStore(path: configuration.path, logger: logger, seal: seal), StoreMetrics(backend: "file"))
    case .redis:
        guard let redis = configuration.redis else {
            throw ConfigurationError(keyPath: "store.url", reason: "required with store.backend: redis")
        }
        let metrics = StoreMetrics(backend: "redis")
        return (try RedisTokenStore(configuration: redis, logger: logger, metrics: metrics, seal: seal), metrics)
    }
}

/// Where the session is kept, for messages (`login`): a file's path or the Redis key.
public func storeLocation(_ configuration: StoreConfiguration) -> String {
    guard configuration.backend == .redis, let redis = configuration.redis else { return configuration.path }
    return redis.location
}

extension RedisStoreConfiguration {
    /// Where the session lives, for messages (`redis <server> db <n>, key <P>`), without a secret.
    var location: String { "redis \(server) db \(database), key \(key)" }
}

extension RedisClientConfiguration {
    /// How the Redis store reaches its server (`store.url`, its password, TLS files and sentinels).
    init(_ store: RedisStoreConfiguration) {
        self.init(host: store.host, port: store.port, connectTimeout: store.connectTimeout, commandTimeout: store.commandTimeout)
        database = store.database
        user = store.user
        password = store.password?.value
        // `rediss://`: TLS to the primary and to the sentinels alike, with the same files.
        if store.tls { tls = RedisTLS(caFile: store.caFile, clientCertFile: store.clientCertFile, clientKeyFile: store.clientKeyFile) }
        sentinels = store.sentinel.map { sentinel in
            RedisSentinels(
                master: sentinel.master, addresses: sentinel.addresses.map { Authority(host: $0.host, port: $0.port) },
                password: sentinel.password?.value)
        }
    }
}
