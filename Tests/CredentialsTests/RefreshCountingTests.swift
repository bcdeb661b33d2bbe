import Config
import Foundation
import Testing

@testable import Credentials

/// Issue 12 point 8: `tokenproxy_refreshes_total{outcome="success"}` says how often the identity
/// provider was called; a token read from a store another process refreshed is counted apart
/// (`reused`), and the refresh race is counted as won or lost.
@Suite("refresh counting: identity-provider calls apart from store re-reads")
struct RefreshCountingTests {
    @Test("a token the source read from the store counts as reused, not as a success")
    func reusedIsCountedApart() throws {
        let folder = TemporaryFolder()
        defer { folder.remove() }
        let source = ScriptedSource()
        var fromStore = IssuedToken(accessToken: "stored-by-another", expiresIn: 600)
        fromStore.fromStore = true
        source.answers = [.success(fromStore), .success(IssuedToken(accessToken: "refreshed-here", expiresIn: 600))]
        let manager = TokenManager(
            configuration: makeConfiguration(
                CredentialsConfiguration(.oauth2Refresh(OAuth2RefreshConfiguration(client: OAuth2ClientConfiguration()))), folder: folder),
            logger: LogCapture().logger(), source: source)
        manager.start()
        defer { manager.stop() }
        #expect(eventually { manager.current().snapshot?.accessToken == "stored-by-another" })
        #expect(manager.stats.reuses == 1 && manager.stats.successes == 0)
        let box = OutcomeBox()
        manager.refresh(staleGeneration: nil, reason: .forced) { box.append($0) }
        #expect(eventually { box.count == 1 })
        #expect(manager.stats.successes == 1 && manager.stats.reuses == 1)
        #expect(manager.stats.lastRefreshOutcome == .success)
    }

    @Test("two processes sharing a file store: one calls the provider (won), the other reads its token (lost, reused)")
    func twoProcessesOneCall() throws {
        let folder = TemporaryFolder()
        defer { folder.remove() }
        let path = folder.file("state/tokens.json")
        let provider = FakeProvider()
        provider.answers = [.success(IssuedToken(accessToken: "access-2", refreshToken: "refresh-2", expiresIn: 600))]
        let first = SessionTokenSource(
            provider: provider, store: FileTokenStore(path: path, logger: LogCapture().logger()), defaultLifetime: 3600,
            refreshMargin: 60, logger: LogCapture().logger())
        let second = SessionTokenSource(
            provider: provider, store: FileTokenStore(path: path, logger: LogCapture().logger()), defaultLifetime: 3600,
            refreshMargin: 60, logger: LogCapture().logger())
        try FileTokenStore(path: path, logger: LogCapture().logger()).save(
            StoredSession(kind: "oauth2_refresh", accessToken: "access-1", refreshToken: "refresh-1", expiresAt: Date().timeIntervalSince1970 + 600))
        let old = TokenSnapshot(accessToken: "access-1", expiresAt: nil, issuedAt: 0, generation: 1)

        let won = try first.fetch(current: old)
        #expect(won.accessToken == "access-2" && !won.fromStore)
        let lost = try second.fetch(current: old)
        #expect(lost.accessToken == "access-2" && lost.fromStore)
        #expect(provider.calls == 1)
        #expect(first.storeMetrics.snapshot.races == [.won: 1])
        #expect(second.storeMetrics.snapshot.races == [.lost: 1])
    }
}
