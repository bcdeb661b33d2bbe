import HTTP1
import Testing

// The chunked decoder is shared by both parsers: each case runs through the request parser and the
// response parser, byte at a time and split at every point, and must end the same way on both sides
// (each side's own error type: RequestParseError for a client, ResponseParseError for an upstream).

/// How a chunked body ended, whichever parser read it.
enum ChunkedOutcome: Equatable {
    case body([UInt8])
    case malformed(String)
    case trailersTooLarge
}

/// The body after a fixed chunked request head and a fixed chunked response head. `trailerLimit` is
/// the trailer section's limit: the request head fits the limit too (it is the same limit).
func bothSides(_ body: String, trailerLimit: Int = 8192, sourceLocation: SourceLocation = #_sourceLocation) -> (
    request: ChunkedOutcome?, response: ChunkedOutcome?
) {
    let requestEvents = dripFeed(
        "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n" + body,
        limits: ParserLimits(maxHeaderBytes: trailerLimit, maxBodyBytes: 0), sourceLocation: sourceLocation)
    let request: ChunkedOutcome?
    switch requestEvents.dropFirst().last {
    case .end?:
        if case .body(let bytes)? = requestEvents.dropLast().last { request = .body(bytes) } else { request = .body([]) }
    case .error(.badRequest(let reason))?: request = .malformed(reason)
    case .error(.headersTooLarge)?: request = .trailersTooLarge
    default: request = nil
    }
    let fed = verifyResponses(
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + body, limits: ResponseParserLimits(maxHeadBytes: trailerLimit),
        sourceLocation: sourceLocation)
    let response: ChunkedOutcome?
    switch fed.events.dropFirst().last {
    case .end?:
        if case .body(let bytes)? = fed.events.dropLast().last { response = .body(bytes) } else { response = .body([]) }
    case .error(.malformed(let reason))?: response = .malformed(reason)
    case .error(.headTooLarge)?: response = .trailersTooLarge
    default: response = nil
    }
    return (request, response)
}

/// Both parsers end `body` the same way: with `outcome`.
func expectBothSides(_ body: String, trailerLimit: Int = 8192, end outcome: ChunkedOutcome, sourceLocation: SourceLocation = #_sourceLocation) {
    let got = bothSides(body, trailerLimit: trailerLimit, sourceLocation: sourceLocation)
    #expect(got.request == outcome, sourceLocation: sourceLocation)
    #expect(got.response == outcome, sourceLocation: sourceLocation)
}

@Suite struct ChunkedBodyTests {
    /// The limit of RFC 9112 §7.1.1's chunk-ext, BWS and ";" included, the CR not.
    static let extensionLimit = 4096

    /// Malformed chunked bodies and the reason each is refused for: the request parser answers 400
    /// and the response parser refuses the answer, each with this reason (RequestParserTests,
    /// ResponseParserTests).
    static let malformedBodies: [(String, String)] = [
        ("0x10\r\n", "invalid chunk size"),
        ("-1\r\n", "invalid chunk size"),
        ("\r\n", "invalid chunk size"),
        (";ext\r\n", "invalid chunk size"),
        (" 5\r\nhello\r\n", "invalid chunk size"),
        ("5 \r\nhello\r\n", "invalid chunk size"),
        ("5 x\r\nhello\r\n", "invalid chunk size"),
        ("5g\r\nhello\r\n", "invalid chunk size"),
        ("+5\r\nhello\r\n", "invalid chunk size"),
        ("5\nhello\r\n", "invalid chunk size"),
        ("5\r\rhello\r\n", "invalid chunk size line"),
        ("8000000000000000\r\n", "chunk size too large"),
        ("FFFFFFFFFFFFFFFFF\r\n", "chunk size too large"),
        ("000000000000000000000000000000001\r\nx\r\n", "chunk size too large"),
        ("5\r\nhelloX\r\n0\r\n\r\n", "missing CRLF after chunk data"),
        ("5\r\nhello\n0\r\n\r\n", "missing CRLF after chunk data"),
        ("5\r\nhello\rX0\r\n\r\n", "missing CRLF after chunk data"),
        ("3\r\nhello\r\n", "missing CRLF after chunk data"),
        ("5;a=\u{0}\r\nhello\r\n", "invalid chunk extension"),
        ("5;a\nhello\r\n", "invalid chunk extension"),
        ("0\r\nX-T: a\u{1}\r\n\r\n", "invalid trailer line"),
        ("0\r\n folded\r\n\r\n", "obsolete line folding"),
        ("0\r\nnocolon\r\n\r\n", "invalid trailer line"),
        // The exact boundary, on both sides: the tests below.
        ("1;" + String(repeating: "a", count: 5000) + "\r\nx\r\n0\r\n\r\n", "chunk extension too long"),
    ]

