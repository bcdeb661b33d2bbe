import Basics
import Redis
import Testing

/// The Redis client's pure parts: command framing, reply readings, Sentinel's events. No server.
@Suite("redis: values and framing")
struct RedisValueTests {
    @Test("a command is framed as an array of bulk strings, binary-safe")
    func commandsAreFramedAsBulkStrings() {
        #expect(RESP.command(["PING"]) == Array("*1\r\n$4\r\nPING\r\n".utf8))
        #expect(RESP.command(["SET", "k", ""]) == Array("*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$0\r\n\r\n".utf8))
        // Lengths count bytes, not characters, and a CR LF inside a value is only bytes.
        #expect(RESP.command(["é\r\n"]) == Array("*1\r\n$4\r\né\r\n\r\n".utf8))
    }

    @Test("text and integer readings of each kind of reply")
    func textAndIntegerReadings() {
        #expect(RedisValue.string(Array("42".utf8)).text == "42")
        #expect(RedisValue.string(Array("42".utf8)).integer == 42)
        #expect(RedisValue.status("OK").text == "OK")
        #expect(RedisValue.status("OK").integer == nil)
        #expect(RedisValue.integer(-7).text == "-7")
        #expect(RedisValue.integer(-7).integer == -7)
        #expect(RedisValue.null.text == nil)
        #expect(RedisValue.array([.integer(1)]).integer == nil)
        #expect(RedisValue.error("ERR no").text == nil)
        #expect(RedisValue.error("ERR no").errorText == "ERR no")
        #expect(RedisValue.status("OK").errorText == nil)
    }

    @Test("an error's kind is its first word only")
    func errorKindsAreTheFirstWord() {
        #expect(RedisValue.error("WRONGTYPE Operation against a key holding the wrong kind of value").errorKind == .wrongType)
        #expect(RedisValue.error("READONLY You can't write against a read only replica.").errorKind == .readOnly)
        #expect(RedisValue.error("MASTERDOWN Link with MASTER is down").errorKind == .masterDown)
        #expect(RedisValue.error("ERR READONLY is a word here").errorKind == .other)
        #expect(RedisValue.error("READONLYX").errorKind == .other)
        #expect(RedisValue.status("READONLY").errorKind == nil)
    }

    @Test("a published message gives its channel and payload; a subscription's confirmation does not")
    func publishedMessages() throws {
        let message = RedisValue.array([.string(Array("message".utf8)), .string(Array("news".utf8)), .string(Array("5".utf8))])
        let read = try #require(message.publishedMessage)
        #expect(read.channel == "news")
        #expect(read.payload == .string(Array("5".utf8)))
        #expect(RedisValue.array([.string(Array("subscribe".utf8)), .string(Array("news".utf8)), .integer(1)]).publishedMessage == nil)
        #expect(RedisValue.array([.string(Array("message".utf8)), .string(Array("news".utf8))]).publishedMessage == nil)
        #expect(RedisValue.string(Array("message".utf8)).publishedMessage == nil)
    }

    /// Messages on a sentinel's channels (channel, payload) and the primary each names for the
    /// master `tokens`.
    static let sentinelMessages: [(String, String, String?)] = [
        ("+switch-master", "tokens 10.0.0.1 6379 10.0.0.2 6380", "10.0.0.2:6380"),
        ("+switch-master", "tokens 127.0.0.1 6379 127.0.0.1 6380", "127.0.0.1:6380"),
        ("+switch-master", "tokens ::1 6379 ::2 6380", "[::2]:6380"),
        ("+switch-master", "tokens ::1 6379 ::1 6380", "[::1]:6380"),
        ("+switch-master", "other 10.0.0.1 6379 10.0.0.2 6380", nil),
        ("+switch-master", "other 127.0.0.1 6379 127.0.0.1 6380", nil),
        ("+switch-master", "tokens 10.0.0.1 6379 10.0.0.2 port", nil),
        ("+switch-master", "tokens 127.0.0.1 6379", nil),
        ("+sdown", "tokens 10.0.0.1 6379 10.0.0.2 6380", nil),
        ("+sdown", "tokens 127.0.0.1 6379 127.0.0.1 6380", nil),
    ]

    @Test("a sentinel's +switch-master names the new primary of its master only", arguments: sentinelMessages)
    func switchedPrimary(channel: String, payload: String, primary: String?) {
        let message = RedisValue.array([.string(Array("message".utf8)), .string(Array(channel.utf8)), .string(Array(payload.utf8))])
        #expect(RedisSentinels.switchedPrimary(message, master: "tokens") == primary)
    }

    @Test("the confirmation of a subscription to +switch-master names no primary")
    func subscriptionConfirmationNamesNoPrimary() {
        let confirmation = RedisValue.array([.string(Array("subscribe".utf8)), .string(Array("+switch-master".utf8)), .integer(1)])
        #expect(RedisSentinels.switchedPrimary(confirmation, master: "tokens") == nil)
    }
}
