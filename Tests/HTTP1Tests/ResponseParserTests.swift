import HTTP1
import TestSupport
import Testing

// Every input below goes through `verifyResponses`: fed whole, one byte at a time, split at every
// position and cut at random points, with the same events and flags demanded each way.

@Suite struct ResponseParserFramingTests {
    @Test func aContentLengthResponseYieldsItsHeadItsBodyThenEnd() {
        let fed = verifyResponses("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 5\r\n\r\nhello")
        #expect(fed.events == [.head("200 OK|Content-Type: text/plain|Content-Length: 5", .contentLength(5)), .body(bytes("hello")), .end])
        #expect(!fed.mustClose && !fed.http10 && fed.idle)
    }

    @Test func fieldsKeepTheirCaseAndLoseSurroundingWhitespace() {
        let input =
            bytes("HTTP/1.1 200 OK\r\nx-CUSTOM:  a  b \t\r\nX-Empty:\r\nX-Blank:   \r\nX-U: caf") + [0xC3, 0xA9]
            + bytes("\r\nContent-Length: 0\r\n\r\n")
        let fed = verifyResponses(input)
        #expect(fed.events == [.head("200 OK|x-CUSTOM: a  b|X-Empty: |X-Blank: |X-U: café|Content-Length: 0", .contentLength(0)), .end])
    }

    @Test func aZeroContentLengthEndsRightAfterTheHead() {
        #expect(verifyResponses("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n").events == [.head("200 OK|Content-Length: 0", .contentLength(0)), .end])
    }

