import HTTP1
import Testing

@Suite struct RequestParserAcceptsTests {
    @Test func aSimpleGetYieldsItsHeadThenEnd() throws {
        let events = dripFeed("GET /users?id=1 HTTP/1.1\r\nHost: localhost:8080\r\nAccept:  */* \r\n\r\n")
        #expect(events.count == 2)
        let head = try #require(firstHead(events))
        #expect(head.method == "GET")
        #expect(head.target == "/users?id=1")
        #expect(head.version == .http1_1)
        #expect(head.fields.all == [HTTPField(name: "Host", value: "localhost:8080"), HTTPField(name: "Accept", value: "*/*")])
        #expect(head.framing == .none)
        #expect(head.keepAlive)
        #expect(!head.expectContinue)
        #expect(head.connectionOptions == [])
        #expect(events.last == .end)
    }

    @Test func fieldNamesKeepTheirCaseAndLookupIgnoresIt() throws {
        let head = try #require(firstHead(dripFeed("GET / HTTP/1.1\r\nhOsT: a\r\nX-Custom-ID: 7\r\nx-custom-id: 8\r\n\r\n")))
        #expect(head.fields.all.map(\.name) == ["hOsT", "X-Custom-ID", "x-custom-id"])
        #expect(head.first("x-custom-id") == "7")
        #expect(head.first("host") == "a")
        #expect(head.first("absent") == nil)
    }

