import Basics
import Glibc
import Redis
import TestSupport
import Testing

/// `RedisClient` and `RedisConnection` against a real redis-server on a free port.
@Suite("redis client, against a real redis-server", .serialized, .tags(.redis))
struct RedisClientTests {
    func configuration(_ redis: RedisServer) -> RedisClientConfiguration {
        RedisClientConfiguration(host: "127.0.0.1", port: redis.port, connectTimeout: 5, commandTimeout: 5)
    }

    @Test("commands and their replies: status, bulk, integer, array, null and error, binary-safe")
    func commandsAndReplies() throws {
        let redis = try RedisServer(persistent: false)
        defer { redis.stop() }
        let client = RedisClient(configuration: configuration(redis))
        #expect(try client.command(["PING"]) == .status("PONG"))
        #expect(try client.command(["SET", "k", "a\r\nb\u{0}c"]) == .status("OK"))
        #expect(try client.command(["GET", "k"]) == .string(Array("a\r\nb\u{0}c".utf8)))
        #expect(try client.command(["INCR", "n"]) == .integer(1))
        #expect(try client.command(["MGET", "n", "missing"]) == .array([.string(Array("1".utf8)), .null]))
        #expect(try client.command(["INCR", "k"]).errorKind == .other)
        #expect(try client.command(["HSET", "k", "f", "v"]).errorKind == .wrongType)
    }

    @Test("a script runs with its keys and arguments")
    func scripts() throws {
        let redis = try RedisServer(persistent: false)
        defer { redis.stop() }
        let client = RedisClient(configuration: configuration(redis))
        let script = RedisScript("redis.call('SET', KEYS[1], ARGV[1]) return {redis.call('GET', KEYS[1]), #KEYS, #ARGV}")
        #expect(try client.run(script, keys: ["a"], arguments: ["v", "w"]) == .array([.string(Array("v".utf8)), .integer(1), .integer(2)]))
    }

    @Test("every new connection authenticates as the ACL user and selects the database")
    func authenticationAndDatabase() throws {
        let redis = try RedisServer(persistent: false)
        defer { redis.stop() }
        _ = try redis.cli(["ACL", "SETUSER", "app", "on", ">secret", "~*", "+@all"])
        var settings = configuration(redis)
        settings.user = "app"
        settings.password = "secret"
        settings.database = 3
        let client = RedisClient(configuration: settings)
        #expect(try client.command(["ACL", "WHOAMI"]) == .string(Array("app".utf8)))
        #expect(try client.command(["SET", "in3", "x"]) == .status("OK"))
        #expect(try redis.cli(["-n", "3", "GET", "in3"]).contains("x"))
        #expect(try redis.cli(["-n", "0", "EXISTS", "in3"]).contains("0"))
        settings.password = "wrong"
        #expect(throws: RedisConnectionError.self) { try RedisClient(configuration: settings).command(["PING"]) }
    }

    @Test("a server that went away is reached again at the next command after it is back")
    func reconnectsAfterARestart() throws {
        let redis = try RedisServer(persistent: false)
        defer { redis.stop() }
        let client = RedisClient(configuration: configuration(redis))
        #expect(try client.command(["SET", "k", "v"]) == .status("OK"))
        redis.kill()
        #expect(throws: RedisConnectionError.self) { try client.command(["GET", "k"]) }
        try redis.restart()
        #expect(try client.command(["PING"]) == .status("PONG"))
    }

    @Test("without replicas, a replica wait says none confirmed; without a connection it says nothing")
    func replicaWaits() throws {
        let redis = try RedisServer(persistent: false)
        defer { redis.stop() }
        let client = RedisClient(configuration: configuration(redis))
        #expect(client.waitForReplicas(1, milliseconds: 10) == nil)
        #expect(try client.command(["SET", "k", "v"]) == .status("OK"))
        #expect(client.waitForReplicas(1, milliseconds: 10) == 0)
    }

    @Test("a subscription's messages are read without waiting")
    func pendingMessages() throws {
        let redis = try RedisServer(persistent: false)
        defer { redis.stop() }
        let client = RedisClient(configuration: configuration(redis))
        let subscriber = try client.connect()
        guard case .array = try subscriber.command(["SUBSCRIBE", "news"]) else {
            Issue.record("SUBSCRIBE refused")
            return
        }
        #expect(try subscriber.pendingReplies().isEmpty)
        #expect(try client.command(["PUBLISH", "news", "7"]) == .integer(1))
        var payloads: [RedisValue] = []
        #expect(
            waitUntil(timeout: 20) {
                payloads += ((try? subscriber.pendingReplies()) ?? []).compactMap { $0.publishedMessage?.payload }
                return !payloads.isEmpty
            })
        #expect(payloads == [.string(Array("7".utf8))])
    }
}

/// Polls `condition` until it holds or `timeout` seconds have passed (generous: a busy machine).
private func waitUntil(timeout: Double, _ condition: () -> Bool) -> Bool {
    let deadline = ContinuousClock.now + .seconds(timeout)
    while ContinuousClock.now < deadline {
        if condition() { return true }
        usleep(20_000)
    }
    return condition()
}
