import Config
import Foundation
import TestSupport
import Testing

@testable import Credentials

/// `SessionTokenSource` on `RedisTokenStore` against a real `redis-server` that loses its data (no
/// persistence): the session a process holds goes back into the store, with no call to the
/// identity provider; a logout's record is never overwritten. Each source stands for one process.
@Suite("redis store: a session the store lost is written back", .serialized, .tags(.redis))
struct RedisWriteBackTests {
    let redis: RedisServer
    let key = "writeback/\(UUID().uuidString.lowercased())"
    let capture = LogCapture()

    init() throws {
        redis = try RedisServer(persistent: false)
    }

    func source(_ provider: FakeProvider) throws -> SessionTokenSource {
        let configuration = RedisStoreConfiguration(
            url: redis.url, tls: false, host: "127.0.0.1", port: redis.port, key: key, connectTimeout: 1, commandTimeout: 1,
            leaseTime: 5)
        return SessionTokenSource(
            provider: provider, store: try RedisTokenStore(configuration: configuration, logger: capture.logger()),
            defaultLifetime: 3600, refreshMargin: 300, logger: capture.logger())
    }

    /// The first fetch after a restart may still meet the connection the old server closed (it fails
    /// for a passing reason, as the token manager's next try would not): tries again for a while.
    func fetchAfterRestart(_ source: SessionTokenSource) throws -> IssuedToken {
        let deadline = Date().addingTimeInterval(10)
        while true {
            do {
                return try source.fetch(current: nil)
            } catch TokenSourceError.passing(let reason, _) where Date() < deadline && reason.contains("unavailable") {
                usleep(50_000)
            }
        }
    }

    func storedAccessToken() throws -> String? {
        let text = try redis.cli(["--raw", "HGET", key + ":session", "session"])
        let object = (try? JSONSerialization.jsonObject(with: Data(text.utf8))) as? [String: Any]
        return object?["access_token"] as? String
    }

    @Test("a Redis restarted empty gets back the session a process holds; another process then reads it; no identity-provider call")
    func emptiedStoreGetsTheSessionBack() throws {
        let provider = FakeProvider()
        provider.answers = [.success(IssuedToken(accessToken: "access-login", refreshToken: "refresh-login", expiresIn: 600))]
        _ = try source(provider).login(.password(username: "alice", password: "pw-123456"), prompt: { _ in })
        let serving = try source(FakeProvider())
        #expect(try serving.fetch(current: nil).accessToken == "access-login")

        try redis.restart()
        #expect(try storedAccessToken() == nil)
        let again = try fetchAfterRestart(serving)
        #expect(again.accessToken == "access-login" && again.fromStore)
        #expect(try storedAccessToken() == "access-login")
        #expect(capture.lines.contains { $0.level == .warning && $0.message.contains("wrote its session back") })
        // Another process (one that never held the session) reads it from the store.
        let newcomer = FakeProvider()
        #expect(try source(newcomer).fetch(current: nil).accessToken == "access-login")
        #expect(provider.calls == 1 && newcomer.calls == 0)

        // A logout leaves its record: the holder ends the session instead of writing it back.
        #expect(try source(FakeProvider()).logout() == nil)
        #expect(throws: TokenSourceError.self) { try serving.fetch(current: nil) }
        #expect(try storedAccessToken() == nil)
    }

    @Test("a process that holds no session writes nothing back: it needs a login")
    func nothingHeldNothingWritten() throws {
        let provider = FakeProvider()
        provider.answers = [.success(IssuedToken(accessToken: "access-login", refreshToken: "refresh-login", expiresIn: 600))]
        _ = try source(provider).login(.password(username: "alice", password: "pw-123456"), prompt: { _ in })
        try redis.restart()
        let fresh = try source(FakeProvider())
        #expect(throws: TokenSourceError.self) { try fresh.fetch(current: nil) }
        #expect(try storedAccessToken() == nil)
    }

    @Test("a refreshed session whose save failed while Redis was down is the one written back when Redis returns empty")
    func unsavedSessionIsWrittenBack() throws {
        let provider = FakeProvider()
        provider.answers = [
            .success(IssuedToken(accessToken: "access-login", refreshToken: "refresh-login", expiresIn: 600)),
            .success(IssuedToken(accessToken: "access-rotated", refreshToken: "refresh-rotated", expiresIn: 600)),
        ]
        let serving = try source(provider)
        _ = try serving.login(.password(username: "alice", password: "pw-123456"), prompt: { _ in })
        let current = try serving.fetch(current: nil)
        #expect(current.accessToken == "access-login")
        // The identity provider rotates the refresh token; the store is gone while the answer arrives.
        provider.during = { redis.stop() }
        let snapshot = TokenSnapshot(accessToken: "access-login", expiresAt: 1, issuedAt: 0, generation: 1)
        #expect(throws: TokenSourceError.self) { try serving.fetch(current: snapshot) }
        provider.during = nil
        try redis.restart()
        // The rotated session (the only one whose refresh token still works) goes back, not the older one.
        #expect(try fetchAfterRestart(serving).accessToken == "access-rotated")
        #expect(try storedAccessToken() == "access-rotated")
        #expect(provider.refreshTokensSeen == [nil, "refresh-login"])
    }
}