    @Test(arguments: ["Content-Length: 3, 3", "Content-Length: 3\r\ncontent-length: 3", "Content-Length: 3,3,  ,3", "Content-Length: 003"])
    func identicalContentLengthsAreTakenAsOne(_ fields: String) {
        let fed = verifyResponses("HTTP/1.1 200 OK\r\n\(fields)\r\n\r\nabc")
        #expect(Array(fed.events.dropFirst()) == [.body(bytes("abc")), .end])
        if case .head(_, let framing)? = fed.events.first { #expect(framing == .contentLength(3)) } else { Issue.record("no head") }
    }

    @Test func aChunkedBodyIsDecodedWithExtensionsSkippedAndTrailersDropped() {
        let input =
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
            + "5;name=value\r\nhello\r\n"
            + "6 ; a=\"quoted;\" ; b\r\n world\r\n"
            + "A\r\n0123456789\r\n"
            + "0;last\r\nX-Checksum: abc\r\nX-Other: 1\r\n\r\n"
        let fed = verifyResponses(input)
        #expect(fed.events == [.head("200 OK|Transfer-Encoding: chunked", .chunked), .body(bytes("hello world0123456789")), .end])
        #expect(!fed.mustClose && fed.idle)
    }

    @Test func chunkSizesWithLeadingZerosAndUppercaseHexAreAccepted() {
        let fed = verifyResponses("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n000B\r\nhello world\r\n0000\r\n\r\n")
        #expect(Array(fed.events.dropFirst()) == [.body(bytes("hello world")), .end])
    }

    @Test(arguments: ["chunked", "Chunked", "chunked;foo=bar", "CHUNKED"])
    func transferEncodingChunkedIsChunked(_ value: String) {
        let fed = verifyResponses("HTTP/1.1 200 OK\r\nTransfer-Encoding: \(value)\r\n\r\n2\r\nhi\r\n0\r\n\r\n")
        if case .head(_, let framing)? = fed.events.first { #expect(framing == .chunked) } else { Issue.record("no head") }
        #expect(Array(fed.events.dropFirst()) == [.body(bytes("hi")), .end])
        #expect(!fed.mustClose)
    }

    @Test(arguments: ["Content-Length: 5\r\nTransfer-Encoding: chunked", "Transfer-Encoding: chunked\r\nContent-Length: 5"])
    func transferEncodingWinsOverContentLengthAndTheConnectionIsNotReused(_ fields: String) {
        let fed = verifyResponses("HTTP/1.1 200 OK\r\n\(fields)\r\n\r\n2\r\nhi\r\n0\r\n\r\n")
        if case .head(let text, let framing)? = fed.events.first {
            #expect(framing == .chunked)
            #expect(text.contains("Content-Length"), "the field stays in the head: the caller drops it")
        } else {
            Issue.record("no head")
        }
        #expect(Array(fed.events.dropFirst()) == [.body(bytes("hi")), .end])
        #expect(fed.mustClose)
    }

    /// A coding other than chunked would reach the client undeclared once the hop-by-hop
    /// Transfer-Encoding is rewritten: the answer is refused (the proxy answers 502, as nginx does).
    @Test(arguments: [
        "gzip, chunked", "gzip\r\nTransfer-Encoding: CHUNKED", "gzip", "chunked, gzip", "identity", "gzip\r\nContent-Length: 3",
    ])
    func anyTransferCodingButChunkedIsRefused(_ value: String) {
        let fed = verifyResponses("HTTP/1.1 200 OK\r\nTransfer-Encoding: \(value)\r\n\r\n2\r\nhi\r\n0\r\n\r\n", close: true)
        #expect(fed.events == [.error(.malformed("unsupported transfer coding"))])
    }

    @Test func aResponseWithoutLengthRunsUntilTheConnectionCloses() {
        let open = verifyResponses("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\nall of this HTTP/1.1 200 OK\r\n")
        #expect(open.events == [.head("200 OK|Content-Type: text/plain", .untilClose), .body(bytes("all of this HTTP/1.1 200 OK\r\n"))])
        #expect(open.mustClose && !open.idle)
        let closed = verifyResponses("HTTP/1.1 200 OK\r\n\r\nabc", close: true)
        #expect(closed.events == [.head("200 OK", .untilClose), .body(bytes("abc")), .end])
        let empty = verifyResponses("HTTP/1.1 200 OK\r\n\r\n", close: true)
        #expect(empty.events == [.head("200 OK", .untilClose), .end])
    }

    @Test func aResponseToHeadHasNoBodyWhateverItsFieldsSay() {
        for fields in ["Content-Length: 42", "Transfer-Encoding: chunked", "Transfer-Encoding: gzip", ""] {
            let input = "HTTP/1.1 200 OK\r\n\(fields)\(fields.isEmpty ? "" : "\r\n")\r\n" + "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nhi"
            let fed = verifyResponses(input, heads: [true, false])
            let kinds = fed.events.map { event -> String in
                if case .head(_, let framing) = event { return "head \(framing)" }
                return event.description
            }
            #expect(kinds == ["head none", "end", "head contentLength(2)", #"body("hi")"#, "end"], "\(fields)")
            #expect(!fed.mustClose)
        }
    }

    @Test(arguments: [204, 304])
    func noContentAndNotModifiedHaveNoBodyWhateverTheirFieldsSay(_ status: Int) {
        for fields in ["Content-Length: 42\r\n", "Transfer-Encoding: chunked\r\n", "Transfer-Encoding: chunked\r\nContent-Length: 1\r\n", ""] {
            let input = "HTTP/1.1 \(status) X\r\n\(fields)\r\nHTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"
            let fed = verifyResponses(input)
            #expect(fed.events.count == 4, "\(fields)")
            if case .head(_, let framing)? = fed.events.first { #expect(framing == .none) } else { Issue.record("no head") }
            #expect(fed.events[1] == .end)
        }
    }

    @Test func interimResponsesAreReportedBeforeTheFinalHead() {
        let input =
            "HTTP/1.1 100 Continue\r\n\r\n"
            + "HTTP/1.1 103 Early Hints\r\nLink: </a.css>; rel=preload\r\nLink: </b.js>; rel=preload\r\n\r\n"
            + "HTTP/1.1 102 Processing\r\nContent-Length: 7\r\nTransfer-Encoding: chunked\r\n\r\n"
            + "HTTP/1.1 201 Created\r\nContent-Length: 2\r\n\r\nok"
        let fed = verifyResponses(input)
        #expect(
            fed.events == [
                .informational("100 Continue"),
                .informational("103 Early Hints|Link: </a.css>; rel=preload|Link: </b.js>; rel=preload"),
                .informational("102 Processing|Content-Length: 7|Transfer-Encoding: chunked"),
                .head("201 Created|Content-Length: 2", .contentLength(2)), .body(bytes("ok")), .end,
            ])
        #expect(fed.idle)
    }

    @Test func anInterimResponseToHeadIsStillInterim() {
        let fed = verifyResponses("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\n", heads: [true])
        #expect(fed.events == [.informational("100 Continue"), .head("200 OK|Content-Length: 9", .none), .end])
    }

    @Test func switchingProtocolsStopsTheParserAndLeavesTheRestAsTunnelData() {
        let input =
            "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nContent-Length: 3\r\n\r\n"
            + "\u{81}\u{05}hello HTTP/1.1 200 OK\r\n\r\n"
        let fed = verifyResponses(input, close: true)
        #expect(
            fed.events == [
                .head("101 Switching Protocols|Upgrade: websocket|Connection: Upgrade|Content-Length: 3", .none),
                .tunnel(bytes("\u{81}\u{05}hello HTTP/1.1 200 OK\r\n\r\n")),
            ])
        #expect(fed.mustClose && !fed.idle)
    }

    @Test func switchingProtocolsAfterAnInterimHeadIsFinal() {
        let fed = verifyResponses("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 101 Switching Protocols\r\nUpgrade: h2c\r\n\r\nxyz")
        #expect(fed.events == [.informational("100 Continue"), .head("101 Switching Protocols|Upgrade: h2c", .none), .tunnel(bytes("xyz"))])
    }

    @Test func keepAliveResponsesFollowOneAnotherInOneBuffer() {
        let input =
            "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello"
            + "HTTP/1.1 404 Not Found\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n"
            + "HTTP/1.1 204 No Content\r\n\r\n"
            + "HTTP/1.1 304 Not Modified\r\nETag: \"x\"\r\n\r\n"
            + "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 500 Internal Server Error\r\nContent-Length: 1\r\n\r\n!"
        let fed = verifyResponses(input)
        #expect(
            fed.events == [
                .head("200 OK|Content-Length: 5", .contentLength(5)), .body(bytes("hello")), .end,
                .head("404 Not Found|Transfer-Encoding: chunked", .chunked), .body(bytes("abc")), .end,
                .head("204 No Content", .none), .end,
                .head("304 Not Modified|ETag: \"x\"", .none), .end,
                .informational("100 Continue"), .head("500 Internal Server Error|Content-Length: 1", .contentLength(1)), .body(bytes("!")), .end,
            ])
        #expect(fed.idle && !fed.mustClose)
    }

