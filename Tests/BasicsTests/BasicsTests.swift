import Basics
import Testing

@Suite struct AuthorityTests {
    @Test func anIPv6HostGoesInBracketsAndNoOtherDoes() {
        #expect(Authority(host: "::1", port: 8080).description == "[::1]:8080")
        #expect(Authority(host: "127.0.0.1", port: 8080).description == "127.0.0.1:8080")
        #expect(Authority(host: "api.example.com", port: 443).description == "api.example.com:443")
        #expect(Authority.bracketed("fe80::1") == "[fe80::1]")
        #expect(Authority.bracketed("localhost") == "localhost")
    }

    @Test func httpsDefaultsTo443AndEverythingElseTo80() {
        #expect(Authority.defaultPort(scheme: "https") == 443)
        #expect(Authority.defaultPort(scheme: "http") == 80)
        #expect(Authority.defaultPort(scheme: nil) == 80)
    }

    @Test func aHostFieldLeavesOutOnlyItsSchemesDefaultPort() {
        #expect(Authority(host: "a.example", port: 443).omittingDefaultPort(of: "https") == "a.example")
        #expect(Authority(host: "a.example", port: 443).omittingDefaultPort(of: "http") == "a.example:443")
        #expect(Authority(host: "a.example", port: 80).omittingDefaultPort(of: "http") == "a.example")
        #expect(Authority(host: "::1", port: 80).omittingDefaultPort(of: "http") == "[::1]")
        #expect(Authority(host: "::1", port: 8443).omittingDefaultPort(of: "https") == "[::1]:8443")
    }
}

@Suite struct JSONStringTests {
    @Test func quotesBackslashesAndControlCharactersAreEscaped() {
        #expect(JSONString.quoted(#"a "b" \c"#) == #""a \"b\" \\c""#)
        #expect(JSONString.quoted("1\n2\r3\t4") == #""1\n2\r3\t4""#)
        #expect(JSONString.quoted("\u{0}\u{1F}\u{7F}") == #""\u0000\u001f\u007f""#)
    }

    @Test func lineSeparatorsAreEscapedAndOtherUnicodePassesAsItIs() {
        #expect(JSONString.quoted("a\u{2028}b\u{2029}c") == #""a\u2028b\u2029c""#)
        // Same first byte (E2), other characters: "…" is E2 80 A6, "€" is E2 82 AC.
        #expect(JSONString.quoted("…€ é 日本") == "\"…€ é 日本\"")
        // A string that ends inside the pattern's bytes.
        #expect(JSONString.quoted("x\u{2026}") == "\"x\u{2026}\"")
        #expect(JSONString.quoted("") == #""""#)
    }

    @Test func appendingAddsNoQuotes() {
        var out = Array("[".utf8)
        JSONString.appendEscaped("a\"b", to: &out)
        #expect(String(decoding: out, as: UTF8.self) == #"[a\"b"#)
    }

    @Test func aLogLineKeepsItsQuotesAndLineSeparatorsAndLosesOnlyItsControlCharacters() {
        #expect(JSONString.controlCharactersEscaped(#"say "hi" \ bye"#) == #"say "hi" \ bye"#)
        #expect(JSONString.controlCharactersEscaped("a\nb\u{7F}c\u{1}") == #"a\nb\u007fc\u0001"#)
        #expect(JSONString.controlCharactersEscaped("a\u{2028}b") == "a\u{2028}b")
    }

    @Test func everyByteBelow128RoundTripsThroughTheEscape() {
        for value in 0..<128 {
            let text = String(UnicodeScalar(UInt8(value)))
            let quoted = JSONString.quoted(text)
            #expect(quoted.hasPrefix("\"") && quoted.hasSuffix("\"") && quoted.count >= 3)
            #expect(!quoted.dropFirst().dropLast().unicodeScalars.contains { $0.value < 0x20 || $0.value == 0x7F })
        }
    }
}

@Suite struct ConstantTimeTests {
    @Test func equalBytesAreEqualAndAnyDifferenceIsNot() {
        #expect(constantTimeEquals(Array("secret".utf8), Array("secret".utf8)))
        #expect(constantTimeEquals([], []))
        #expect(!constantTimeEquals(Array("secret".utf8), Array("secreT".utf8)))
        #expect(!constantTimeEquals(Array("Secret".utf8), Array("secret".utf8)))
    }

    @Test func aPrefixIsNotEqualEvenWhenTheRestWouldBeZeros() {
        #expect(!constantTimeEquals(Array("abc".utf8), Array("abcd".utf8)))
        #expect(!constantTimeEquals([0x61], [0x61, 0]))
        #expect(!constantTimeEquals([], [0]))
    }

    /// Bytes in memory: a slice of a read, compared in place, and a prefix or a zero at the end.
    @Test func bytesInMemoryCompareByTheirOwnBytesAndLength() {
        let read = Array("Bearer placeholder-value".utf8)
        func same(_ value: String, _ slice: ArraySlice<UInt8>) -> Bool {
            Array(value.utf8).withUnsafeBytes { a in slice.withUnsafeBytes { constantTimeEquals(a, $0) } }
        }
        #expect(same("placeholder-value", read[7...]))
        #expect(!same("placeholder-valuE", read[7...]))
        #expect(!same("placeholder-value", read[6...]))
        #expect(!same("placeholder-value0", read[7...]))
        #expect(!same("placeholder-valu", read[7...]))
        #expect(same("", read[read.endIndex...]))
        #expect(!same("\u{0}", read[read.endIndex...]))
    }
}