    /// nginx's `underscores_in_headers off`: WSGI/CGI servers map `X_Forwarded_For` onto the same
    /// variable as `X-Forwarded-For`, so such a field could spoof what the proxy sets.
    @Test func fieldNamesWithAnUnderscoreAreDroppedAndCounted() throws {
        let head = try #require(
            firstHead(
                dripFeed(
                    "POST / HTTP/1.1\r\nHost: a\r\nX_Forwarded_For: 6.6.6.6\r\nX-Keep: 1\r\nTransfer_Encoding: chunked\r\n"
                        + "Content-Length: 0\r\n_: x\r\n\r\n")))
        #expect(head.fields.all.map(\.name) == ["Host", "X-Keep", "Content-Length"])
        #expect(head.droppedFieldCount == 3)
        #expect(head.framing == .contentLength(0), "a dropped Transfer_Encoding frames nothing")
        let clean = try #require(firstHead(dripFeed("GET / HTTP/1.1\r\nHost: a\r\nX-A-B: 1\r\n\r\n")))
        #expect(clean.droppedFieldCount == 0)
    }

    @Test func methodsAreKeptCaseSensitive() throws {
        let head = try #require(firstHead(dripFeed("get / HTTP/1.1\r\nHost: a\r\n\r\n")))
        #expect(head.method == "get")
    }

    @Test func emptyFieldValuesAreAllowed() throws {
        let head = try #require(firstHead(dripFeed("GET / HTTP/1.1\r\nHost: a\r\nX-Empty:\r\nX-Blank:   \r\n\r\n")))
        #expect(head.first("x-empty") == "")
        #expect(head.first("x-blank") == "")
    }

    @Test func valuesKeepInnerWhitespaceAndObsText() throws {
        let input: [UInt8] = bytes("GET / HTTP/1.1\r\nHost: a\r\nX-V: \ta  b\t\r\nX-U: caf") + [0xC3, 0xA9] + bytes("\r\n\r\n")
        let head = try #require(firstHead(dripFeed(input)))
        #expect(head.first("x-v") == "a  b")
        #expect(head.first("x-u") == "café")
    }

    @Test func pipelinedRequestsInOneBufferAreParsedInOrder() {
        let input =
            "GET /a HTTP/1.1\r\nHost: h\r\n\r\n"
            + "POST /b HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\n\r\nhello"
            + "PUT /c HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n"
            + "DELETE /d HTTP/1.1\r\nHost: h\r\n\r\n"
        let events = dripFeed(input)
        let summary = events.map { event -> String in
            switch event {
            case .head(let head): return head.target
            default: return event.description
            }
        }
        #expect(summary == ["/a", "end", "/b", #"body("hello")"#, "end", "/c", #"body("abc")"#, "end", "/d", "end"])
    }

    @Test func aContentLengthBodyIsReportedAndThenEnds() throws {
        let events = dripFeed("POST /x HTTP/1.1\r\nHost: h\r\nContent-Length: 11\r\n\r\nhello world")
        let head = try #require(firstHead(events))
        #expect(head.framing == .contentLength(11))
        #expect(Array(events.dropFirst()) == [.body(bytes("hello world")), .end])
    }

    @Test func aZeroContentLengthEndsRightAfterTheHead() {
        let events = dripFeed("POST /x HTTP/1.1\r\nHost: h\r\nContent-Length: 0\r\n\r\n")
        #expect(events.count == 2)
        #expect(events.last == .end)
    }

    @Test func identicalContentLengthsAreAccepted() throws {
        let a = try #require(firstHead(dripFeed("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 3, 3\r\n\r\nabc")))
        #expect(a.framing == .contentLength(3))
        let b = try #require(firstHead(dripFeed("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\ncontent-length: 3\r\n\r\nabc")))
        #expect(b.framing == .contentLength(3))
    }

    @Test func getAndHeadWithAContentLengthReadTheBody() {
        for method in ["GET", "HEAD"] {
            let events = dripFeed("\(method) / HTTP/1.1\r\nHost: h\r\nContent-Length: 2\r\n\r\nhi")
            #expect(Array(events.dropFirst()) == [.body(bytes("hi")), .end])
        }
    }

    @Test func aChunkedBodyWithExtensionsAndTrailersIsDecoded() throws {
        let input =
            "POST /up HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n"
            + "5;name=value\r\nhello\r\n"
            + "6 ; a=\"quoted;\" ; b\r\n world\r\n"
            + "A\r\n0123456789\r\n"
            + "0;last\r\nX-Checksum: abc\r\nX-Other: 1\r\n\r\n"
        let events = dripFeed(input)
        let head = try #require(firstHead(events))
        #expect(head.framing == .chunked)
        #expect(Array(events.dropFirst()) == [.body(bytes("hello world0123456789")), .end])
    }

    @Test func chunkedTransferEncodingIsCaseInsensitive() throws {
        let head = try #require(firstHead(dripFeed("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: Chunked\r\n\r\n0\r\n\r\n")))
        #expect(head.framing == .chunked)
    }

    @Test func chunkSizesWithLeadingZerosAndUppercaseHexAreAccepted() {
        let events = dripFeed("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n000B\r\nhello world\r\n0000\r\n\r\n")
        #expect(Array(events.dropFirst()) == [.body(bytes("hello world")), .end])
    }

    @Test func http10ClosesUnlessKeepAliveIsAsked() throws {
        let plain = try #require(firstHead(dripFeed("GET / HTTP/1.0\r\n\r\n")))
        #expect(plain.version == .http1_0)
        #expect(!plain.keepAlive)
        let kept = try #require(firstHead(dripFeed("GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n")))
        #expect(kept.keepAlive)
        #expect(kept.connectionOptions == [], "close and keep-alive are flags, not field names")
    }

    @Test func http11KeepsAliveUnlessCloseIsListed() throws {
        let closed = try #require(firstHead(dripFeed("GET / HTTP/1.1\r\nHost: h\r\nConnection: X-Foo, CLOSE\r\n\r\n")))
        #expect(!closed.keepAlive)
        #expect(closed.connectionOptions == ["x-foo"])
        let both = try #require(firstHead(dripFeed("GET / HTTP/1.0\r\nConnection: keep-alive\r\nConnection: close\r\n\r\n")))
        #expect(!both.keepAlive)
    }

    @Test func http10NeedsNoHost() throws {
        let head = try #require(firstHead(dripFeed("GET / HTTP/1.0\r\n\r\n")))
        #expect(head.first("host") == nil)
    }

    @Test func expectContinueIsFlagged() throws {
        let head = try #require(firstHead(dripFeed("PUT / HTTP/1.1\r\nHost: h\r\nExpect: 100-Continue\r\nContent-Length: 1\r\n\r\nx")))
        #expect(head.expectContinue)
        let other = try #require(firstHead(dripFeed("PUT / HTTP/1.1\r\nHost: h\r\nExpect: something\r\n\r\n")))
        #expect(!other.expectContinue)
    }

    @Test func leadingEmptyLinesBeforeTheRequestLineAreIgnored() throws {
        let events = dripFeed("\r\n\r\nGET / HTTP/1.1\r\nHost: h\r\n\r\n\r\nGET /2 HTTP/1.1\r\nHost: h\r\n\r\n")
        #expect(events.count == 4)
        #expect(events.last == .end)
    }

    @Test func bareLineFeedsAreAcceptedInTheHead() throws {
        let events = dripFeed("GET / HTTP/1.1\nHost: h\nX: y\n\n")
        let head = try #require(firstHead(events))
        #expect(head.first("x") == "y")
        #expect(events.last == .end)
    }

    @Test func absoluteAndAsteriskTargetsAreKeptRaw() throws {
        let abs = try #require(firstHead(dripFeed("GET http://Example.com:80/a?b HTTP/1.1\r\nHost: example.com\r\n\r\n")))
        #expect(abs.target == "http://Example.com:80/a?b")
        let star = try #require(firstHead(dripFeed("OPTIONS * HTTP/1.1\r\nHost: h\r\n\r\n")))
        #expect(star.target == "*")
    }

    @Test func anIncompleteHeadNeedsMoreBytesAndIsNotIdle() {
        var parser = RequestParser(limits: testLimits)
        #expect(parser.isIdle)
        let first = bytes("GET / HTTP/1.1\r\nHo")
        let result = first.withUnsafeBytes { parser.parse($0) }
        #expect(result.consumed == first.count)
        #expect(result.event == nil)
        #expect(!parser.isIdle)
    }

    @Test func theParserIsIdleAgainAfterTheEnd() {
        var parser = RequestParser(limits: testLimits)
        let input = bytes("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 2\r\n\r\nhi")
        var kinds: [String] = []
        input.withUnsafeBytes { buffer in
            var offset = 0
            while true {
                let (consumed, event) = parser.parse(UnsafeRawBufferPointer(rebasing: buffer[offset...]))
                if let event {
                    switch event {
                    case .head: kinds.append("head")
                    case .body(let range): kinds.append("body \(offset + range.lowerBound)..<\(offset + range.upperBound)")
                    case .end: kinds.append("end")
                    case .error: kinds.append("error")
                    }
                }
                offset += consumed
                if event == nil && offset == buffer.count { break }
            }
        }
        #expect(kinds == ["head", "body \(input.count - 2)..<\(input.count)", "end"])
        #expect(parser.isIdle)
    }

    @Test func afterAnErrorTheParserSwallowsEverything() {
        var parser = RequestParser(limits: testLimits)
        let bad = bytes("GET / HTTP/9.9\r\n\r\n")
        let first = bad.withUnsafeBytes { parser.parse($0) }
        #expect(first.event == .error(.badRequest("unsupported HTTP version")))
        let again = bytes("GET / HTTP/1.1\r\nHost: h\r\n\r\n")
        let second = again.withUnsafeBytes { parser.parse($0) }
        #expect(second.consumed == again.count)
        #expect(second.event == nil)
        #expect(!parser.isIdle)
    }
}