    @Test func aRepeatedStatusLineReadsAsAFreshOneAndAChangedOneIsNotMistakenForIt() {
        // Status lines of one length: the parser remembers the last one it accepted.
        let input =
            "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n" + "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"
            + "HTTP/1.1 201 OK\r\nContent-Length: 0\r\n\r\n" + "HTTP/1.1 201 Ok\r\nContent-Length: 0\r\n\r\n"
            + "HTTP/1.0 201 Ok\r\nConnection: keep-alive\r\nContent-Length: 0\r\n\r\n"
            + "HTTP/1.0 201 Ok\r\nConnection: keep-alive\r\nContent-Length: 0\r\n\r\n"
            + "HTTP/1.1 201 Ok\r\nContent-Length: 0\r\n\r\n" + "HTTP/1.1 2x1 Ok\r\n\r\n"
        let fed = verifyResponses(input)
        #expect(
            fed.events == [
                .head("200 OK|Content-Length: 0", .contentLength(0)), .end, .head("200 OK|Content-Length: 0", .contentLength(0)), .end,
                .head("201 OK|Content-Length: 0", .contentLength(0)), .end, .head("201 Ok|Content-Length: 0", .contentLength(0)), .end,
                .head("201 Ok|Connection: keep-alive|Content-Length: 0", .contentLength(0)), .end,
                .head("201 Ok|Connection: keep-alive|Content-Length: 0", .contentLength(0)), .end,
                .head("201 Ok|Content-Length: 0", .contentLength(0)), .end, .error(.malformed("invalid status line")),
            ])
        let http10Twice = verifyResponses(
            "HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 0\r\n\r\nHTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n")
        #expect(http10Twice.http10 && http10Twice.mustClose)
    }

    @Test func manyResponsesOnOneParserEachReadTheirOwnFields() {
        // The parser keeps old fields' bytes in its buffer up to a limit: heads well past it read right.
        var input = ""
        var expected: [Got] = []
        for k in 0..<300 {
            input += "HTTP/1.1 200 OK\r\nX-Index: \(k)\r\nX-Pad: \(String(repeating: "p", count: k % 17))\r\nContent-Length: 0\r\n\r\n"
            expected += [.head("200 OK|X-Index: \(k)|X-Pad: \(String(repeating: "p", count: k % 17))|Content-Length: 0", .contentLength(0)), .end]
        }
        let fed = feedResponses([Array(input.utf8)])
        #expect(fed.events == expected)
    }

    @Test func theLargestChunkSizeThatFitsIsAccepted() {
        let fed = verifyResponses("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n7FFFFFFFFFFFFFFF\r\nabc")
        #expect(fed.events.last == .body(bytes("abc")))
    }

    @Test func theLargestContentLengthThatFitsIsAccepted() {
        let fed = verifyResponses("HTTP/1.1 200 OK\r\nContent-Length: 9223372036854775807\r\n\r\nabc")
        #expect(fed.events == [.head("200 OK|Content-Length: 9223372036854775807", .contentLength(Int.max)), .body(bytes("abc"))])
    }
}

@Suite struct ResponseParserVersionAndPersistenceTests {
    @Test func http11KeepsTheConnectionUnlessCloseIsListed() {
        #expect(!verifyResponses("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n").mustClose)
        #expect(verifyResponses("HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 0\r\n\r\n").mustClose)
        #expect(verifyResponses("HTTP/1.1 200 OK\r\nConnection: X-Foo, CLOSE\r\nContent-Length: 0\r\n\r\n").mustClose)
        #expect(!verifyResponses("HTTP/1.1 200 OK\r\nConnection: closed, x-close\r\nContent-Length: 0\r\n\r\n").mustClose)
    }

