import Basics
import Testing

@testable import HTTP1

@Suite("Field names eight bytes at a time")
struct FieldNameWordTests {
    /// The word test against the byte test, for every byte value in every position.
    @Test("lettersAndHyphens marks exactly the letters and hyphens, for every byte value in every position")
    func agreesWithTheByteCheck() {
        func isLetterOrHyphen(_ b: UInt8) -> Bool {
            (b >= UInt8(ascii: "a") && b <= UInt8(ascii: "z")) || (b >= UInt8(ascii: "A") && b <= UInt8(ascii: "Z")) || b == UInt8(ascii: "-")
        }
        let base = Array("Content-".utf8)
        for position in 0..<8 {
            for value in 0...255 {
                var bytes = base
                bytes[position] = UInt8(value)
                let word = bytes.withUnsafeBytes { UInt64(littleEndian: $0.loadUnaligned(as: UInt64.self)) }
                let marks = lettersAndHyphens(word)
                for (i, b) in bytes.enumerated() {
                    #expect((marks >> (8 * UInt64(i) + 7)) & 1 == (isLetterOrHyphen(b) ? 1 : 0), "byte \(value) at \(position), looking at \(i)")
                }
            }
        }
    }

    @Test("a name longer than a word, with a colon, an underscore or a bad byte past the first eight")
    func namesPastTheFirstWord() {
        func scan(_ line: String) -> Result<FieldLineParts, FieldLineProblem> {
            Array(line.utf8).withUnsafeBytes { scanFieldLine($0) }
        }
        guard case .success(let parts) = scan("Content-Length: 12") else {
            Issue.record("refused")
            return
        }
        #expect(parts.colon == 14)
        #expect(parts.value == 16..<18)
        guard case .success(let underscored) = scan("X-Forwarded_For: a") else {
            Issue.record("refused")
            return
        }
        #expect(underscored.nameHasUnderscore)
        guard case .failure(.invalidName) = scan("Content-Le ngth: 1") else {
            Issue.record("accepted a space in a name")
            return
        }
        guard case .failure(.noColon) = scan("Content-Length-Without-Colon") else {
            Issue.record("accepted a line without a colon")
            return
        }
        guard case .failure(.invalidName) = scan("Content-L\u{E9}ngth: 1") else {
            Issue.record("accepted a non-ASCII name")
            return
        }
        guard case .success(let short) = scan("Date:x") else {
            Issue.record("refused a short name")
            return
        }
        #expect(short.colon == 4)
        guard case .success(let digits) = scan("X-Trace-Id-128: 7") else {
            Issue.record("refused digits in a name")
            return
        }
        #expect(digits.colon == 14)
    }
}

@Suite("Case-insensitive comparison eight bytes at a time")
struct WordComparisonTests {
    @Test("asciiLowerWord lowers exactly A to Z, for every byte value in every position")
    func lowersExactlyTheCapitals() {
        for position in 0..<8 {
            for value in 0...255 {
                var bytes = Array("Content-".utf8)
                bytes[position] = UInt8(value)
                let word = bytes.withUnsafeBytes { $0.loadUnaligned(as: UInt64.self) }
                let expected: UInt64? =
                    bytes.contains { $0 >= 0x80 }
                    ? nil : bytes.map { $0 >= 0x41 && $0 <= 0x5A ? $0 | 0x20 : $0 }.withUnsafeBytes { $0.loadUnaligned(as: UInt64.self) }
                #expect(asciiLowerWord(word) == expected, "byte \(value) at \(position)")
            }
        }
    }

    @Test("names of every length up to 17 compare ignoring case, and differ on every byte")
    func comparesEveryLength() {
        let literals: [StaticString] = [
            "t", "tr", "tra", "tran", "trans", "transf", "transfe", "transfer", "transfer-", "transfer-e", "transfer-en", "transfer-enc", "transfer-enco",
            "transfer-encod", "transfer-encodi", "transfer-encodin", "transfer-encoding",
        ]
        for literal in literals {
            let length = literal.utf8CodeUnitCount
            let text = literal.withUTF8Buffer { String(decoding: $0, as: UTF8.self) }
            let upper = Array(text.uppercased().utf8)
            upper.withUnsafeBytes { raw in
                #expect(asciiEqualsIgnoringCase(raw, 0..<length, literal))
                #expect(!asciiEqualsIgnoringCase(raw, 0..<(length - 1), literal))
            }
            for position in 0..<length {
                var changed = upper
                changed[position] ^= 0x01
                changed.withUnsafeBytes { raw in
                    #expect(!asciiEqualsIgnoringCase(raw, 0..<length, literal), "\(text) changed at \(position)")
                }
            }
        }
    }
}

@Suite("Field values eight bytes at a time")
struct FieldValueWordTests {
    @Test("every value length from 0 to 24, with a control byte or DEL in every position, is refused; HTAB and obs-text pass")
    func everyPositionOfEveryLength() {
        for length in 0...24 {
            let clean = [UInt8](repeating: UInt8(ascii: "a"), count: length)
            clean.withUnsafeBytes { #expect(allFieldValueBytes($0, 0..<length), "clean length \(length)") }
            for position in 0..<length {
                for bad: UInt8 in [0x00, 0x0A, 0x0D, 0x1F, 0x7F] {
                    var value = clean
                    value[position] = bad
                    value.withUnsafeBytes { #expect(!allFieldValueBytes($0, 0..<length), "byte \(bad) at \(position) of \(length)") }
                }
                for good: UInt8 in [0x09, 0x20, 0x80, 0xFF] {
                    var value = clean
                    value[position] = good
                    value.withUnsafeBytes { #expect(allFieldValueBytes($0, 0..<length), "byte \(good) at \(position) of \(length)") }
                }
            }
        }
    }
}