@Suite struct RequestParserRejectsTests {
    static func isBadRequest(_ events: [Event]) -> Bool {
        if case .badRequest? = finalError(events) { return true }
        return false
    }

    @Test(arguments: [
        "GET  / HTTP/1.1\r\nHost: h\r\n\r\n",  // two spaces
        "GET / HTTP/1.1 \r\nHost: h\r\n\r\n",  // trailing space
        "GET /\tx HTTP/1.1\r\nHost: h\r\n\r\n",  // tab in target
        "G@T / HTTP/1.1\r\nHost: h\r\n\r\n",  // non-token method
        " GET / HTTP/1.1\r\nHost: h\r\n\r\n",  // leading space
        "GET / HTTP/2.0\r\nHost: h\r\n\r\n",
        "GET / HTTP/3.1\r\nHost: h\r\n\r\n",
        "GET / HTTP/1.x\r\nHost: h\r\n\r\n",
        "GET / http/1.1\r\nHost: h\r\n\r\n",
        "GET / HTTP/1.1.1\r\nHost: h\r\n\r\n",
        "GET /\r\nHost: h\r\n\r\n",  // HTTP/0.9 style
        "GET HTTP/1.1\r\nHost: h\r\n\r\n",
        "/ HTTP/1.1\r\nHost: h\r\n\r\n",
    ])
    func malformedRequestLinesAreBadRequests(_ input: String) {
        #expect(Self.isBadRequest(dripFeed(input)))
    }

    /// RFC 9110 §2.5: a higher minor version of HTTP/1 is processed as HTTP/1.1.
    @Test(arguments: ["HTTP/1.2", "HTTP/1.9"])
    func aHigherMinorVersionIsProcessedAsHttp11(_ version: String) {
        let events = dripFeed("GET / \(version)\r\nHost: h\r\n\r\n")
        guard case .head(let head)? = events.first else {
            Issue.record("no head: \(events)")
            return
        }
        #expect(head.version == .http1_1)
        #expect(events.last == .end)
    }