    @Test func http10ClosesUnlessKeepAliveIsListed() {
        let plain = verifyResponses("HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nhi")
        #expect(plain.http10 && plain.mustClose)
        #expect(plain.events == [.head("200 OK|Content-Length: 2", .contentLength(2)), .body(bytes("hi")), .end])
        let kept = verifyResponses("HTTP/1.0 200 OK\r\nConnection: Keep-Alive\r\nContent-Length: 2\r\n\r\nhi")
        #expect(kept.http10 && !kept.mustClose)
        let both = verifyResponses("HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nConnection: close\r\nContent-Length: 0\r\n\r\n")
        #expect(both.mustClose)
    }

    @Test func aHigherHTTP1MinorVersionIsTreatedAs11() {
        let fed = verifyResponses("HTTP/1.7 200 OK\r\nContent-Length: 0\r\n\r\n")
        #expect(fed.events == [.head("200 OK|Content-Length: 0", .contentLength(0)), .end])
        #expect(!fed.http10 && !fed.mustClose)
    }

    @Test func theFlagsDescribeTheFinalHeadNotTheInterimOnes() {
        let fed = verifyResponses("HTTP/1.1 100 Continue\r\nConnection: close\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
        #expect(!fed.mustClose && !fed.http10)
    }

    @Test func theFlagsFollowEachResponseOnAKeptConnection() {
        let fed = verifyResponses("HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 0\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
        #expect(!fed.http10 && !fed.mustClose)
    }
}

@Suite struct ResponseParserLineTests {
    @Test func bareLineFeedsEndHeadAndTrailerLines() {
        let head = verifyResponses("HTTP/1.1 200 OK\nX: y\nContent-Length: 1\n\nz")
        #expect(head.events == [.head("200 OK|X: y|Content-Length: 1", .contentLength(1)), .body(bytes("z")), .end])
        let trailers = verifyResponses("HTTP/1.1 200 OK\nTransfer-Encoding: chunked\n\n1\r\nz\r\n0\r\nT: v\n\n")
        #expect(Array(trailers.events.dropFirst()) == [.body(bytes("z")), .end])
    }

    @Test func oneStrayEmptyLineBeforeAStatusLineIsSkipped() {
        for stray in ["\r\n", "\n"] {
            let fed = verifyResponses(stray + "HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\na" + stray + "HTTP/1.1 204 No Content\r\n\r\n")
            #expect(
                fed.events == [
                    .head("200 OK|Content-Length: 1", .contentLength(1)), .body(bytes("a")), .end, .head("204 No Content", .none), .end,
                ])
        }
    }

    @Test func aSecondEmptyLineBeforeAStatusLineIsMalformed() {
        #expect(verifyResponses("\r\n\r\nHTTP/1.1 200 OK\r\n\r\n").events == [.error(.malformed("empty line before the status line"))])
        let after = verifyResponses("HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\na\r\n\nHTTP/1.1 200 OK\r\n\r\n")
        #expect(finalError(after) == .malformed("empty line before the status line"))
    }

    @Test func theStrayEmptyLineIsNotCountedInTheHead() {
        let head = "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"
        let fed = verifyResponses("\r\n" + head, limits: ResponseParserLimits(maxHeadBytes: head.utf8.count))
        #expect(fed.events.last == .end)
    }

    @Test(arguments: [
        ("HTTP/1.1 200\r\n\r\n", "200 "), ("HTTP/1.1 404 \r\n\r\n", "404 "), ("HTTP/1.1 200 OK \r\n\r\n", "200 OK "),
        ("HTTP/1.1 503 Service  Unavailable\tnow\r\n\r\n", "503 Service  Unavailable\tnow"),
        ("HTTP/1.1 299 Caf\u{E9}\r\n\r\n", "299 Caf\u{E9}"), ("HTTP/1.1 799 Custom\r\n\r\n", "799 Custom"),
    ])
    func statusLinesWithUnusualReasonsAndCodesAreAccepted(_ input: String, _ text: String) {
        #expect(verifyResponses(input).events.first == .head(text, .untilClose))
    }
}

@Suite struct ResponseParserStateTests {
    static let limits = responseTestLimits

    func parse(_ parser: inout ResponseParser, _ text: String) -> (consumed: Int, event: ResponseParseEvent?) {
        Array(text.utf8).withUnsafeBytes { parser.parse($0) }
    }

    @Test func theParserIsIdleOnlyBetweenResponses() {
        var parser = ResponseParser(limits: Self.limits)
        #expect(parser.isIdle)
        #expect(parse(&parser, "\r\n").event == nil)
        #expect(parser.isIdle, "a stray empty line is not part of a response")
        #expect(parse(&parser, "HTTP/1.1 100 Continue\r\n\r").event == nil)
        #expect(!parser.isIdle)
        guard case .informational? = parse(&parser, "\n").event else {
            Issue.record("no interim head")
            return
        }
        #expect(!parser.isIdle, "the final head is still due")
        guard case .head? = parse(&parser, "HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\n").event else {
            Issue.record("no head")
            return
        }
        #expect(!parser.isIdle)
        guard case .body? = parse(&parser, "x").event else {
            Issue.record("no body")
            return
        }
        #expect(parse(&parser, "").event == .end)
        #expect(parser.isIdle)
    }