    @Test func anExtensionOfExactlyTheLimitIsSkippedOnBothSides() {
        let ext = ";" + String(repeating: "a", count: Self.extensionLimit - 1)
        expectBothSides("1\(ext)\r\nx\r\n0\r\n\r\n", end: .body(bytes("x")))
    }

    @Test func anExtensionOneByteOverTheLimitIsRefusedOnBothSides() {
        let ext = ";" + String(repeating: "a", count: Self.extensionLimit)
        expectBothSides("1\(ext)\r\nx\r\n0\r\n\r\n", end: .malformed("chunk extension too long"))
    }

    @Test func whitespaceBeforeTheSemicolonCountsAsExtension() {
        let fits = bothSides("1 \t;" + String(repeating: "a", count: Self.extensionLimit - 3) + "\r\nx\r\n0\r\n\r\n")
        #expect(fits.request == .body(bytes("x")) && fits.response == .body(bytes("x")))
        expectBothSides("1 \t;" + String(repeating: "a", count: Self.extensionLimit - 2) + "\r\nx\r\n0\r\n\r\n", end: .malformed("chunk extension too long"))
    }

    @Test func theLimitAppliesToEachChunkSeparately() {
        let ext = ";" + String(repeating: "a", count: Self.extensionLimit - 1)
        expectBothSides("1\(ext)\r\nx\r\n1\(ext)\r\ny\r\n0\(ext)\r\n\r\n", end: .body(bytes("xy")))
    }

    @Test func thirtyTwoSizeDigitsAreAcceptedAndThirtyThreeAreNot() {
        let fits = bothSides(String(repeating: "0", count: 31) + "1\r\nx\r\n0\r\n\r\n")
        #expect(fits.request == .body(bytes("x")) && fits.response == .body(bytes("x")))
        expectBothSides(String(repeating: "0", count: 32) + "1\r\nx\r\n0\r\n\r\n", end: .malformed("chunk size too large"))
    }

    @Test func aTrailerSectionOfExactlyTheLimitIsAcceptedAndOneByteMoreIsNot() {
        // The limit counts the section from its first byte through the blank line's LF.
        let limit = 128
        let line = "X-T: " + String(repeating: "a", count: limit - 9) + "\r\n"  // + "\r\n": exactly `limit`
        let fits = bothSides("1\r\nx\r\n0\r\n" + line + "\r\n", trailerLimit: limit)
        #expect(fits.request == .body(bytes("x")) && fits.response == .body(bytes("x")))
        let over = bothSides("1\r\nx\r\n0\r\n" + "a" + line + "\r\n", trailerLimit: limit)
        #expect(over.request == .trailersTooLarge && over.response == .trailersTooLarge)
        let bareLF = bothSides("1\r\nx\r\n0\r\n" + "X-T: " + String(repeating: "a", count: limit - 7) + "\n\n", trailerLimit: limit)
        #expect(bareLF.request == .body(bytes("x")) && bareLF.response == .body(bytes("x")))
    }

    @Test func aBadTrailerLineIsRefusedAsSoonAsItIsWholeNotAtTheEndOfTheSection() {
        expectBothSides("1\r\nx\r\n0\r\nno colon\r\nX-T: " + String(repeating: "a", count: 300), trailerLimit: 128, end: .malformed("invalid trailer line"))
    }

    @Test(arguments: [
        ("0\r\nX-T: a\u{1}\r\n\r\n", "invalid trailer line"),
        ("0\r\nnocolon\r\n\r\n", "invalid trailer line"),
        ("0\r\n: v\r\n\r\n", "invalid trailer line"),
        ("0\r\nX: 1\r\r\n\r\n", "invalid trailer line"),
        ("0\r\n folded\r\n\r\n", "obsolete line folding"),
        ("5\nhello\r\n", "invalid chunk size"),
        ("5\r\rhello\r\n", "invalid chunk size line"),
        ("5;a\nhello\r\n", "invalid chunk extension"),
        ("5\r\nhello\n0\r\n\r\n", "missing CRLF after chunk data"),
    ])
    func bothSidesRefuseTheSameBodiesWithTheSameReason(_ body: String, _ reason: String) {
        expectBothSides(body, end: .malformed(reason))
    }

    @Test func onlyTheRequestSideCapsTheBodyTotal() {
        let limits = ParserLimits(maxHeaderBytes: 8192, maxBodyBytes: 4)
        let prefix = "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n"
        #expect(finalError(dripFeed(prefix + "3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n", limits: limits)) == .bodyTooLarge)
        // An upstream's body is streamed, whatever its size: the response parser has no such limit.
        let fed = verifyResponses("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n7FFFFFFFFFFFFFFF\r\nabc")
        #expect(fed.events.last == .body(bytes("abc")))
    }
}
