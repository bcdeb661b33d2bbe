import Redis
import Testing

@testable import Credentials

/// The pure readings behind the Redis store: no server needed.
@Suite("redis store: replies and lease waits")
struct RedisStoreDecisionTests {
    @Test("the fenced write's answer: committed with its generation, or fenced with the reason")
    func writeAnswers() {
        #expect(RedisReplies.write(.array([.integer(1), .integer(7)])) == .committed(generation: 7))
        #expect(RedisReplies.write(.array([.integer(0), .string(Array("generation".utf8))])) == .fenced(reason: "generation"))
        #expect(RedisReplies.write(.array([.integer(0), .string(Array("lease".utf8))])) == .fenced(reason: "lease"))
        #expect(RedisReplies.write(.status("OK")) == .unreadable)
        #expect(RedisReplies.write(.array([.integer(2), .integer(7)])) == .unreadable)
    }

    @Test("a session hash: a document, the record of a logout, an empty store, or something unreadable")
    func sessionHash() {
        #expect(RedisReplies.session(.array([.null, .null])) == .empty)
        #expect(
            RedisReplies.session(.array([.string(Array("12".utf8)), .string(Array("{}".utf8))]))
                == .document(generation: 12, bytes: Array("{}".utf8)))
        #expect(RedisReplies.session(.array([.null, .string(Array("{}".utf8))])) == .document(generation: nil, bytes: Array("{}".utf8)))
        // What a logout leaves: the generation, no document.
        #expect(RedisReplies.session(.array([.string(Array("13".utf8)), .null])) == .ended(generation: 13))
        // Overwritten: another type of key, or a generation that is no number.
        #expect(RedisReplies.session(.error("WRONGTYPE Operation against a key holding the wrong kind of value")) == .unreadable(seenGeneration: ""))
        #expect(RedisReplies.session(.array([.string(Array("x".utf8)), .null])) == .unreadable(seenGeneration: "x"))
        // Errors that say nothing about the key are failures to read, not a lost session.
        #expect(RedisReplies.session(.error("LOADING Redis is loading the dataset in memory")) == nil)
        #expect(RedisReplies.session(.error("NOAUTH Authentication required.")) == nil)
        #expect(RedisReplies.session(.status("OK")) == nil)
    }

    @Test("a store that lost the session gets back the one this process holds, while it can still be used")
    func lostSessionIsWrittenBack() {
        let now = 1_000_000.0
        var live = StoredSession(kind: "oauth2_refresh", accessToken: "a", refreshToken: "r", expiresAt: now + 600)
        #expect(LostSession.decide(held: live, kind: "oauth2_refresh", now: now) == .writeBack(live))
        // An expired access token with a refresh token: still a session (the next refresh renews it).
        live.expiresAt = now - 1
        #expect(LostSession.decide(held: live, kind: "oauth2_refresh", now: now) == .writeBack(live))
        // An access token alone, while valid (or without a known expiry).
        let accessOnly = StoredSession(kind: "json_refresh", accessToken: "a", expiresAt: now + 60)
        #expect(LostSession.decide(held: accessOnly, kind: "json_refresh", now: now) == .writeBack(accessOnly))
        var noExpiry = accessOnly
        noExpiry.expiresAt = nil
        #expect(LostSession.decide(held: noExpiry, kind: "json_refresh", now: now) == .writeBack(noExpiry))
    }

    @Test("nothing is written back without a usable session of this kind: none held, ended, expired, or another type's")
    func lostSessionWithNothingToWriteBack() {
        let now = 1_000_000.0
        #expect(LostSession.decide(held: nil, kind: "oauth2_refresh", now: now) == .serveAsWithout)
        var tombstone = StoredSession(kind: "oauth2_refresh", lastRefreshOutcome: "refused")
        tombstone.endedReason = "invalid_grant"
        #expect(LostSession.decide(held: tombstone, kind: "oauth2_refresh", now: now) == .serveAsWithout)
        var refusedWithTokens = StoredSession(kind: "oauth2_refresh", accessToken: "a", refreshToken: "r")
        refusedWithTokens.endedReason = "invalid_grant"
        #expect(LostSession.decide(held: refusedWithTokens, kind: "oauth2_refresh", now: now) == .serveAsWithout)
        let expired = StoredSession(kind: "json_refresh", accessToken: "a", expiresAt: now)
        #expect(LostSession.decide(held: expired, kind: "json_refresh", now: now) == .serveAsWithout)
        let other = StoredSession(kind: "cognito", accessToken: "a", refreshToken: "r", expiresAt: now + 600)
        #expect(LostSession.decide(held: other, kind: "oauth2_refresh", now: now) == .serveAsWithout)
    }

    @Test("a pub/sub push announces a generation only on our channel")
    func announcements() {
        let message = RedisValue.array([.string(Array("message".utf8)), .string(Array("k:changed".utf8)), .string(Array("5".utf8))])
        #expect(RedisReplies.announcedGeneration(message, channel: "k:changed") == 5)
        #expect(RedisReplies.announcedGeneration(message, channel: "other:changed") == nil)
        let confirmation = RedisValue.array([.string(Array("subscribe".utf8)), .string(Array("k:changed".utf8)), .integer(1)])
        #expect(RedisReplies.announcedGeneration(confirmation, channel: "k:changed") == nil)
    }

    @Test("lease waits start short and grow to a ceiling")
    func leaseWaits() {
        let schedule = LeaseWaitSchedule(first: 0.02, ceiling: 0.25)
        #expect(schedule.delay(attempt: 0) == 0.02)
        #expect(schedule.delay(attempt: 1) == 0.04)
        #expect(schedule.delay(attempt: 3) == 0.16)
        #expect(schedule.delay(attempt: 4) == 0.25)
        #expect(schedule.delay(attempt: 60) == 0.25)
    }
}