    @Test func bodyRangesPointIntoTheCallersBuffer() {
        var parser = ResponseParser(limits: Self.limits)
        let input = bytes("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nab\r\n1\r\nc\r\n0\r\n\r\n")
        var seen: [String] = []
        input.withUnsafeBytes { buffer in
            var offset = 0
            while true {
                let (consumed, event) = parser.parse(UnsafeRawBufferPointer(rebasing: buffer[offset...]))
                if case .body(let range)? = event { seen.append("\(offset + range.lowerBound)..<\(offset + range.upperBound)") }
                offset += consumed
                if event == nil && offset == buffer.count { break }
            }
        }
        let first = input.count - "2\r\nab\r\n1\r\nc\r\n0\r\n\r\n".utf8.count + 3
        #expect(seen == ["\(first)..<\(first + 2)", "\(first + 7)..<\(first + 8)"])
    }

    @Test func finishEndsACloseDelimitedBodyAndRefusesATruncatedResponse() {
        let truncated = "connection closed before the response was complete"
        let cases: [(String, ResponseParseEvent?)] = [
            ("", nil),
            ("\r\n", nil),
            ("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", nil),
            ("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n\r\n", nil),
            ("\r", .error(.malformed(truncated))),
            ("HTTP/1.1 200 OK\r\nContent-Le", .error(.malformed(truncated))),
            ("HTTP/1.1 100 Continue\r\n\r\n", .error(.malformed(truncated))),
            ("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhell", .error(.malformed(truncated))),
            ("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n", .error(.malformed(truncated))),
            ("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nT: 1\r\n", .error(.malformed(truncated))),
            ("HTTP/1.1 200 OK\r\n\r\nanything", .end),
            ("HTTP/1.1 101 Switching Protocols\r\n\r\n", nil),
        ]
        for (input, expected) in cases {
            var parser = ResponseParser(limits: Self.limits)
            var offset = 0
            let buffer = Array(input.utf8)
            while true {
                let (consumed, event) = buffer.withUnsafeBytes { parser.parse(UnsafeRawBufferPointer(rebasing: $0[offset...])) }
                if case .head(let head, _)? = event, head.status == 101 { break }
                offset += consumed
                if event == nil && offset == buffer.count { break }
            }
            #expect(parser.finish() == expected, "\(input.debugDescription)")
            #expect(parser.finish() == nil, "only once")
            #expect(parser.connectionMustClose)
        }
    }

    @Test func finishReportsTheEndOfAResponseWhoseEndWasNotYetCollected() {
        var parser = ResponseParser(limits: Self.limits)
        guard case .head(_, .none)? = parse(&parser, "HTTP/1.1 204 No Content\r\n\r\n").event else {
            Issue.record("no head")
            return
        }
        #expect(parser.finish() == .end)
    }

    @Test func afterFinishOrAnErrorTheParserSwallowsEverything() {
        var parser = ResponseParser(limits: Self.limits)
        #expect(parse(&parser, "HTTP/2.0 200 OK\r\n\r\n").event == .error(.malformed("unsupported HTTP version")))
        let again = parse(&parser, "HTTP/1.1 200 OK\r\n\r\n")
        #expect(again.consumed == 19 && again.event == nil)
        #expect(!parser.isIdle && parser.connectionMustClose)
        #expect(parser.finish() == nil)

        var closed = ResponseParser(limits: Self.limits)
        #expect(closed.finish() == nil)
        let after = parse(&closed, "HTTP/1.1 200 OK\r\n\r\n")
        #expect(after.consumed == 19 && after.event == nil)
    }