    /// Field values are kept byte for byte: obs-text that is not UTF-8 (RFC 9110 §5.5) too.
    @Test func obsTextValuesKeepTheirBytes() {
        let input = bytes("GET / HTTP/1.1\r\nHost: h\r\nX-Name: caf") + [0xE9] + bytes("\r\nX-Utf8: caf\u{E9}\r\n\r\n")
        guard case .head(let head)? = dripFeed(input).first else {
            Issue.record("no head")
            return
        }
        #expect(head.fields.field(1).rawValue == bytes("caf") + [0xE9])
        #expect(head.fields.field(2).rawValue == nil)
        #expect(head.fields.field(2).value == "caf\u{E9}")
    }

    @Test func nonAsciiInTheTargetIsABadRequest() {
        let input = bytes("GET /caf") + [0xC3, 0xA9] + bytes(" HTTP/1.1\r\nHost: h\r\n\r\n")
        #expect(Self.isBadRequest(dripFeed(input)))
    }

    @Test(arguments: [
        ("GET / HTTP/1.1\r\nHost: h\r\nNoColon\r\n\r\n", "header line without colon"),
        ("GET / HTTP/1.1\r\nHost: h\r\nContent-Length : 5\r\n\r\nhello", "invalid header name"),
        ("GET / HTTP/1.1\r\nHost: h\r\nX-A\t: 5\r\n\r\n", "invalid header name"),
        ("GET / HTTP/1.1\r\nHost: h\r\n: empty\r\n\r\n", "empty header name"),
        ("GET / HTTP/1.1\r\nHost: h\r\nX(y): 1\r\n\r\n", "invalid header name"),
        ("GET / HTTP/1.1\r\nHost: h\r\nX-A: one\r\n two\r\n\r\n", "obsolete line folding"),
        ("GET / HTTP/1.1\r\nHost: h\r\nX-A: one\r\n\ttwo\r\n\r\n", "obsolete line folding"),
        ("GET / HTTP/1.1\r\n Content-Length: 5\r\nHost: h\r\n\r\nhello", "obsolete line folding"),
        ("GET / HTTP/1.1\r\nHost: h\r\nX-A: a\u{0}b\r\n\r\n", "invalid character in header value"),
        ("GET / HTTP/1.1\r\nHost: h\r\nX-A: a\rb\r\n\r\n", "invalid character in header value"),
        ("GET / HTTP/1.1\r\nHost: h\r\nX-A: a\u{7F}b\r\n\r\n", "invalid character in header value"),
        ("GET / HTTP/1.1\r\nHost: h\r\nX-A: a\u{1B}b\r\n\r\n", "invalid character in header value"),
        ("GET / HTTP/1.1\r\nHost: h\r\nX-A: ab\r\r\n\r\n", "invalid character in header value"),
        ("GET / HTTP/1.1\r\nHost: h\r\n\r\r\n\r\n", "invalid header name"),
        ("GET / HTTP/1.1\r\nHost: h\r\nX-A\r: 1\r\n\r\n", "invalid header name"),
    ])
    func malformedFieldLinesAreBadRequestsNamingTheReason(_ input: String, _ reason: String) {
        #expect(finalError(dripFeed(input)) == .badRequest(reason))
    }

    @Test func aBareCRInTheRequestLineIsABadRequest() {
        #expect(Self.isBadRequest(dripFeed("GET / HTTP/1.1\rHost: h\r\n\r\n")))
        #expect(Self.isBadRequest(dripFeed("\rGET / HTTP/1.1\r\nHost: h\r\n\r\n")))
        #expect(Self.isBadRequest(dripFeed("\r\r\nGET / HTTP/1.1\r\nHost: h\r\n\r\n")))
    }

    @Test func errorMessagesNeverEchoHeaderValues() {
        let events = dripFeed("GET / HTTP/1.1\r\nHost: h\r\nAuthorization: Bearer s3cr3t\u{1}\r\n\r\n")
        guard case .badRequest(let message)? = finalError(events) else {
            Issue.record("expected a bad request")
            return
        }
        #expect(!message.contains("s3cr3t"))
    }

