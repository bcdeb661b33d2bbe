import Config
import Crypto
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

    /// The binding of route `a`'s sessions in the tests below.
    static let routeA = SessionSeal.Binding(route: "a", storeKey: "a.json")

    static func seal(_ encryption: StoreEncryption, _ binding: SessionSeal.Binding = routeA) -> SessionSeal {
        SessionSeal(encryption, binding: binding)
    }

    static func seal(current key: [UInt8], _ binding: SessionSeal.Binding = routeA) -> SessionSeal {
        seal(StoreEncryption(current: key), binding)
    }

    /// A document as the version before the route binding sealed it: the purpose alone as
    /// authenticated data, `"version":1`.
    static func unboundSeal(_ document: [UInt8], key: [UInt8]) throws -> [UInt8] {
        let box = try AES.GCM.seal(document, using: SymmetricKey(data: key), authenticating: Array("tokenproxy session v1".utf8))
        let combined = try #require(box.combined).base64EncodedString()
        return Array(#"{"sealed":{"box":"\#(combined)","kid":"\#(SessionSeal.keyID(key))"},"version":1}"#.utf8)
    }

    @Test("a sealed document opens under its key, names the key by id only, and holds no token")
    func roundTrip() throws {
        let a = Self.key()
        let seal = Self.seal(current: a)
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
        let underA = try Self.seal(current: a).seal(document)
        var rotated = StoreEncryption(current: b)
        rotated.previous = [a]
        #expect(SessionSeal.read(underA, with: Self.seal(rotated)) == .opened(document, reseal: true))
        let kidA = SessionSeal.keyID(a)
        #expect(SessionSeal.read(underA, with: Self.seal(current: b)) == .unopenable(kid: kidA, keyKnown: false))
        #expect(SessionSeal.read(underA, with: nil) == .unopenable(kid: kidA, keyKnown: false))
        var damaged = String(decoding: underA, as: UTF8.self)
        let box = try #require(damaged.range(of: #""box":""#))
        let at = damaged.index(box.upperBound, offsetBy: 20)
        damaged.replaceSubrange(at...at, with: damaged[at] == "A" ? "B" : "A")
        #expect(SessionSeal.read(Array(damaged.utf8), with: Self.seal(current: a)) == .unopenable(kid: kidA, keyKnown: true))
        #expect(SessionSeal.read(document, with: Self.seal(current: a)) == .plain(document))
    }

    @Test("a sealed session opens only for its route and store key: one copied into another route's place is a session no key opens")
    func binding() throws {
        let a = Self.key()
        let document = try Self.encoded(Self.session)
        let routeB = SessionSeal.Binding(route: "b", storeKey: "b.json")
        let underB = try Self.seal(current: a, routeB).seal(document)
        #expect(SessionSeal.read(underB, with: Self.seal(current: a, routeB)) == .opened(document, reseal: false))
        let kid = SessionSeal.keyID(a)
        #expect(SessionSeal.read(underB, with: Self.seal(current: a)) == .unopenable(kid: kid, keyKnown: true))
        #expect(SessionSeal.read(underB, with: Self.seal(current: a, .init(route: "b", storeKey: "a.json"))) == .unopenable(kid: kid, keyKnown: true))
        #expect(SessionSeal.read(underB, with: Self.seal(current: a, .init(route: "a", storeKey: "b.json"))) == .unopenable(kid: kid, keyKnown: true))
        // No two bindings authenticate the same bytes, however the names split.
        let joined = try Self.seal(current: a, .init(route: "ab", storeKey: "c")).seal(document)
        #expect(SessionSeal.read(joined, with: Self.seal(current: a, .init(route: "a", storeKey: "bc"))) == .unopenable(kid: kid, keyKnown: true))
        #expect {
            try SessionSeal.document(underB, with: Self.seal(current: a))
        } throws: { error in
            guard case .loginRequired(let message)? = error as? TokenSourceError else { return false }
            return message.contains(kid) && message.contains("route a") && message.contains("another route")
        }
    }

    @Test("a session sealed before the route binding opens once and is to be sealed again, under the current key as under a previous one")
    func upgradeFromUnbound() throws {
        let a = Self.key()
        let b = Self.key()
        let document = try Self.encoded(Self.session)
        let unbound = try Self.unboundSeal(document, key: a)
        #expect(SessionSeal.read(unbound, with: Self.seal(current: a)) == .opened(document, reseal: true))
        var rotated = StoreEncryption(current: b)
        rotated.previous = [a]
        #expect(SessionSeal.read(unbound, with: Self.seal(rotated)) == .opened(document, reseal: true))
        #expect(SessionSeal.read(unbound, with: Self.seal(current: b)) == .unopenable(kid: SessionSeal.keyID(a), keyKnown: false))
        let resealed = try Self.seal(current: a).seal(document)
        #expect(String(decoding: resealed, as: UTF8.self).contains(#""version":2"#))
        #expect(SessionSeal.read(resealed, with: Self.seal(current: a)) == .opened(document, reseal: false))
    }

    @Test("a store's binding names the route whose session it keeps and its Redis key or file name, not the folder or the server")
    func storeBinding() throws {
        var store = StoreConfiguration(path: "/var/lib/tokenproxy/state/orders.json")
        store.sessionRoute = "orders"
        #expect(SessionSeal.Binding(store) == .init(route: "orders", storeKey: "orders.json"))
        store.backend = .redis
        store.redis = RedisStoreConfiguration(url: "redis://10.0.0.1:6379/0", tls: false, host: "10.0.0.1", port: 6379, key: "tokenproxy/orders")
        #expect(SessionSeal.Binding(store) == .init(route: "orders", storeKey: "tokenproxy/orders"))
    }

    @Test("the file store writes sealed bytes, reads them back, and leaves a session no key opens where it is")
    func fileStore() throws {
        let dir = try TempDir(prefix: "tokenproxy-seal")
        let path = dir.file("state/tokens.json")
        let capture = LogCapture()
        let a = Self.key()
        let store = FileTokenStore(path: path, logger: capture.logger(), seal: Self.seal(current: a))
        try store.save(Self.session)
        let raw = try String(contentsOfFile: path, encoding: .utf8)
        #expect(!raw.contains(Self.session.accessToken!) && !raw.contains(Self.session.refreshToken!))
        #expect(try store.load() == Self.session)
        let stranger = FileTokenStore(path: path, logger: capture.logger(), seal: Self.seal(current: Self.key()))
        #expect {
            try stranger.load()
        } throws: { error in
            guard case .loginRequired(let message)? = error as? TokenSourceError else { return false }
            return message.contains(SessionSeal.keyID(a))
        }
        #expect(try String(contentsOfFile: path, encoding: .utf8) == raw, "neither moved aside nor changed")
    }

    @Test("a file store read says when the session is to be sealed again: under a previous key, or before the binding; a write clears it")
    func fileStoreReseal() throws {
        let dir = try TempDir(prefix: "tokenproxy-seal")
        let path = dir.file("state/tokens.json")
        let a = Self.key()
        let b = Self.key()
        try FileTokenStore(path: path, logger: LogCapture().logger(), seal: Self.seal(current: a)).save(Self.session)
        var rotated = StoreEncryption(current: b)
        rotated.previous = [a]
        let store = FileTokenStore(path: path, logger: LogCapture().logger(), seal: Self.seal(rotated))
        #expect(try store.load() == Self.session)
        #expect(store.lastReadNeedsReseal)
        try store.save(Self.session)
        #expect(!store.lastReadNeedsReseal)
        #expect(try store.load() == Self.session)
        #expect(!store.lastReadNeedsReseal, "sealed under the current key now")
        _ = try dir.write("state/tokens.json", String(decoding: try Self.unboundSeal(try Self.encoded(Self.session), key: b), as: UTF8.self))
        #expect(try store.load() == Self.session)
        #expect(store.lastReadNeedsReseal)
    }

    @Test("the Redis store holds only sealed bytes in the session hash", .tags(.redis))
    func redisStore() throws {
        let redis = try RedisServer()
        let key = "seal/\(UUID().uuidString.lowercased())"
        let configuration = RedisStoreConfiguration(
            url: redis.url, tls: false, host: "127.0.0.1", port: redis.port, key: key, connectTimeout: 1, commandTimeout: 1, leaseTime: 5)
        let seal = Self.seal(current: Self.key())
        let store = try RedisTokenStore(configuration: configuration, logger: LogCapture().logger(), seal: seal)
        try store.withExclusiveLock { try store.save(Self.session) }
        let raw = try redis.cli(["HGET", key + ":session", "session"])
        #expect(raw.contains("\"sealed\"") && raw.contains(seal.currentKeyID))
        #expect(!raw.contains(Self.session.accessToken!) && !raw.contains(Self.session.refreshToken!))
        let other = try RedisTokenStore(configuration: configuration, logger: LogCapture().logger(), seal: seal)
        #expect(try other.load() == Self.session)
        let stranger = try RedisTokenStore(
            configuration: configuration, logger: LogCapture().logger(), seal: Self.seal(current: Self.key()))
        #expect(throws: TokenSourceError.self) { try stranger.read() }
        #expect(try redis.cli(["HGET", key + ":session", "session"]) == raw)
    }
}