    @Test func anUpgradedParserTakesNoMoreBytes() {
        var parser = ResponseParser(limits: Self.limits)
        let head = parse(&parser, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\r\nframes")
        guard case .head(_, .none)? = head.event else {
            Issue.record("no head")
            return
        }
        #expect(head.consumed == 56)
        #expect(parser.isUpgraded && !parser.isIdle && parser.connectionMustClose)
        let after = parse(&parser, "frames")
        #expect(after.consumed == 0 && after.event == nil)
        #expect(parser.finish() == nil)
    }

    @Test func aResetParserStartsAfreshWhateverItsState() {
        let prefixes = [
            "", "HTTP/1.1 200 OK\r\nX: partial", "HTTP/2.0 200 OK\r\n", "HTTP/1.1 101 Switching Protocols\r\n\r\n",
            "HTTP/1.0 200 OK\r\n\r\nbody", "HTTP/1.1 100 Continue\r\n\r\n",
        ]
        for prefix in prefixes {
            var parser = ResponseParser(limits: Self.limits)
            parser.expect(requestMethodIsHEAD: true)
            _ = parse(&parser, prefix)
            parser.reset()
            #expect(parser.isIdle && !parser.connectionMustClose && !parser.isHTTP10 && !parser.isUpgraded, "\(prefix.debugDescription)")
            guard case .head(let head, .contentLength(1))? = parse(&parser, "HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\n").event else {
                Issue.record("no head after reset from \(prefix.debugDescription)")
                continue
            }
            #expect(headText(head) == "200 OK|Content-Length: 1")
        }
    }

    @Test func theHeadMethodHoldsForOneResponseOnly() {
        var parser = ResponseParser(limits: Self.limits)
        parser.expect(requestMethodIsHEAD: true)
        guard case .head(_, .none)? = parse(&parser, "HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\n").event else {
            Issue.record("no head")
            return
        }
        #expect(parse(&parser, "").event == .end)
        guard case .head(_, .contentLength(3))? = parse(&parser, "HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\n").event else {
            Issue.record("the next response was framed as HEAD")
            return
        }
    }

    @Test func aHeadKeptByTheCallerDoesNotChangeWhenTheParserMovesOn() {
        var parser = ResponseParser(limits: Self.limits)
        guard case .head(let held, _)? = parse(&parser, "HTTP/1.1 401 Unauthorized\r\nWWW-Authenticate: Bearer\r\nContent-Length: 0\r\n\r\n").event else {
            Issue.record("no head")
            return
        }
        #expect(parse(&parser, "").event == .end)
        guard case .head(let next, _)? = parse(&parser, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n").event else {
            Issue.record("no head")
            return
        }
        #expect(headText(held) == "401 Unauthorized|WWW-Authenticate: Bearer|Content-Length: 0")
        #expect(headText(next) == "200 OK|Content-Length: 0")
    }
}

@Suite struct ResponseParserRejectsTests {
    @Test(arguments: [
        ("HTTP/2.0 200 OK\r\n\r\n", "unsupported HTTP version"),
        ("HTTP/2 200\r\n\r\n", "unsupported HTTP version"),
        ("HTTP/3 200\r\n\r\n", "unsupported HTTP version"),
        ("HTTP/1 200 OK\r\n\r\n", "invalid status line"),
        ("HTTP/0.9 200 OK\r\n\r\n", "invalid status line"),
        ("HTTP/11.1 200 OK\r\n\r\n", "invalid status line"),
        ("HTTP/1.1 20 OK\r\n\r\n", "invalid status line"),
        ("HTTP/1.1 2000 OK\r\n\r\n", "invalid status line"),
        ("HTTP/1.1 099 Low\r\n\r\n", "invalid status line"),
        ("HTTP/1.1 abc\r\n\r\n", "invalid status line"),
        ("HTTP/1.1 200OK\r\n\r\n", "invalid status line"),
        ("HTTP/1.1200 OK\r\n\r\n", "invalid status line"),
        ("HTTP/1.1  200 OK\r\n\r\n", "invalid status line"),
        ("HTTP/1.1\r\n\r\n", "invalid status line"),
        ("http/1.1 200 OK\r\n\r\n", "invalid status line"),
        (" HTTP/1.1 200 OK\r\n\r\n", "invalid status line"),
        ("ICY 200 OK\r\n\r\n", "invalid status line"),
        ("<html>hello</html>\n", "invalid status line"),
        ("HTTP/1.1 200 O\u{1}K\r\n\r\n", "invalid status line"),
        ("HTTP/1.1 200 OK\r\r\n\r\n", "invalid status line"),
        ("HTTP/1.1 200 OK\rX: y\r\n\r\n", "invalid status line"),
        ("\rHTTP/1.1 200 OK\r\n\r\n", "invalid status line"),
    ])
    func malformedStatusLinesAreRefused(_ input: String, _ reason: String) {
        #expect(verifyResponses(input).events == [.error(.malformed(reason))])
    }

    @Test(arguments: [
        ("X-A: one\r\n two", "obsolete line folding"),
        ("X-A: one\r\n\ttwo", "obsolete line folding"),
        (" X-A: one", "obsolete line folding"),
        ("NoColon", "invalid header line"),
        (": empty name", "invalid header line"),
        ("Content-Length : 5", "invalid header line"),
        ("X(y): 1", "invalid header line"),
        ("X-A: a\u{0}b", "invalid header line"),
        ("X-A: a\rb", "invalid header line"),
        ("X-A: a\u{7F}b", "invalid header line"),
        ("X-A: a\u{1B}b", "invalid header line"),
        ("X-A: ab\r", "invalid header line"),
        ("\r", "invalid header line"),
        ("X-A\r: 1", "invalid header line"),
    ])
    func malformedFieldLinesAreRefused(_ fields: String, _ reason: String) {
        let fed = verifyResponses("HTTP/1.1 200 OK\r\nX-Ok: 1\r\n\(fields)\r\nContent-Length: 0\r\n\r\n")
        #expect(fed.events == [.error(.malformed(reason))])
    }

