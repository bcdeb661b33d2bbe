import Basics
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

    @Test func aLoopsBufferGathersLinesUntilTheyAreWrittenAndGrowsForALongOne() {
        let log = AuditLog()
        let buffer = AuditLineBuffer(capacity: 8)
        var long = AuditEvent(kind: .request, seconds: AuditEventTests.seconds, milliseconds: 42)
        long.status = 200
        long.path = "/" + String(repeating: "a\"", count: 300)
        var short = long
        short.path = "/short"
        log.append(long, to: buffer)
        log.append(short, to: buffer)
        #expect(String(decoding: buffer.bytes, as: UTF8.self) == long.line + short.line)
        #expect(buffer.lines == 2)
        log.write(buffer)
        #expect(buffer.isEmpty && buffer.lines == 0)
    }

    /// Every byte value at every place of texts of 1 to 20 bytes (a word's eight, the overlapping
    /// last word, the bytes of a short text one by one), and texts with non-ASCII characters:
    /// the same as `JSONString`'s escaping.
    @Test func aQuotedTextIsWhatTheJSONEscaperWrites() {
        let buffer = AuditLineBuffer()
        for length in 1...20 {
            for place in 0..<length {
                for byte in UInt8(0)...0x7F {
                    var bytes = [UInt8](repeating: UInt8(ascii: "a"), count: length)
                    bytes[place] = byte
                    let text = String(decoding: bytes, as: UTF8.self)
                    buffer.clear()
                    buffer.appendQuoted(text)
                    #expect(String(decoding: buffer.bytes, as: UTF8.self) == JSONString.quoted(text), "\(bytes)")
                }
            }
        }
        for text in ["", "café/über", "x\u{2028}y\u{2029}", "/a-long-path-with-é-and-\u{2028}-in-it", "日本語のパス"] {
            buffer.clear()
            buffer.appendQuoted(text)
            #expect(String(decoding: buffer.bytes, as: UTF8.self) == JSONString.quoted(text), "\(text)")
        }
    }

    @Test func theWordTestFlagsEveryByteThatMayNeedAnEscapeAtEveryPlace() {
        for byte in UInt8.min...UInt8.max {
            let flagged = AuditLineBuffer.mayNeedEscape(byte) || byte >= 0x80
            for place in 0..<8 {
                let word = UInt64(0x6161_6161_6161_6161) & ~(UInt64(0xFF) << (8 * place)) | UInt64(byte) << (8 * place)
                #expect(AuditLineBuffer.mayNeedEscape(word) == flagged, "\(byte) at \(place)")
            }
        }
    }

    @Test func theEscapeTestFindsEveryByteTheEscaperChanges() {
        for byte in UInt8.min...UInt8.max {
            let changed = byte < 0x20 || byte == 0x7F || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") || byte == 0xE2
            #expect(AuditLineBuffer.mayNeedEscape(byte) == changed, "\(byte)")
        }
    }
}
