import Testing

@testable import Logs

@Suite struct AuditTimestampCacheTests {
    @Test func aReusedTimestampWritesTheBytesOfAFreshOneAcrossSecondsAndDays() {
        var cache = AuditTimestamp()
        // The same second twice, the next second, a day's end and the next day.
        let times = [(1_795_316_400, 42), (1_795_316_400, 999), (1_795_316_401, 0), (1_795_391_999, 7), (1_795_392_000, 120)]
        for (seconds, milliseconds) in times {
            var reused: [UInt8] = []
            cache.append(seconds: seconds, milliseconds: milliseconds, to: &reused)
            var fresh: [UInt8] = []
            AuditEvent.appendTimestamp(seconds: seconds, milliseconds: milliseconds, to: &fresh)
            #expect(String(decoding: reused, as: UTF8.self) == String(decoding: fresh, as: UTF8.self))
        }
    }

    @Test func aLoopsBufferHoldsOnlyTheLastLine() {
        let log = AuditLog()
        var buffer = AuditLineBuffer()
        var event = AuditEvent(kind: .request, seconds: AuditEventTests.seconds, milliseconds: 42)
        event.status = 200
        log.write(event, buffer: &buffer)
        log.write(event, buffer: &buffer)
        #expect(String(decoding: buffer.bytes, as: UTF8.self) == event.line)
    }
}
