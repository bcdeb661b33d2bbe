import Foundation
import Redis
import TestSupport
import Testing

@testable import Credentials

/// `RedisConnection`'s TLS transport (`rediss://`) against a real redis-server that speaks TLS only.
/// The change channel reads pub/sub messages without waiting; over TLS, bytes that libcurl's TLS
/// session has already taken off the socket are invisible to poll(2), so every message of a burst
/// must still come out of `pendingReplies()` with no further byte arriving.
@Suite("redis connection over TLS", .serialized, .tags(.redis))
struct RedisTLSConnectionTests {
    let dir: TempDir
    let redis: RedisServer
    let tls: RedisTLS

    init() throws {
        dir = try TempDir(prefix: "tokenproxy-redis-tls")
        _ = try dir.write("san.cnf", "subjectAltName=IP:127.0.0.1\n")
        let steps: [[String]] = [
            [
                "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-days", "2",
                "-subj", "/CN=tokenproxy test CA", "-keyout", dir.file("ca.key"), "-out", dir.file("ca.pem"),
            ],
            [
                "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-subj", "/CN=127.0.0.1",
                "-keyout", dir.file("server.key"), "-out", dir.file("server.csr"),
            ],
            [
                "x509", "-req", "-in", dir.file("server.csr"), "-CA", dir.file("ca.pem"), "-CAkey", dir.file("ca.key"),
                "-CAcreateserial", "-days", "2", "-extfile", dir.file("san.cnf"), "-out", dir.file("server.pem"),
            ],
        ]
        for step in steps {
            let result = try runCommand("/usr/bin/openssl", arguments: step, timeout: 30)
            guard result.status == 0 else { throw HarnessError("openssl \(step[0]): \(result.output)") }
        }
        redis = try RedisServer(
            persistent: false,
            tls: .init(certFile: dir.file("server.pem"), keyFile: dir.file("server.key"), caFile: dir.file("ca.pem")))
        tls = RedisTLS(caFile: dir.file("ca.pem"))
    }

    func connect() throws -> RedisConnection {
        try RedisConnection(host: "127.0.0.1", port: redis.port, connectTimeout: 5, commandTimeout: 5, tls: tls)
    }

    @Test("a burst of pub/sub messages, small and larger than a TLS record, is read whole without waiting")
    func aBurstOfMessagesIsReadWhole() throws {
        defer {
            redis.stop()
            dir.remove()
        }
        let subscriber = try connect()
        guard case .array = try subscriber.command(["SUBSCRIBE", "burst"]) else {
            Issue.record("SUBSCRIBE refused")
            return
        }
        #expect(try subscriber.pendingReplies().isEmpty)
        let publisher = try connect()
        // One script publishes them all, so they leave the server together: 500 small messages, then
        // one of 40 000 bytes, which spans three TLS records (at most 16 KiB each, RFC 8446 §5.1).
        let script = "for i = 1, 500 do redis.call('PUBLISH', 'burst', i) end redis.call('PUBLISH', 'burst', string.rep('x', 40000)) return 1"
        #expect(try publisher.command(["EVAL", script, "0"]) == .integer(1))
        var numbers: [Int64] = []
        var large: [UInt8] = []
        #expect(
            eventually(timeout: 20) {
                for reply in (try? subscriber.pendingReplies()) ?? [] {
                    guard case .array(let parts) = reply, parts.count == 3, case .string(let payload) = parts[2] else { continue }
                    if let number = RedisReplies.announcedGeneration(reply, channel: "burst") { numbers.append(number) } else { large = payload }
                }
                return large.count == 40000
            })
        #expect(numbers == Array(1...500))
        #expect(large == Array(repeating: UInt8(ascii: "x"), count: 40000))
        // Nothing more came, and the connection still answers.
        #expect(try subscriber.pendingReplies().isEmpty)
        #expect(try publisher.command(["PING"]) == .status("PONG"))
    }
}
