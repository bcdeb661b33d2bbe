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

    @Test func aSliceComparesByItsOwnBytesWhateverItsIndices() {
        let read = Array("Bearer placeholder-value".utf8)
        #expect(constantTimeEquals(Array("placeholder-value".utf8), read[7...]))
        #expect(!constantTimeEquals(Array("placeholder-valuE".utf8), read[7...]))
        #expect(!constantTimeEquals(Array("placeholder-value".utf8), read[6...]))
        #expect(!constantTimeEquals(Array("placeholder-value0".utf8), read[7...]))
        #expect(constantTimeEquals([UInt8](), read[read.endIndex...]))
        #expect(!constantTimeEquals([0], read[read.endIndex...]))
    }
}

@Suite struct ASCIILowerTests {
    @Test func onlyTheCapitalsAToZChange() {
        for value in 0...255 {
            let byte = UInt8(value)
            let expected = (65...90).contains(value) ? byte + 32 : byte
            #expect(asciiLower(byte) == expected, "byte \(value)")
        }
    }
}

@Suite struct CivilTimeTests {
    @Test func theEpochIsThursdayJanuaryFirst1970() {
        let time = CivilTime(epochSeconds: 0)
        #expect((time.year, time.month, time.day, time.secondOfDay, time.days) == (1970, 1, 1, 0, 0))
    }

    @Test(arguments: [
        // (seconds, year, month, day, second of day), checked with `date -u -d @seconds`.
        (951_782_399, 2000, 2, 28, 86_399), (951_782_400, 2000, 2, 29, 0), (951_868_800, 2000, 3, 1, 0),
        (4_102_444_799, 2099, 12, 31, 86_399), (1_795_316_400, 2026, 11, 22, 10_800),
        (-1, 1969, 12, 31, 86_399), (-86_400, 1969, 12, 31, 0), (-2_208_988_800, 1900, 1, 1, 0),
    ])
    func leapDaysCenturiesAndTimesBeforeTheEpochAreRight(seconds: Int, year: Int, month: Int, day: Int, secondOfDay: Int) {
        let time = CivilTime(epochSeconds: seconds)
        #expect((time.year, time.month, time.day, time.secondOfDay) == (year, month, day, secondOfDay))
    }

    @Test func daysCountWholeDaysDownward() {
        #expect(CivilTime(epochSeconds: 86_399).days == 0)
        #expect(CivilTime(epochSeconds: 86_400).days == 1)
        #expect(CivilTime(epochSeconds: -1).days == -1)
    }
}
