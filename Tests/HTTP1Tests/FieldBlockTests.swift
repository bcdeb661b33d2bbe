import HTTP1
import Testing

/// FieldBlock keeps a head's fields as bytes (a response's appended line by line, normalised); what a
/// user sees depends on these answers.
@Suite struct FieldBlockTests {
    func head(_ lines: [String]) -> (FieldBlock, [Bool]) {
        var head = FieldBlock()
        let accepted = lines.map { line in Array(line.utf8).withUnsafeBytes { head.append(fieldLine: $0) } }
        return (head, accepted)
    }

    @Test func fieldsAreNormalisedAndCopiedAsLines() {
        let (h, accepted) = head(["Content-Type:  text/plain \t", "X-Empty:", "Set-Cookie: a=b; Path=/"])
        #expect(accepted == [true, true, true])
        #expect(h.count == 3)
        #expect(h.name(0) == "Content-Type" && h.value(0) == "text/plain")
        #expect(h.value(1) == "")
        let out = ByteBuffer()
        for i in 0..<h.count { h.copyField(i, to: out) }
        #expect(String(decoding: out.bytes, as: UTF8.self) == "Content-Type: text/plain\r\nX-Empty: \r\nSet-Cookie: a=b; Path=/\r\n")
    }

    @Test(arguments: [" folded", "\tfolded", "No colon", ": v", "Bad Name: v", "X: a\u{0}b", "X: a\rb", ""])
    func invalidLinesAreRefusedAndAddNothing(_ line: String) {
        let (h, accepted) = head(["A: 1", line])
        #expect(accepted == [true, false])
        #expect(h.count == 1)
    }

    @Test func aValuesBytesAreReadInPlaceWithoutTheWhitespaceAround() {
        let (h, _) = head(["Host: a", "Authorization:  Bearer abc \t", "X-Empty:"])
        #expect(Array(h.valueBytes(1)) == Array("Bearer abc".utf8))
        #expect(h.valueBytes(1).startIndex > 0, "a slice of the block, not a copy")
        #expect(h.valueBytes(2).isEmpty)
    }

    @Test func everyByteValueIsJudgedTheSameAtEveryPositionOfAValue() {
        // Values are checked eight bytes at a time: each byte value, at each offset of a long value.
        for byte in 0...255 {
            let allowed = byte == 0x09 || (byte >= 0x20 && byte != 0x7F)
            for position in 0..<19 {
                var line = Array("X: ".utf8) + Array(repeating: UInt8(ascii: "v"), count: 19) + Array("z".utf8)
                line[3 + position] = UInt8(byte)
                var h = FieldBlock()
                let accepted = line.withUnsafeBytes { h.append(fieldLine: $0) }
                if accepted != allowed {
                    Issue.record("byte \(byte) at \(position): accepted \(accepted)")
                    return
                }
            }
        }
    }

    @Test func aFieldNameIsExactlyTheTokenCharacters() {
        let tchar = Set("!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ".utf8)
        for byte in 0...255 where byte != Int(UInt8(ascii: ":")) {
            var h = FieldBlock()
            let accepted = [UInt8(ascii: "X"), UInt8(byte), UInt8(ascii: ":"), UInt8(ascii: " "), UInt8(ascii: "v")].withUnsafeBytes {
                h.append(fieldLine: $0)
            }
            #expect(accepted == tchar.contains(UInt8(byte)), "byte \(byte)")
        }
    }

    @Test func namesAndValuesCompareIgnoringASCIICase() {
        let (h, _) = head(["CONTENT-length: 12", "Connection: Keep-Alive", "X-Custom: v"])
        #expect(h.nameEquals(0, "content-length"))
        #expect(!h.nameEquals(0, "content-type"))
        #expect(h.valueEquals(1, "keep-alive"))
        #expect(h.nameEquals(2, lowercasedName: "x-custom"))
    }

    @Test(
        arguments: [
            ("12", 12), ("0", 0), ("007", 7), ("", nil), ("+5", nil), ("1 2", nil), ("-1", nil), ("12a", nil),
            ("1234567890123456789", nil),
        ] as [(String, Int?)])
    func contentLengthIsDigitsOnly(_ value: String, _ expected: Int?) {
        let (h, _) = head(["Content-Length: \(value)"])
        #expect(h.decimalValue(0) == expected)
    }

    @Test func hopByHopNamesIncludeTheConnectionOptions() {
        let (h, _) = head(["Keep-Alive: timeout=5", "Transfer-Encoding: chunked", "TE: trailers", "X-Trace: 1", "Content-Type: a"])
        let hop = (0..<h.count).map { h.isHopByHop($0, connectionOptions: ["x-trace"]) }
        #expect(hop == [true, true, true, true, false])
    }

    @Test func everyFixedHopByHopNameIsHopByHopWithoutConnectionOptions() {
        // isHopByHop tells most names by their length first: each fixed name's length must pass.
        let names = [
            "Connection", "Keep-Alive", "Proxy-Connection", "Proxy-Authenticate", "Proxy-Authorization", "te",
            "Trailer", "Transfer-Encoding", "UPGRADE", "Content-Type", "X-Upgrade", "Upgrade-Insecure-Requests",
        ]
        let (h, _) = head(names.map { "\($0): v" })
        let hop = (0..<h.count).map { h.isHopByHop($0, connectionOptions: []) }
        #expect(hop == [true, true, true, true, true, true, true, true, true, false, false, false])
    }

    @Test func aCopyKeepsItsFieldsWhenTheOriginalIsReused() {
        var (h, _) = head(["A: 1", "B: 2"])
        let held = h
        h.removeAll()
        _ = Array("C: 3".utf8).withUnsafeBytes { h.append(fieldLine: $0) }
        #expect(held.count == 2 && held.value(1) == "2")
        var rebuilt = FieldBlock()
        rebuilt.append(fieldAt: 1, of: held)
        rebuilt.append(name: "Content-Length", value: "0")
        #expect(rebuilt.name(0) == "B" && rebuilt.value(0) == "2" && rebuilt.nameEquals(1, "content-length"))
    }
}

@Suite struct FieldRunTests {
    @Test func aRunOfFieldsIsCopiedAsTheFieldsOneByOneWouldBe() {
        var block = FieldBlock()
        for line in ["Server: nginx", "Date:Thu, 26 Nov 2026 00:49:07 GMT  ", "X-Obs: caf\u{E9}", "Content-Length: 36"] {
            _ = Array(line.utf8).withUnsafeBytes { block.append(fieldLine: $0) }
        }
        #expect(block.isNormalized)
        for lower in 0...block.count {
            for upper in lower...block.count {
                let run = ByteBuffer()
                block.copyFields(lower..<upper, to: run)
                let oneByOne = ByteBuffer()
                for i in lower..<upper { block.copyField(i, to: oneByOne) }
                #expect(run.bytes == oneByOne.bytes, "fields \(lower)..<\(upper)")
            }
        }
        let all = ByteBuffer()
        block.copyFields(0..<block.count, to: all)
        #expect(
            String(decoding: all.bytes, as: UTF8.self) == "Server: nginx\r\nDate: Thu, 26 Nov 2026 00:49:07 GMT\r\nX-Obs: caf\u{E9}\r\nContent-Length: 36\r\n")
    }
}