    @Test(arguments: [
        "Content-Length: abc", "Content-Length: -1", "Content-Length: +5", "Content-Length: 0x10",
        "Content-Length: 5 5", "Content-Length: 99999999999999999999999", "Content-Length:", "Content-Length: ,",
        "Content-Length: 1.0",
    ])
    func invalidContentLengthsAreBadRequests(_ field: String) {
        #expect(finalError(dripFeed("POST / HTTP/1.1\r\nHost: h\r\n\(field)\r\n\r\n")) == .badRequest("invalid Content-Length"))
    }

    @Test(arguments: [
        "Content-Length: 1, 2", "Content-Length: 1\r\nContent-Length: 2", "Content-Length: 2, 2\r\nContent-Length: 3",
    ])
    func differingContentLengthsAreBadRequests(_ fields: String) {
        let events = dripFeed("POST / HTTP/1.1\r\nHost: h\r\n\(fields)\r\n\r\nab")
        #expect(finalError(events) == .badRequest("conflicting Content-Length values"))
        #expect(firstHead(events) == nil)
    }

    @Test(arguments: [
        "Content-Length: 5\r\nTransfer-Encoding: chunked", "Transfer-Encoding: chunked\r\nContent-Length: 5",
        "Transfer-Encoding: gzip\r\nContent-Length: 5",
    ])
    func contentLengthWithTransferEncodingIsABadRequest(_ fields: String) {
        let events = dripFeed("POST / HTTP/1.1\r\nHost: h\r\n\(fields)\r\n\r\n0\r\n\r\n")
        #expect(finalError(events) == .badRequest("both Content-Length and Transfer-Encoding"))
    }

    @Test(arguments: [
        "Transfer-Encoding: gzip", "Transfer-Encoding: chunked, gzip", "Transfer-Encoding: gzip, chunked",
        "Transfer-Encoding: identity", "Transfer-Encoding: gzip\r\nTransfer-Encoding: chunked",
        "Transfer-Encoding: chunked\r\nTransfer-Encoding: deflate", "Transfer-Encoding: xchunked",
    ])
    func transferCodingsOtherThanChunkedAreNotImplemented(_ fields: String) {
        let events = dripFeed("POST / HTTP/1.1\r\nHost: h\r\n\(fields)\r\n\r\n0\r\n\r\n")
        #expect(finalError(events) == .notImplemented("unsupported transfer coding"))
    }

    @Test(arguments: [
        "Transfer-Encoding: chunked, chunked", "Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked",
    ])
    func chunkedAppliedTwiceIsABadRequest(_ fields: String) {
        let events = dripFeed("POST / HTTP/1.1\r\nHost: h\r\n\(fields)\r\n\r\n0\r\n\r\n")
        #expect(finalError(events) == .badRequest("chunked applied more than once"))
    }

    @Test func anEmptyTransferEncodingIsABadRequest() {
        #expect(finalError(dripFeed("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: \r\n\r\n")) == .badRequest("empty Transfer-Encoding"))
    }

    @Test func transferEncodingOnHttp10IsABadRequest() {
        let events = dripFeed("POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n")
        #expect(finalError(events) == .badRequest("Transfer-Encoding on HTTP/1.0"))
    }

    @Test func aMissingHostOnHttp11IsABadRequest() {
        #expect(finalError(dripFeed("GET / HTTP/1.1\r\nAccept: */*\r\n\r\n")) == .badRequest("missing Host header"))
        #expect(finalError(dripFeed("CONNEC / HTTP/1.1\r\nAccept: */*\r\n\r\n")) == .badRequest("missing Host header"))
    }

    /// CONTRACT "HTTPS for clients": a CONNECT without Host is served (its target names the host).
    @Test func aConnectWithoutHostIsNoBadRequest() {
        #expect(finalError(dripFeed("CONNECT api.example.com:443 HTTP/1.1\r\nUser-Agent: x\r\n\r\n")) == nil)
    }

    @Test func moreThanOneHostIsABadRequest() {
        #expect(finalError(dripFeed("GET / HTTP/1.1\r\nHost: a\r\nhost: a\r\n\r\n")) == .badRequest("multiple Host headers"))
        #expect(finalError(dripFeed("GET / HTTP/1.0\r\nHost: a\r\nHost: b\r\n\r\n")) == .badRequest("multiple Host headers"))
    }

    static let chunkedPrefix = "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n"

    @Test(arguments: ChunkedBodyTests.malformedBodies)
    func malformedChunkedBodiesAreBadRequests(_ body: String, _ reason: String) {
        #expect(finalError(dripFeed(Self.chunkedPrefix + body)) == .badRequest(reason))
    }

