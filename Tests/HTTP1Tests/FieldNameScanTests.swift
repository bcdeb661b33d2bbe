@testable import HTTP1
import Testing

@Suite("Field names eight bytes at a time")
struct FieldNameWordTests {
    /// The word test against the byte test, for every byte value in every position.
    @Test("allLettersOrHyphens agrees with a byte-by-byte check for every byte in every position")
    func agreesWithTheByteCheck() {
        func byByte(_ bytes: [UInt8]) -> Bool {
            bytes.allSatisfy { ($0 | 0x20) >= UInt8(ascii: "a") && ($0 | 0x20) <= UInt8(ascii: "z") && $0 < 0x80 || $0 == UInt8(ascii: "-") }
        }
        let base = Array("Content-".utf8)
        for position in 0..<8 {
            for value in 0...255 {
                var bytes = base
                bytes[position] = UInt8(value)
                let word = bytes.withUnsafeBytes { UInt64(littleEndian: $0.loadUnaligned(as: UInt64.self)) }
                #expect(allLettersOrHyphens(word) == byByte(bytes), "byte \(value) at \(position)")
            }
        }
    }

    @Test("a name longer than a word, with a colon, an underscore or a bad byte past the first eight")
    func namesPastTheFirstWord() {
        func scan(_ line: String) -> Result<FieldLineParts, FieldLineProblem> {
            Array(line.utf8).withUnsafeBytes { scanFieldLine($0) }
        }
        guard case .success(let parts) = scan("Content-Length: 12") else { Issue.record("refused"); return }
        #expect(parts.colon == 14)
        #expect(parts.value == 16..<18)
        guard case .success(let underscored) = scan("X-Forwarded_For: a") else { Issue.record("refused"); return }
        #expect(underscored.nameHasUnderscore)
        guard case .failure(.invalidName) = scan("Content-Le ngth: 1") else { Issue.record("accepted a space in a name"); return }
        guard case .failure(.noColon) = scan("Content-Length-Without-Colon") else { Issue.record("accepted a line without a colon"); return }
    }
}