    @Test func errorMessagesNeverEchoFieldValues() {
        let fed = verifyResponses("HTTP/1.1 200 OK\r\nSet-Cookie: s3cr3t\u{1}\r\nContent-Length: s3cr3t\r\n\r\n")
        guard case .malformed(let message)? = finalError(fed) else {
            Issue.record("expected malformed")
            return
        }
        #expect(!message.contains("s3cr3t"))
    }

    @Test(arguments: [
        "Content-Length: abc", "Content-Length: -1", "Content-Length: +5", "Content-Length: 0x10", "Content-Length: 5 5",
        "Content-Length: 9223372036854775808", "Content-Length: 99999999999999999999999", "Content-Length:",
        "Content-Length: ,", "Content-Length: 1.0", "Content-Length: 3, x",
    ])
    func invalidContentLengthsAreMalformed(_ field: String) {
        #expect(verifyResponses("HTTP/1.1 200 OK\r\n\(field)\r\n\r\n").events == [.error(.malformed("invalid Content-Length"))])
    }

    @Test(arguments: ["Content-Length: 1, 2", "Content-Length: 1\r\nContent-Length: 2", "Content-Length: 2, 2\r\nContent-Length: 3"])
    func differingContentLengthsAreMalformed(_ fields: String) {
        let fed = verifyResponses("HTTP/1.1 200 OK\r\n\(fields)\r\n\r\nab")
        #expect(fed.events == [.error(.malformed("conflicting Content-Length values"))])
    }

    @Test func anInvalidContentLengthIsRefusedEvenWhereItFramesNothing() {
        let chunked = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: nonsense\r\n\r\n0\r\n\r\n"
        #expect(finalError(verifyResponses(chunked)) == .malformed("invalid Content-Length"))
        #expect(finalError(verifyResponses("HTTP/1.1 204 No Content\r\nContent-Length: x\r\n\r\n")) == .malformed("invalid Content-Length"))
        #expect(
            finalError(verifyResponses("HTTP/1.1 200 OK\r\nContent-Length: 1, 2\r\n\r\n", heads: [true])) == .malformed("conflicting Content-Length values"))
    }

    @Test(arguments: [
        ("Transfer-Encoding: ", "empty Transfer-Encoding"),
        ("Transfer-Encoding: ,", "empty Transfer-Encoding"),
        ("Transfer-Encoding: chunked, chunked", "chunked applied more than once"),
        ("Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked", "chunked applied more than once"),
    ])
    func invalidTransferEncodingsAreMalformed(_ fields: String, _ reason: String) {
        #expect(verifyResponses("HTTP/1.1 200 OK\r\n\(fields)\r\n\r\n0\r\n\r\n").events == [.error(.malformed(reason))])
    }

    @Test func transferEncodingInAnHTTP10ResponseIsMalformed() {
        let fed = verifyResponses("HTTP/1.0 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\nabc")
        #expect(fed.events == [.error(.malformed("Transfer-Encoding in an HTTP/1.0 response"))])
        // No body to frame: nothing to refuse.
        #expect(verifyResponses("HTTP/1.0 304 Not Modified\r\nTransfer-Encoding: chunked\r\n\r\n").events.last == .end)
    }

    static let chunkedPrefix = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"

    @Test(arguments: ChunkedBodyTests.malformedBodies + [("0\r\nX: 1\r\r\n\r\n", "invalid trailer line")])
    func malformedChunkedBodiesAreRefused(_ body: String, _ reason: String) {
        #expect(finalError(verifyResponses(Self.chunkedPrefix + body)) == .malformed(reason))
    }
}

@Suite struct ResponseParserLimitsTests {
    static let head = "HTTP/1.1 200 OK\r\nServer: test\r\nX-Pad: 0123456789\r\nContent-Length: 0\r\n\r\n"

    @Test func aHeadOfExactlyMaxHeadBytesIsAccepted() {
        let fed = verifyResponses(Self.head, limits: ResponseParserLimits(maxHeadBytes: Self.head.utf8.count))
        #expect(fed.events.count == 2 && fed.events.last == .end)
    }

    @Test func aHeadOneByteOverMaxHeadBytesIsTooLarge() {
        let fed = verifyResponses(Self.head, limits: ResponseParserLimits(maxHeadBytes: Self.head.utf8.count - 1))
        #expect(fed.events == [.error(.headTooLarge)])
    }

    @Test func anEndlessHeadIsCutOffAtTheLimit() {
        let limits = ResponseParserLimits(maxHeadBytes: 100)
        #expect(verifyResponses("HTTP/1.1 200 OK\r\nX-Pad: " + String(repeating: "a", count: 200), limits: limits).events == [.error(.headTooLarge)])
        #expect(verifyResponses(String(repeating: "x", count: 300), limits: limits).events == [.error(.headTooLarge)])
    }

    @Test func theLimitAppliesToEachHeadSeparately() {
        let limits = ResponseParserLimits(maxHeadBytes: Self.head.utf8.count)
        let interim = "HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload\r\n\r\n"
        let fed = verifyResponses(Self.head + interim + Self.head + Self.head, limits: limits)
        #expect(fed.events.count == 7 && fed.events.last == .end)
    }

