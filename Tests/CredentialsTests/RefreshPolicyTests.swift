import Testing

@testable import Credentials

@Suite("RefreshPolicy")
struct RefreshPolicyTests {
    func policy(margin: Double = 300, random: Double = 0) -> RefreshPolicy {
        RefreshPolicy(refreshMargin: margin, random: { random })
    }

    @Test("forced refreshes back off 1, 2, 4 … seconds apart, and start again after a quiet minute")
    func forcedRefreshesBackOff() {
        let p = policy()
        var forced = RefreshPolicy.ForcedRefreshes()
        #expect(p.admitForced(&forced, now: 100) == nil)
        #expect(p.admitForced(&forced, now: 100.25) == 0.75)
        #expect(p.admitForced(&forced, now: 101) == nil)
        #expect(p.admitForced(&forced, now: 102) == 1)
        #expect(p.admitForced(&forced, now: 103) == nil)
        #expect(p.admitForced(&forced, now: 106) == 1)
        #expect(p.admitForced(&forced, now: 107) == nil)
        #expect(forced.inARow == 4)
        // A quiet backoff cap (60 s) later, the first one is admitted at once and the count restarts.
        #expect(p.admitForced(&forced, now: 167) == nil)
        #expect(forced.inARow == 1)
        #expect(p.admitForced(&forced, now: 167.5) == 0.5)
    }

    @Test("a long-lived token is refreshed refresh_margin before it expires")
    func longLivedTokenRefreshesAtTheMargin() {
        let decision = policy().next(after: .issued(issuedAt: 1000, expiresAt: 4600, failuresSoFar: 0), now: 1000)
        #expect(decision == .refreshAt(4300))
    }

    @Test("a short-lived token is refreshed at half its lifetime")
    func shortLivedTokenRefreshesAtHalfLife() {
        let decision = policy().next(after: .issued(issuedAt: 1000, expiresAt: 1400, failuresSoFar: 0), now: 1000)
        #expect(decision == .refreshAt(1200))
    }

    @Test("jitter only moves the refresh earlier, by at most a tenth of the lead")
    func jitterStaysWithinBounds() {
        for random in stride(from: 0.0, to: 1.0, by: 0.05) {
            let decision = policy(random: random).next(after: .issued(issuedAt: 0, expiresAt: 3600, failuresSoFar: 0), now: 0)
            guard case .refreshAt(let time) = decision else {
                Issue.record("expected refreshAt, got \(decision)")
                return
            }
            #expect(time <= 3300)
            #expect(time >= 3600 - 330)
        }
        let early = policy(random: 0.99).refreshTime(issuedAt: 0, expiresAt: 3600)
        #expect(early < 3300 - 29)
    }

    @Test("a token without expiry waits for a trigger")
    func tokenWithoutExpiryWaits() {
        #expect(policy().next(after: .issued(issuedAt: 0, expiresAt: nil, failuresSoFar: 0), now: 0) == .waitForTrigger)
    }

    @Test("passing failures back off 1, 2, 4 … seconds, capped at 60")
    func backoffSequenceDoublesAndCaps() {
        let policy = policy()
        var delays: [Double] = []
        for failuresSoFar in 0..<10 {
            guard case .retryAt(let time, let attempt) = policy.next(after: .passingFailure(failuresSoFar: failuresSoFar), now: 500) else {
                Issue.record("expected retryAt")
                return
            }
            #expect(attempt == failuresSoFar + 1)
            delays.append(time - 500)
        }
        #expect(delays == [1, 2, 4, 8, 16, 32, 60, 60, 60, 60])
    }

    @Test("backoff jitter shortens a delay by at most a fifth")
    func backoffJitterStaysWithinBounds() {
        for random in stride(from: 0.0, to: 1.0, by: 0.1) {
            let policy = policy(random: random)
            for attempt in 1...8 {
                let nominal = policy.nominalBackoff(attempt: attempt)
                let delay = policy.backoffDelay(attempt: attempt)
                #expect(delay <= nominal)
                #expect(delay >= nominal * 0.8 - 1e-9)
            }
        }
    }

    @Test("a huge failure count neither overflows nor passes the cap")
    func hugeAttemptIsCapped() {
        #expect(policy().nominalBackoff(attempt: Int.max) == 60)
    }

    @Test("a refusal is never retried")
    func refusalIsNotRetried() {
        #expect(policy().next(after: .refused, now: 0) == .waitForTrigger)
    }

    @Test("a token already inside its refresh window is asked for again only after a backoff")
    func earlyTokenBacksOff() {
        let decision = policy().next(after: .issued(issuedAt: 0, expiresAt: 100, failuresSoFar: 2), now: 90)
        #expect(decision == .retryAt(94, attempt: 3))
    }

    @Test("an already expired token does not produce a negative lead")
    func expiredTokenHasNoNegativeLead() {
        #expect(policy().lead(lifetime: -50) == 0)
        #expect(policy().next(after: .issued(issuedAt: 100, expiresAt: 50, failuresSoFar: 0), now: 100) == .retryAt(101, attempt: 1))
    }
}
