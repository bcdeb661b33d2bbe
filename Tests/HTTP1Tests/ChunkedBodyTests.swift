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

@Suite struct ChunkedBodyTests {
    /// The limit of RFC 9112 §7.1.1's chunk-ext, BWS and ";" included, the CR not.
    static let extensionLimit = 4096

    @Test func anExtensionOfExactlyTheLimitIsSkippedOnBothSides() {
        let ext = ";" + String(repeating: "a", count: Self.extensionLimit - 1)
        let got = bothSides("1\(ext)\r\nx\r\n0\r\n\r\n")
        #expect(got.request == .body(bytes("x")))
        #expect(got.response == .body(bytes("x")))
    }

    @Test func anExtensionOneByteOverTheLimitIsRefusedOnBothSides() {
        let ext = ";" + String(repeating: "a", count: Self.extensionLimit)
        let got = bothSides("1\(ext)\r\nx\r\n0\r\n\r\n")
        #expect(got.request == .malformed("chunk extension too long"))
        #expect(got.response == .malformed("chunk extension too long"))
    }

    @Test func whitespaceBeforeTheSemicolonCountsAsExtension() {
        let fits = bothSides("1 \t;" + String(repeating: "a", count: Self.extensionLimit - 3) + "\r\nx\r\n0\r\n\r\n")
        #expect(fits.request == .body(bytes("x")) && fits.response == .body(bytes("x")))
        let over = bothSides("1 \t;" + String(repeating: "a", count: Self.extensionLimit - 2) + "\r\nx\r\n0\r\n\r\n")
        #expect(over.request == .malformed("chunk extension too long"))
        #expect(over.response == .malformed("chunk extension too long"))
    }

    @Test func theLimitAppliesToEachChunkSeparately() {
        let ext = ";" + String(repeating: "a", count: Self.extensionLimit - 1)
        let got = bothSides("1\(ext)\r\nx\r\n1\(ext)\r\ny\r\n0\(ext)\r\n\r\n")
        #expect(got.request == .body(bytes("xy")))
        #expect(got.response == .body(bytes("xy")))
    }

    @Test func thirtyTwoSizeDigitsAreAcceptedAndThirtyThreeAreNot() {
        let fits = bothSides(String(repeating: "0", count: 31) + "1\r\nx\r\n0\r\n\r\n")
        #expect(fits.request == .body(bytes("x")) && fits.response == .body(bytes("x")))
        let over = bothSides(String(repeating: "0", count: 32) + "1\r\nx\r\n0\r\n\r\n")
        #expect(over.request == .malformed("chunk size too large"))
        #expect(over.response == .malformed("chunk size too large"))
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
        let got = bothSides("1\r\nx\r\n0\r\nno colon\r\nX-T: " + String(repeating: "a", count: 300), trailerLimit: 128)
        #expect(got.request == .malformed("invalid trailer line"))
        #expect(got.response == .malformed("invalid trailer line"))
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
        let got = bothSides(body)
        #expect(got.request == .malformed(reason))
        #expect(got.response == .malformed(reason))
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
