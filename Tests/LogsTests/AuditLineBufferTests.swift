import Testing

@testable import Logs

@Suite struct AuditLineBufferTests {
    @Test func aReusedTimestampWritesTheBytesOfAFreshOneAcrossSecondsAndDays() {
        let buffer = AuditLineBuffer()
        // The same second twice, the next second, a day's end and the next day.
        let times = [(1_795_316_400, 42), (1_795_316_400, 999), (1_795_316_401, 0), (1_795_391_999, 7), (1_795_392_000, 120)]
        for (seconds, milliseconds) in times {
            buffer.clear()
            buffer.timestamp.append(seconds: seconds, milliseconds: milliseconds, to: buffer)
            var fresh: [UInt8] = []
            AuditEvent.appendTimestamp(seconds: seconds, milliseconds: milliseconds, to: &fresh)
            #expect(Array(buffer.bytes) == fresh)
        }
    }

    @Test(arguments: [0, 7, 200, 1234, -5, Int.max, Int.min + 1])
    func numbersAreWrittenInDecimal(value: Int) {
        let buffer = AuditLineBuffer()
        buffer.appendDecimal(value)
        #expect(String(decoding: buffer.bytes, as: UTF8.self) == String(value))
    }

    @Test func aLoopsBufferHoldsOnlyTheLastLineAndGrowsForALongOne() {
        let log = AuditLog()
        let buffer = AuditLineBuffer(capacity: 8)
        var event = AuditEvent(kind: .request, seconds: AuditEventTests.seconds, milliseconds: 42)
        event.status = 200
        event.path = "/" + String(repeating: "a\"", count: 300)
        log.write(event, buffer: buffer)
        event.path = "/short"
        log.write(event, buffer: buffer)
        #expect(String(decoding: buffer.bytes, as: UTF8.self) == event.line)
    }

    @Test func theEscapeTestFindsEveryByteTheEscaperChanges() {
        for byte in UInt8.min...UInt8.max {
            let changed = byte < 0x20 || byte == 0x7F || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") || byte == 0xE2
            #expect(AuditLineBuffer.mayNeedEscape(byte) == changed, "\(byte)")
        }
    }
}
