import Config
import Foundation
import Glibc
import Logging
import Synchronization
import Testing

@testable import Credentials

/// An identity provider with prepared answers that records what it was asked.
// @unchecked: the answers and records sit in a Mutex; `during` is set by the test before or after a
// refresh, never while one runs.
final class FakeProvider: IdentityProvider, @unchecked Sendable {
    let kind: String
    let fetchesWithoutSession: Bool
    private let state = Mutex<(answers: [Result<IssuedToken, TokenSourceError>], refreshTokensSeen: [String?], revoked: [String])>(([], [], []))
    /// Runs inside `refresh`, before it answers (to act while the caller holds the store's lock).
    var during: (() -> Void)?

    init(kind: String = "oauth2_refresh", fetchesWithoutSession: Bool = false) {
        self.kind = kind
        self.fetchesWithoutSession = fetchesWithoutSession
    }

    var answers: [Result<IssuedToken, TokenSourceError>] {
        get { state.withLock { $0.answers } }
        set { state.withLock { $0.answers = newValue } }
    }
    var refreshTokensSeen: [String?] { state.withLock { $0.refreshTokensSeen } }
    var calls: Int { refreshTokensSeen.count }
    var revoked: [String] { state.withLock { $0.revoked } }

    func refresh(_ session: StoredSession?) throws -> IssuedToken {
        let answer: Result<IssuedToken, TokenSourceError> = state.withLock {
            $0.refreshTokensSeen.append(session?.refreshToken)
            return $0.answers.count > 1 ? $0.answers.removeFirst() : $0.answers[0]
        }
        during?()
        return try answer.get()
    }

    func login(_ input: LoginInput, prompt: @escaping (String) -> Void) throws -> IssuedToken {
        try refresh(nil)
    }

    func revoke(refreshToken: String) throws {
        state.withLock { $0.revoked.append(refreshToken) }
    }
}

/// A store that fails to save while `failing` is set.
final class FlakyStore: TokenStore {
    let inner: FileTokenStore
    var failing = false
    init(_ inner: FileTokenStore) { self.inner = inner }
    func load() throws -> StoredSession? { try inner.load() }
    func save(_ session: StoredSession) throws {
        if failing { throw TokenStoreError(description: "disk full (test)") }
        try inner.save(session)
    }
    func remove() throws { try inner.remove() }
    func withExclusiveLock<T>(_ body: () throws -> T) throws -> T { try inner.withExclusiveLock(body) }
    func hasChanged() -> Bool { inner.hasChanged() }
}

@Suite("SessionTokenSource")
struct SessionTokenSourceTests {
    let folder = TemporaryFolder()
    var storePath: String { folder.file("state/tokens.json") }

    func makeSource(_ provider: FakeProvider, seed: String? = nil, store: (any TokenStore)? = nil, log: LogCapture = LogCapture()) -> SessionTokenSource {
        SessionTokenSource(
            provider: provider,
            store: store ?? FileTokenStore(path: storePath, logger: log.logger()),
            seedRefreshToken: seed,
            defaultLifetime: 3600,
            refreshMargin: 300,
            logger: log.logger()
        )
    }

    func stored() -> StoredSession? {
        try? FileTokenStore(path: storePath, logger: LogCapture().logger()).load()
    }

    func snapshot(_ token: String) -> TokenSnapshot {
        TokenSnapshot(accessToken: token, expiresAt: Date().timeIntervalSince1970 + 600, issuedAt: Date().timeIntervalSince1970, generation: 1)
    }

    @Test("without a store and without a seed, a login is needed and the provider is not called")
    func noStoreNoSeed() throws {
        defer { folder.remove() }
        let provider = FakeProvider()
        provider.answers = [.success(IssuedToken(accessToken: "never-used-1"))]
        let source = makeSource(provider)
        #expect(throws: TokenSourceError.loginRequired("no session: run `tokenproxy login`")) { try source.fetch(current: nil) }
        #expect(provider.calls == 0)
        #expect(try source.status().session == .none)
    }

