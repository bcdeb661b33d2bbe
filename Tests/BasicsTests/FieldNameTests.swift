import Basics
import Testing

/// One tchar check (RFC 9110 §5.6.2) for HTTP1's parsers, `inject.header` and the DPoP challenge.
@Suite struct FieldNameTests {
    @Test func aFieldNameIsANonEmptyToken() {
        #expect(isValidFieldName("X-Api-Key"))
        #expect(isValidFieldName("!#$%&'*+-.^_`|~09azAZ"))
        #expect(!isValidFieldName(""))
        #expect(!isValidFieldName("a b"))
        #expect(!isValidFieldName("a:b"))
        #expect(!isValidFieldName("caf\u{E9}"))
        let tchars = (0..<256).filter { isTokenByte(UInt8($0)) }.count
        #expect(tchars == 15 + 10 + 52, "RFC 9110 §5.6.2: 15 marks, DIGIT and ALPHA")
    }
}
