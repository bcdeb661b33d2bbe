import Foundation
import TestSupport
import Testing

@testable import Config

@Suite("store: file and redis keys")
struct StoreConfigurationTests {
    let redisEnvironment = minimalEnvironment.merging(["REDIS_PASSWORD": "redis-password-value"]) { $1 }

    /// Issue 33: the store's encryption keys, and every way they can be wrong, named by key.
    @Test("encryption keys are 32 bytes of base64, from the environment or 0600 files; each mistake names its key")
    func encryptionKeys() throws {
        let a = Data((0..<32).map { UInt8($0) }).base64EncodedString()
        let b = Data((0..<32).map { UInt8(255 - $0) }).base64EncodedString()
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        try folder.write("old.keys", "\(b)\n\n")
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: folder.path + "/old.keys")
        var environment = minimalEnvironment
        environment["STORE_KEY"] = a
        let loaded = try parse(
            minimalYAML + "\nstore: {encryption_key_env: STORE_KEY, encryption_previous_keys_file: ./old.keys}", base: folder.path, environment: environment)
        let encryption = try #require(loaded.configuration.store.encryption)
        #expect(encryption.current == (0..<32).map { UInt8($0) })
        #expect(encryption.previous == [(0..<32).map { UInt8(255 - $0) }])
        #expect(!loaded.configuration.resolvedDescription().contains(a))
        for (store, env, key, reason) in [
            ("{encryption_key_env: STORE_KEY}", "not base64!", "store.encryption_key_env", "not base64"),
            ("{encryption_key_env: STORE_KEY}", Data([1, 2, 3]).base64EncodedString(), "store.encryption_key_env", "holds 3 bytes"),
            ("{encryption_key_env: STORE_KEY, encryption_key_file: ./old.keys}", a, "store.encryption_key_file", "set only one of"),
            ("{encryption_previous_keys_file: ./old.keys}", a, "store.encryption_previous_keys_file", "needs store.encryption_key_env"),
            ("{encryption_key_env: NOT_SET}", a, "store.encryption_key_env", "is not set"),
        ] {
            environment["STORE_KEY"] = env
            let error = try #require(parseError(minimalYAML + "\nstore: \(store)", base: folder.path, environment: environment), "\(store)")
            #expect(error.all.contains { $0.keyPath == key && $0.reason.contains(reason) }, "\(store): \(error)")
        }
        try FileManager.default.setAttributes([.posixPermissions: 0o644], ofItemAtPath: folder.path + "/old.keys")
        environment["STORE_KEY"] = a
        let open = try #require(
            parseError(
                minimalYAML + "\nstore: {encryption_key_env: STORE_KEY, encryption_previous_keys_file: ./old.keys}", base: folder.path, environment: environment
            ))
        #expect(open.all.contains { $0.keyPath == "store.encryption_previous_keys_file" && $0.reason.contains("others may read it") })
    }

    @Test("store.sentinel: the master, the sentinels' addresses and their password; each mistake names its key")
    func sentinel() throws {
        var environment = minimalEnvironment
        environment["SENTINEL_PW"] = "sentinel-password-value"
        let loaded = try parse(
            minimalYAML
                + "\nstore: {backend: redis, url: \"redis://ignored/2\", sentinel: {master: tokens, addresses: [10.0.0.1:26379, \"[::1]:26380\"], password_env: SENTINEL_PW}}",
            environment: environment)
        let sentinel = try #require(loaded.configuration.store.redis?.sentinel)
        #expect(sentinel.master == "tokens")
        #expect(sentinel.addresses == [.init(host: "10.0.0.1", port: 26379), .init(host: "::1", port: 26380)])
        #expect(sentinel.password == Secret(value: "sentinel-password-value", origin: .env("SENTINEL_PW")))
        let shown = loaded.configuration.resolvedDescription()
        #expect(shown.contains("store.sentinel.addresses: "), "\(shown)")
        #expect(!shown.contains("sentinel-password-value"))
        for (sentinel, key) in [
            ("{addresses: [h:1]}", "store.sentinel.master"),
            ("{master: m}", "store.sentinel.addresses"),
            ("{master: m, addresses: [h]}", "store.sentinel.addresses"),
            ("{master: m, addresses: [h:99999]}", "store.sentinel.addresses"),
            ("{master: m, addresses: [h:1], port: 2}", "store.sentinel.port"),
        ] {
            let error = try #require(parseError(minimalYAML + "\nstore: {backend: redis, url: \"redis://h\", sentinel: \(sentinel)}"), "\(sentinel)")
            #expect(error.all.contains { $0.keyPath == key }, "\(sentinel): \(error)")
        }
    }

    @Test("store.client_cert_file and client_key_file: both or neither, the key readable by its owner only, both watched for a reload")
    func clientCertificate() throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        try folder.write("client.pem", "certificate")
        try folder.write("client.key", "key")
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: folder.path + "/client.key")
        let store = "\nstore: {backend: redis, url: \"rediss://h\", client_cert_file: ./client.pem, client_key_file: ./client.key}"
        let loaded = try parse(minimalYAML + store, base: folder.path, environment: minimalEnvironment)
        let redis = try #require(loaded.configuration.store.redis)
        #expect(redis.clientCertFile?.hasSuffix("/client.pem") == true && redis.clientKeyFile?.hasSuffix("/client.key") == true)
        #expect(loaded.configuration.watchedFiles.contains(try #require(redis.clientKeyFile)))
        #expect(loaded.configuration.watchedFiles.contains(try #require(redis.clientCertFile)))
        let half = try #require(
            parseError(
                minimalYAML + "\nstore: {backend: redis, url: \"rediss://h\", client_key_file: ./client.key}", base: folder.path,
                environment: minimalEnvironment))
        #expect(half.all.contains { $0.keyPath == "store.client_cert_file" }, "\(half)")
        try FileManager.default.setAttributes([.posixPermissions: 0o640], ofItemAtPath: folder.path + "/client.key")
        try giveToNonRootOwner(folder.path + "/client.key")
        let open = try #require(parseError(minimalYAML + store, base: folder.path, environment: minimalEnvironment))
        #expect(open.all.contains { $0.keyPath == "store.client_key_file" && $0.reason.contains("its group may read it") }, "\(open)")
    }

    @Test("a redis store resolves its URL, key, password from the environment and timeouts")
    func redisStoreResolves() throws {
        let loaded = try parse(
            minimalYAML + """

                store:
                  backend: redis
                  url: redis://fleet@Redis.Internal:6380/3
                  key: tokenproxy/orders-api
                  password_env: REDIS_PASSWORD
                  connect_timeout: 500ms
                  command_timeout: 1s
                  lease_time: 20s
                """, environment: redisEnvironment)
        let store = loaded.configuration.store
        #expect(store.backend == .redis)
        let redis = try #require(store.redis)
        #expect(redis.host == "redis.internal")
        #expect(redis.port == 6380)
        #expect(redis.database == 3)
        #expect(redis.user == "fleet")
        #expect(redis.tls == false)
        #expect(redis.key == "tokenproxy/orders-api")
        #expect(redis.password == Secret(value: "redis-password-value", origin: .env("REDIS_PASSWORD")))
        #expect(redis.connectTimeout == 0.5)
        #expect(redis.commandTimeout == 1)
        #expect(redis.leaseTime == 20)
        #expect(loaded.warnings.isEmpty)
        let shown = loaded.configuration.resolvedDescription()
        #expect(shown.contains("store.backend: redis"))
        #expect(shown.contains("store.password: ****** (from env REDIS_PASSWORD)"))
        #expect(!shown.contains("redis-password-value"))
    }

    @Test("defaults: port 6379, database 0, key tokenproxy, 2 s timeouts, 40 s lease; the file store stays the default")
    func defaults() throws {
        let redis = try #require(try parse(minimalYAML + "\nstore: {backend: redis, url: \"redis://127.0.0.1\"}").configuration.store.redis)
        #expect(redis.port == 6379 && redis.database == 0 && redis.key == "tokenproxy" && redis.user == nil)
        #expect(redis.connectTimeout == 2 && redis.commandTimeout == 2 && redis.leaseTime == 40)
        let file = try parse(minimalYAML).configuration.store
        #expect(file.backend == .file && file.redis == nil)
    }

    @Test("a password inside store.url is an error naming the key and the way out")
    func inlinePasswordIsAnError() throws {
        let error = try #require(parseError(minimalYAML + "\nstore: {backend: redis, url: \"redis://user:hunter2@127.0.0.1:6379/0\"}"))
        #expect(error.keyPath == "store.url")
        #expect(error.reason.contains("password_env"))
        #expect(!error.description.contains("hunter2"))
    }

    @Test("bad URLs, a missing URL and bad values name their key")
    func badValues() throws {
        let cases: [(String, String)] = [
            ("store: {backend: redis}", "store.url"),
            ("store: {backend: redis, url: \"http://127.0.0.1\"}", "store.url"),
            ("store: {backend: redis, url: \"redis://127.0.0.1:99999\"}", "store.url"),
            ("store: {backend: redis, url: \"redis://127.0.0.1/x\"}", "store.url"),
            ("store: {backend: redis, url: \"redis://127.0.0.1/0?password=x\"}", "store.url"),
            ("store: {backend: redis, url: \"redis://:6379\"}", "store.url"),
            ("store: {backend: memcached}", "store.backend"),
            ("store: {backend: redis, url: \"redis://h\", key: \"two words\"}", "store.key"),
            ("store: {backend: redis, url: \"redis://h\", lease_time: 10ms}", "store.lease_time"),
            ("store: {backend: redis, url: \"redis://h\", command_timeout: 0s}", "store.command_timeout"),
            ("store: {backend: redis, url: \"redis://h\", password_env: UNSET_VARIABLE_X}", "store.password_env"),
            ("store: {backend: redis, url: \"redis://h\", passwrd_env: X}", "store.passwrd_env"),
        ]
        for (yaml, key) in cases {
            let error = parseError(minimalYAML + "\n" + yaml)
            #expect(error?.keyPath == key, "\(yaml): \(String(describing: error))")
        }
    }

    @Test("IPv6 hosts, rediss:// and a percent-encoded user parse")
    func urlForms() throws {
        #expect(try RedisURL.parse("redis://[::1]:7000/2") == RedisURL(tls: false, host: "::1", port: 7000, database: 2, user: nil))
        #expect(try RedisURL.parse("REDISS://us%40er@h") == RedisURL(tls: true, host: "h", port: 6379, database: 0, user: "us@er"))
        #expect(try RedisURL.parse("redis://h/") == RedisURL(tls: false, host: "h", port: 6379, database: 0, user: nil))
    }

    @Test("redis keys with the file backend, and path with redis, are warnings")
    func unusedKeysWarn() throws {
        let file = try parse(minimalYAML + "\nstore: {path: ./s.json, key: x}")
        #expect(file.warnings == ["store.key: used only with store.backend: redis; ignored"])
        let redis = try parse(minimalYAML + "\nstore: {backend: redis, url: \"redis://h\", path: ./s.json}")
        #expect(
            redis.warnings == [
                "store.path: the session is not kept there with store.backend: redis; only its folder is used, for a forward_proxy CA made at the first start"
            ])
    }
}