    @Test func trailersOverMaxHeadBytesAreTooLarge() {
        let limits = ResponseParserLimits(maxHeadBytes: 120)
        let prefix = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nx\r\n0\r\n"
        let fits = verifyResponses(prefix + "X-T: " + String(repeating: "a", count: 111) + "\r\n\r\n", limits: limits)
        #expect(fits.events.last == .end)
        let over = verifyResponses(prefix + "X-T: " + String(repeating: "a", count: 112) + "\r\n\r\n", limits: limits)
        #expect(finalError(over) == .headTooLarge)
    }

    @Test func aZeroLimitRefusesEveryHead() {
        #expect(verifyResponses("HTTP/1.1 200 OK\r\n\r\n", limits: ResponseParserLimits(maxHeadBytes: 0)).events == [.error(.headTooLarge)])
        #expect(verifyResponses("HTTP/1.1 200 OK\r\n\r\n", limits: ResponseParserLimits(maxHeadBytes: -5)).events == [.error(.headTooLarge)])
    }
}

@Suite struct ResponseParserMutationTests {
    static let corpus = [
        "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: keep-alive\r\n\r\nhelloHTTP/1.1 204 No Content\r\n\r\n",
        "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n4;x=y\r\nwiki\r\n5\r\npedia\r\n0\r\nT: v\r\n\r\n",
        "\r\nHTTP/1.0 404 Not Found\nContent-Length: 3, 3\n\nabc",
        "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\r\n\u{81}\u{00}",
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 2\r\n\r\n1\r\na\r\n0\r\n\r\n",
    ]
    static let interesting: [UInt8] = Array("\r\n :\t;,0aF-19H/.".utf8) + [0x00, 0x7F, 0xFF]

    @Test func mutatedResponsesParseTheSameWhateverTheSplitsAndNeverCrash() {
        let limits = ResponseParserLimits(maxHeadBytes: 96)
        for (round, input) in mutations(of: Self.corpus, interesting: Self.interesting, seed: 0x4E5B_0115).enumerated() {
            let heads = [round % 7 == 0]
            let fed = verifyResponses(input, limits: limits, heads: heads, close: round % 2 == 0)
            // Whatever happened: nothing follows an error, and a body never comes before a head.
            if let errorIndex = fed.events.firstIndex(where: { if case .error = $0 { return true } else { return false } }) {
                #expect(errorIndex == fed.events.count - 1)
            }
            if case .body? = fed.events.first { Issue.record("body before head for \(input)") }
        }
    }

    /// The first head of `input` as ResponseHeadLine (the line parser of the libcurl path) reads it, one
    /// stray empty line skipped; nil if it finds a line invalid or no blank line.
    static func headTextByLines(_ input: [UInt8]) -> String? {
        var text: String? = nil
        var start = 0
        var first = true
        while let lf = input[start...].firstIndex(of: UInt8(ascii: "\n")) {
            let line = Array(input[start...lf])
            start = lf + 1
            switch line.withUnsafeBytes({ ResponseHeadLine.parse($0) }) {
            case .end:
                if text == nil && first {
                    first = false
                    continue
                }
                return text
            case .status(_, let code, let reason):
                guard text == nil else { return nil }
                text = "\(code) \(reason)"
            case .field(let field):
                guard let head = text else { return nil }
                text = head + "|\(field.name): \(field.value)"
            case .invalid:
                return nil
            }
            first = false
        }
        return nil
    }

    @Test func headsTheParserAcceptsReadTheSameLineByLine() {
        var rng = SeededGenerator(state: 0xD1FF)
        var compared = 0
        for round in 0..<600 {
            var input = Array(Self.corpus[round % Self.corpus.count].utf8)
            for _ in 0..<Int.random(in: 1...2, using: &rng) {
                let at = Int.random(in: 0..<input.count, using: &rng)
                let byte = Self.interesting.randomElement(using: &rng) ?? 0
                if Bool.random(using: &rng) { input[at] = byte } else { input.insert(byte, at: at) }
            }
            let fed = feedResponses([input])
            let parsed: String
            switch fed.events.first {
            case .head(let text, _)?, .informational(let text)?: parsed = text
            default: continue
            }
            #expect(Self.headTextByLines(input) == parsed, "\(String(decoding: input, as: UTF8.self).debugDescription)")
            compared += 1
        }
        #expect(compared > 100)
    }

    @Test func randomBytesNeverCrashTheParser() {
        var rng = SeededGenerator(state: 0xB17E5)
        for _ in 0..<200 {
            let prefix = Array("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n".utf8)
            let noise = (0..<Int.random(in: 0...64, using: &rng)).map { _ in UInt8.random(in: 0...255, using: &rng) }
            verifyResponses(Bool.random(using: &rng) ? prefix + noise : noise, limits: ResponseParserLimits(maxHeadBytes: 64), close: true)
        }
    }
}