    @Test("a seed is used only when no store exists; the rotated refresh token is saved before the token is handed out")
    func seedOnlyWithoutStore() throws {
        defer { folder.remove() }
        let provider = FakeProvider()
        provider.answers = [.success(IssuedToken(accessToken: "access-one", refreshToken: "refresh-two", expiresIn: 600))]
        // The provider looks at the store while the source waits for its answer: still the old state.
        let path = storePath
        provider.during = { #expect(!FileManager.default.fileExists(atPath: path)) }
        let source = makeSource(provider, seed: "seed-refresh-one")
        let issued = try source.fetch(current: nil)
        #expect(issued.accessToken == "access-one")
        #expect(provider.refreshTokensSeen == ["seed-refresh-one"])
        #expect(stored()?.refreshToken == "refresh-two")
        #expect(stored()?.accessToken == "access-one")
        #expect(stored()?.lastRefreshOutcome == "success")

        // A restart with the same seed: the store wins, and its valid token needs no call.
        provider.during = nil
        let restarted = makeSource(provider, seed: "seed-refresh-one")
        #expect(try restarted.fetch(current: nil).accessToken == "access-one")
        #expect(provider.calls == 1)
        // Asked to replace that token, it refreshes with the stored (rotated) refresh token, not the seed.
        provider.answers = [.success(IssuedToken(accessToken: "access-two", refreshToken: "refresh-three", expiresIn: 600))]
        #expect(try restarted.fetch(current: snapshot("access-one")).accessToken == "access-two")
        #expect(provider.refreshTokensSeen == ["seed-refresh-one", "refresh-two"])
        #expect(stored()?.refreshToken == "refresh-three")
    }

    @Test("a refused seed leaves a tombstone: after a restart it is not tried again")
    func refusedSeedIsNotRetried() throws {
        defer { folder.remove() }
        let provider = FakeProvider()
        provider.answers = [.failure(.refused("invalid_grant"))]
        let source = makeSource(provider, seed: "seed-refresh-bad")
        #expect(throws: TokenSourceError.refused("invalid_grant")) { try source.fetch(current: nil) }
        #expect(stored()?.endedReason == "invalid_grant")
        #expect(stored()?.refreshToken == nil)
        #expect(try source.status().session == .ended)

        let restarted = makeSource(provider, seed: "seed-refresh-bad")
        #expect(throws: TokenSourceError.self) { try restarted.fetch(current: nil) }
        do {
            _ = try restarted.fetch(current: nil)
        } catch let error as TokenSourceError {
            guard case .loginRequired(let why) = error else {
                Issue.record("expected loginRequired, got \(error)")
                return
            }
            #expect(why.contains("invalid_grant"))
        }
        #expect(provider.calls == 1)
    }

    @Test("a passing failure keeps the seed for the next try")
    func passingFailureKeepsSeed() throws {
        defer { folder.remove() }
        let provider = FakeProvider()
        provider.answers = [.failure(.passing("HTTP 503")), .success(IssuedToken(accessToken: "access-after", refreshToken: "refresh-after", expiresIn: 600))]
        let source = makeSource(provider, seed: "seed-refresh-keep")
        #expect(throws: TokenSourceError.passing("HTTP 503")) { try source.fetch(current: nil) }
        #expect(stored() == nil)
        #expect(try source.fetch(current: nil).accessToken == "access-after")
        #expect(provider.refreshTokensSeen == ["seed-refresh-keep", "seed-refresh-keep"])
    }

    @Test("the store is re-read under the lock: a token another process refreshed is used without a call")
    func storeReReadUnderLock() throws {
        defer { folder.remove() }
        let provider = FakeProvider()
        provider.answers = [.success(IssuedToken(accessToken: "access-one", refreshToken: "refresh-two", expiresIn: 600))]
        let first = makeSource(provider, seed: "seed-refresh-one")
        _ = try first.fetch(current: nil)
        let other = makeSource(provider)  // another process on the same store
        #expect(try other.fetch(current: nil).accessToken == "access-one")

        provider.answers = [.success(IssuedToken(accessToken: "access-two", refreshToken: "refresh-three", expiresIn: 600))]
        #expect(try first.fetch(current: snapshot("access-one")).accessToken == "access-two")
        // The other process also meets the old token's expiry (or a 401): it finds the new one.
        #expect(try other.fetch(current: snapshot("access-one")).accessToken == "access-two")
        #expect(provider.calls == 2)
        // It noticed the store change; a reload that finds the token in use makes no call either.
        #expect(other.inputChanged() == false)  // its own re-read is the newest state
        #expect(first.inputChanged() == false)
    }

    @Test("two threads in two sources that refresh at once make one call between them")
    func concurrentSourcesCoalesce() throws {
        defer { folder.remove() }
        let provider = FakeProvider()
        provider.answers = [.success(IssuedToken(accessToken: "access-one", refreshToken: "refresh-two", expiresIn: 600))]
        _ = try makeSource(provider, seed: "seed-refresh-one").fetch(current: nil)
        provider.answers = [.success(IssuedToken(accessToken: "access-two", refreshToken: "refresh-three", expiresIn: 600))]
        provider.during = { usleep(100_000) }
        let sources = (0..<4).map { _ in makeSource(provider) }
        let results = Mutex<[String]>([])
        let gate = StartGate()
        let group = DispatchGroup()
        for source in sources {
            let unchecked = UncheckedBox(source)
            group.enter()
            Thread {
                gate.wait()
                if let token = try? unchecked.value.fetch(current: TokenSnapshot(accessToken: "access-one", expiresAt: nil, issuedAt: 0, generation: 1)) {
                    results.withLock { $0.append(token.accessToken) }
                }
                group.leave()
            }.start()
        }
        gate.open()
        group.wait()
        #expect(results.withLock { $0 } == Array(repeating: "access-two", count: 4))
        #expect(provider.calls == 2)
    }

    @Test("an answer without a refresh token keeps the stored one")
    func nilRefreshTokenKeepsOld() throws {
        defer { folder.remove() }
        let provider = FakeProvider(kind: "cognito")
        provider.answers = [.success(IssuedToken(accessToken: "access-one", refreshToken: nil, expiresIn: 600))]
        _ = try makeSource(provider, seed: "seed-refresh-kept").fetch(current: nil)
        #expect(stored()?.refreshToken == "seed-refresh-kept")
        #expect(stored()?.kind == "cognito")
    }

    @Test("a save that fails keeps the new session in memory and hands out no token until it is durable")
    func rotationDurableBeforeUse() throws {
        defer { folder.remove() }
        let provider = FakeProvider()
        provider.answers = [.success(IssuedToken(accessToken: "access-one", refreshToken: "refresh-two", expiresIn: 600))]
        let store = FlakyStore(FileTokenStore(path: storePath, logger: LogCapture().logger()))
        store.failing = true
        let source = makeSource(provider, seed: "seed-refresh-one", store: store)
        #expect(throws: TokenSourceError.self) { try source.fetch(current: nil) }
        #expect(stored() == nil)
        store.failing = false
        #expect(try source.fetch(current: nil).accessToken == "access-one")
        #expect(stored()?.refreshToken == "refresh-two")
        #expect(provider.calls == 1)
    }

    @Test("a refusal ends the session; a new login in the store revives it")
    func refusalThenLogin() throws {
        defer { folder.remove() }
        let provider = FakeProvider()
        provider.answers = [.success(IssuedToken(accessToken: "access-one", refreshToken: "refresh-two", expiresIn: 600))]
        let source = makeSource(provider, seed: "seed-refresh-one")
        _ = try source.fetch(current: nil)
        provider.answers = [.failure(.refused("invalid_grant"))]
        #expect(throws: TokenSourceError.refused("invalid_grant")) { try source.fetch(current: snapshot("access-one")) }
        #expect(stored()?.accessToken == nil)
        #expect(stored()?.endedReason == "invalid_grant")
        #expect(source.inputChanged() == false)
        #expect(throws: TokenSourceError.self) { try source.fetch(current: nil) }
        #expect(provider.calls == 2)

        // `tokenproxy login` in another process.
        let cli = FakeProvider()
        cli.answers = [.success(IssuedToken(accessToken: "access-login", refreshToken: "refresh-login", expiresIn: 600))]
        let session = try makeSource(cli).login(.password(username: "alice", password: "pw-123456"), prompt: { _ in })
        #expect(session.lastRefreshOutcome == "login")
        #expect(source.inputChanged() == true)
        #expect(try source.fetch(current: nil).accessToken == "access-login")
        #expect(provider.calls == 2)
        #expect(try source.status().session == .active)
    }

    @Test("a store change that still holds the token in use makes no call; a forced refresh does")
    func reloadOnlyAfterChange() throws {
        defer { folder.remove() }
        let provider = FakeProvider()
        provider.answers = [.success(IssuedToken(accessToken: "access-one", refreshToken: "refresh-two", expiresIn: 600))]
        let source = makeSource(provider, seed: "seed-refresh-one")
        _ = try source.fetch(current: nil)
        // Another process rewrote the store with the same token (its bookkeeping).
        let store = FileTokenStore(path: storePath, logger: LogCapture().logger())
        var session = try #require(try store.load())
        session.lastRefreshAt = 1
        usleep(10_000)
        try store.save(session)
        #expect(source.inputChanged())
        #expect(try source.fetch(current: snapshot("access-one")).accessToken == "access-one")
        #expect(provider.calls == 1)
        provider.answers = [.success(IssuedToken(accessToken: "access-forced", refreshToken: "refresh-three", expiresIn: 600))]
        #expect(try source.fetch(current: snapshot("access-one")).accessToken == "access-forced")
        #expect(provider.calls == 2)
    }

    @Test("client_credentials: no store needed, a refusal is a passing failure")
    func clientCredentials() throws {
        defer { folder.remove() }
        let provider = FakeProvider(kind: "oauth2_client_credentials", fetchesWithoutSession: true)
        provider.answers = [.failure(.refused("invalid_grant"))]
        let source = makeSource(provider)
        #expect(throws: TokenSourceError.passing("invalid_grant")) { try source.fetch(current: nil) }
        provider.answers = [.success(IssuedToken(accessToken: "cc-access-one", expiresIn: 600))]
        #expect(try source.fetch(current: nil).accessToken == "cc-access-one")
        #expect(provider.refreshTokensSeen == [nil, nil])
        #expect(try source.status().session == .active)
    }

    @Test("clock skew over 5 s moves a JWT's expiry, also after a reload from the store")
    func clockSkew() throws {
        defer { folder.remove() }
        let now = Date().timeIntervalSince1970
        let exp = (now + 1000).rounded()
        let jwt = makeJWT(payload: #"{"sub":"alice","exp":\#(Int(exp))}"#)
        let provider = FakeProvider()
        provider.answers = [.success(IssuedToken(accessToken: jwt, refreshToken: "refresh-two", serverDate: now + 120))]
        let log = LogCapture()
        let source = makeSource(provider, seed: "seed-refresh-one", log: log)
        let issued = try source.fetch(current: nil)
        let resolved = try #require(TokenExpiry.resolve(issued, now: Date().timeIntervalSince1970, defaultLifetime: 3600))
        #expect(abs(resolved - (exp - 120)) < 2)
        #expect(abs((stored()?.expiresAt ?? 0) - (exp - 120)) < 2)
        #expect(stored()?.subject == "alice")
        #expect(log.count(level: .warning, containing: "clock differs") == 1)
        let reloaded = try makeSource(provider).fetch(current: nil)
        let again = try #require(TokenExpiry.resolve(reloaded, now: Date().timeIntervalSince1970, defaultLifetime: 3600))
        #expect(abs(again - (exp - 120)) < 2)
        // Within 5 s: nothing moves.
        #expect(TokenExpiry.resolve(IssuedToken(accessToken: jwt, serverDate: now + 3), now: now, defaultLifetime: nil) == exp)
    }

    @Test("a session another credentials type wrote is not used")
    func otherKindIgnored() throws {
        defer { folder.remove() }
        let cognito = FakeProvider(kind: "cognito")
        cognito.answers = [.success(IssuedToken(accessToken: "cognito-access", refreshToken: "cognito-refresh", expiresIn: 600))]
        _ = try makeSource(cognito).login(.password(username: "alice", password: "pw-123456"), prompt: { _ in })
        let provider = FakeProvider()
        provider.answers = [.success(IssuedToken(accessToken: "never-used-2"))]
        #expect(throws: TokenSourceError.loginRequired("no session: run `tokenproxy login`")) { try makeSource(provider).fetch(current: nil) }
        #expect(provider.calls == 0)
    }

    @Test("logout revokes the stored refresh token and removes the store")
    func logout() throws {
        defer { folder.remove() }
        let provider = FakeProvider()
        provider.answers = [.success(IssuedToken(accessToken: "access-one", refreshToken: "refresh-two", expiresIn: 600))]
        let source = makeSource(provider, seed: "seed-refresh-one")
        _ = try source.fetch(current: nil)
        #expect(try source.logout() == nil)
        #expect(provider.revoked == ["refresh-two"])
        #expect(!FileManager.default.fileExists(atPath: storePath))
        #expect(try source.status().session == .none)
    }

    @Test("with the manager: a refusal ends the session, a login in the store is picked up within a second")
    func managerPicksUpLogin() throws {
        defer { folder.remove() }
        let provider = FakeProvider()
        provider.answers = [.success(IssuedToken(accessToken: "access-one", refreshToken: "refresh-two", expiresIn: 600)), .failure(.refused("invalid_grant"))]
        let source = makeSource(provider, seed: "seed-refresh-one")
        let manager = startedRefreshManager(source, folder: folder)
        defer { manager.stop() }
        #expect(eventually { manager.current().snapshot?.accessToken == "access-one" })
        let box = OutcomeBox()
        manager.refresh(staleGeneration: nil, reason: .forced) { box.append($0) }
        #expect(eventually { manager.current().session == .ended })
        #expect(manager.current().snapshot == nil)

        let cli = FakeProvider()
        cli.answers = [.success(IssuedToken(accessToken: "access-login", refreshToken: "refresh-login", expiresIn: 600))]
        _ = try makeSource(cli).login(.password(username: "alice", password: "pw-123456"), prompt: { _ in })
        #expect(eventually(timeout: 3) { manager.current().snapshot?.accessToken == "access-login" })
        #expect(manager.current().session == .active)
        #expect(provider.calls == 2)

        // A logout is picked up too: login needed again.
        _ = try makeSource(cli).logout()
        #expect(eventually(timeout: 3) { manager.current().session == .none })
        #expect(provider.calls == 2)
    }
}

/// Moves a non-Sendable value into a thread the test controls.
// @unchecked: by design; each use hands the value to exactly one other thread and stops using it.
final class UncheckedBox<T>: @unchecked Sendable {
    let value: T
    init(_ value: T) { self.value = value }
}