    @Test func theLargestChunkSizeThatFitsIsAccepted() {
        let events = dripFeed(Self.chunkedPrefix + "7FFFFFFFFFFFFFFF\r\nabc")
        #expect(events.last == .body(bytes("abc")))
    }
}

@Suite struct RequestParserLimitsTests {
    static let head = "GET /some/path HTTP/1.1\r\nHost: localhost\r\nX-Pad: 0123456789\r\n\r\n"

    @Test func aHeadOfExactlyMaxHeaderBytesIsAccepted() {
        let limits = ParserLimits(maxHeaderBytes: Self.head.utf8.count, maxBodyBytes: 0)
        let events = dripFeed(Self.head, limits: limits)
        #expect(events.count == 2)
        #expect(events.last == .end)
    }

    @Test func aHeadOneByteOverMaxHeaderBytesIsTooLarge() {
        let limits = ParserLimits(maxHeaderBytes: Self.head.utf8.count - 1, maxBodyBytes: 0)
        #expect(dripFeed(Self.head, limits: limits) == [.error(.headersTooLarge)])
    }

    @Test func anEndlessHeadIsCutOffAtTheLimit() {
        let limits = ParserLimits(maxHeaderBytes: 100, maxBodyBytes: 0)
        let input = "GET / HTTP/1.1\r\nHost: h\r\nX-Pad: " + String(repeating: "a", count: 200)
        #expect(dripFeed(input, limits: limits) == [.error(.headersTooLarge)])
    }

    @Test func theLimitAppliesToEachPipelinedHeadSeparately() {
        let limits = ParserLimits(maxHeaderBytes: Self.head.utf8.count, maxBodyBytes: 0)
        let events = dripFeed(Self.head + Self.head + Self.head, limits: limits)
        #expect(events.count == 6)
    }

    @Test func trailersOverMaxHeaderBytesAreTooLarge() {
        let limits = ParserLimits(maxHeaderBytes: 120, maxBodyBytes: 0)
        let prefix = "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nx\r\n0\r\n"
        let fits = dripFeed(prefix + "X-T: " + String(repeating: "a", count: 111) + "\r\n\r\n", limits: limits)
        #expect(fits.last == .end)
        let over = dripFeed(prefix + "X-T: " + String(repeating: "a", count: 112) + "\r\n\r\n", limits: limits)
        #expect(finalError(over) == .headersTooLarge)
    }

    @Test func aDeclaredContentLengthOverTheBodyLimitIsRefusedInsteadOfTheHead() {
        let limits = ParserLimits(maxHeaderBytes: 8192, maxBodyBytes: 10)
        let over = dripFeed("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 11\r\n\r\nhello world", limits: limits)
        #expect(over == [.error(.bodyTooLarge)])
        let fits = dripFeed("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 10\r\n\r\nhelloworld", limits: limits)
        #expect(Array(fits.dropFirst()) == [.body(bytes("helloworld")), .end])
    }

    @Test func aChunkedBodyIsRefusedWhenItsRunningTotalPassesTheLimit() {
        let limits = ParserLimits(maxHeaderBytes: 8192, maxBodyBytes: 10)
        let prefix = "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n"
        let fits = dripFeed(prefix + "5\r\nhello\r\n5\r\nworld\r\n0\r\n\r\n", limits: limits)
        #expect(fits.last == .end)
        let over = dripFeed(prefix + "5\r\nhello\r\n6\r\nworld!\r\n0\r\n\r\n", limits: limits)
        #expect(Array(over.dropFirst()) == [.body(bytes("hello")), .error(.bodyTooLarge)])
    }

    @Test func aHugeChunkIsRefusedByTheBodyLimitBeforeAnyOfItsData() {
        let limits = ParserLimits(maxHeaderBytes: 8192, maxBodyBytes: 1 << 20)
        let events = dripFeed("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n7FFFFFFFFFFFFFFF\r\nabc", limits: limits)
        #expect(finalError(events) == .bodyTooLarge)
    }

    @Test func endlessEmptyLinesBeforeARequestAreRefused() {
        let limits = ParserLimits(maxHeaderBytes: 64, maxBodyBytes: 0)
        let events = dripFeed(String(repeating: "\r\n", count: 40), limits: limits)
        #expect(finalError(events) == .badRequest("too many empty lines before the request line"))
    }
}
