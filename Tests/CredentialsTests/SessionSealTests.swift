import Config
import Foundation
import TestSupport
import Testing

@testable import Credentials

/// Sessions sealed at rest (CONTRACT.md "The fleet store in production", issue 33): the seal as a
/// pure value, then both stores holding only sealed bytes (Redis a real redis-server).
@Suite("sealed sessions", .serialized)
struct SessionSealTests {
    static func key() -> [UInt8] { (0..<32).map { _ in UInt8.random(in: 0...255) } }

    static let session = StoredSession(
        kind: "oauth2_refresh", accessToken: "access-\(UUID().uuidString)", refreshToken: "refresh-\(UUID().uuidString)",
        expiresAt: 1_900_000_000, issuedAt: 1_899_996_400)

    static func encoded(_ session: StoredSession) throws -> [UInt8] { Array(try JSONEncoder().encode(session)) }

    @Test("a sealed document opens under its key, names the key by id only, and holds no token")
    func roundTrip() throws {
        let a = Self.key()
        let seal = SessionSeal(StoreEncryption(current: a))
        let document = try Self.encoded(Self.session)
        let sealed = try seal.seal(document)
        let text = String(decoding: sealed, as: UTF8.self)
        #expect(!text.contains(Self.session.accessToken!) && !text.contains(Self.session.refreshToken!))
        #expect(!text.contains(Data(a).base64EncodedString()))
        #expect(text.contains(seal.currentKeyID))
        #expect(SessionSeal.read(sealed, with: seal) == .opened(document, reseal: false))
        #expect(try seal.seal(document) != sealed, "a fresh nonce every time")
    }

    @Test("a previous key opens what it sealed; an unknown or missing key, or a damaged box, opens nothing; a plain document passes")
    func keys() throws {
        let a = Self.key()
        let b = Self.key()
        let document = try Self.encoded(Self.session)
        let underA = try SessionSeal(StoreEncryption(current: a)).seal(document)
        var rotated = StoreEncryption(current: b)
        rotated.previous = [a]
        #expect(SessionSeal.read(underA, with: SessionSeal(rotated)) == .opened(document, reseal: true))
        let kidA = SessionSeal.keyID(a)
        #expect(SessionSeal.read(underA, with: SessionSeal(StoreEncryption(current: b))) == .unopenable(kid: kidA))
        #expect(SessionSeal.read(underA, with: nil) == .unopenable(kid: kidA))
        var damaged = String(decoding: underA, as: UTF8.self)
        let box = try #require(damaged.range(of: #""box":""#))
        let at = damaged.index(box.upperBound, offsetBy: 20)
        damaged.replaceSubrange(at...at, with: damaged[at] == "A" ? "B" : "A")
        #expect(SessionSeal.read(Array(damaged.utf8), with: SessionSeal(StoreEncryption(current: a))) == .unopenable(kid: kidA))
        #expect(SessionSeal.read(document, with: SessionSeal(StoreEncryption(current: a))) == .plain(document))
    }

    @Test("the file store writes sealed bytes, reads them back, and leaves a session no key opens where it is")
    func fileStore() throws {
        let dir = try TempDir(prefix: "tokenproxy-seal")
        let path = dir.file("state/tokens.json")
        let capture = LogCapture()
        let a = Self.key()
        let store = FileTokenStore(path: path, logger: capture.logger(), seal: SessionSeal(StoreEncryption(current: a)))
        try store.save(Self.session)
        let raw = try String(contentsOfFile: path, encoding: .utf8)
        #expect(!raw.contains(Self.session.accessToken!) && !raw.contains(Self.session.refreshToken!))
        #expect(try store.load() == Self.session)
        let stranger = FileTokenStore(path: path, logger: capture.logger(), seal: SessionSeal(StoreEncryption(current: Self.key())))
        #expect {
            try stranger.load()
        } throws: { error in
            guard case .loginRequired(let message)? = error as? TokenSourceError else { return false }
            return message.contains(SessionSeal.keyID(a))
        }
        #expect(try String(contentsOfFile: path, encoding: .utf8) == raw, "neither moved aside nor changed")
    }

    @Test("a file store read says when the session is to be sealed again under the current key; a write clears it")
    func fileStoreReseal() throws {
        let dir = try TempDir(prefix: "tokenproxy-seal")
        let path = dir.file("state/tokens.json")
        let a = Self.key()
        let b = Self.key()
        try FileTokenStore(path: path, logger: LogCapture().logger(), seal: SessionSeal(StoreEncryption(current: a))).save(Self.session)
        var rotated = StoreEncryption(current: b)
        rotated.previous = [a]
        let store = FileTokenStore(path: path, logger: LogCapture().logger(), seal: SessionSeal(rotated))
        #expect(try store.load() == Self.session)
        #expect(store.lastReadNeedsReseal)
        try store.save(Self.session)
        #expect(!store.lastReadNeedsReseal)
        #expect(try store.load() == Self.session)
        #expect(!store.lastReadNeedsReseal, "sealed under the current key now")
    }

    @Test("the Redis store holds only sealed bytes in the session hash")
    func redisStore() throws {
        let redis = try RedisServer()
        let key = "seal/\(UUID().uuidString.lowercased())"
        let configuration = RedisStoreConfiguration(
            url: redis.url, tls: false, host: "127.0.0.1", port: redis.port, key: key, connectTimeout: 1, commandTimeout: 1, leaseTime: 5)
        let seal = SessionSeal(StoreEncryption(current: Self.key()))
        let store = try RedisTokenStore(configuration: configuration, logger: LogCapture().logger(), seal: seal)
        try store.withExclusiveLock { try store.save(Self.session) }
        let raw = try redis.cli(["HGET", key + ":session", "session"])
        #expect(raw.contains("\"sealed\"") && raw.contains(seal.currentKeyID))
        #expect(!raw.contains(Self.session.accessToken!) && !raw.contains(Self.session.refreshToken!))
        let other = try RedisTokenStore(configuration: configuration, logger: LogCapture().logger(), seal: seal)
        #expect(try other.load() == Self.session)
        let stranger = try RedisTokenStore(
            configuration: configuration, logger: LogCapture().logger(), seal: SessionSeal(StoreEncryption(current: Self.key())))
        #expect(throws: TokenSourceError.self) { try stranger.read() }
        #expect(try redis.cli(["HGET", key + ":session", "session"]) == raw)
    }
}
