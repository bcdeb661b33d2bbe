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

    @Test("a session hash: generation 0 and no document when never written; the document when there")
    func sessionHash() {
        let empty = RedisReplies.session(.array([.null, .null]))
        #expect(empty?.generation == 0 && empty?.document == nil)
        let full = RedisReplies.session(.array([.string(Array("12".utf8)), .string(Array("{}".utf8))]))
        #expect(full?.generation == 12 && full?.document == Array("{}".utf8))
        #expect(RedisReplies.session(.array([.string(Array("x".utf8)), .null])) == nil)
        #expect(RedisReplies.session(.error("WRONGTYPE")) == nil)
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
