import HTTP1
import Testing

func parseLine(_ line: String) -> ResponseHeadLine {
    Array(line.utf8).withUnsafeBytes { ResponseHeadLine.parse($0) }
}

@Suite struct ResponseHeadLineTests {
    @Test(arguments: [
        ("HTTP/1.1 200 OK\r\n", ResponseHeadLine.status(version: .http1_1, code: 200, reason: "OK")),
        ("HTTP/1.0 404\r\n", .status(version: .http1_0, code: 404, reason: "")),
        ("HTTP/1.1 404 \r\n", .status(version: .http1_1, code: 404, reason: "")),
        ("HTTP/2 200\r\n", .status(version: .http1_1, code: 200, reason: "")),
        ("HTTP/2 204 \r\n", .status(version: .http1_1, code: 204, reason: "")),
        ("HTTP/3 301 Moved\r\n", .status(version: .http1_1, code: 301, reason: "Moved")),
        ("HTTP/1.1 503 Service  Unavailable\tnow\r\n", .status(version: .http1_1, code: 503, reason: "Service  Unavailable\tnow")),
        ("HTTP/1.1 100 Continue\n", .status(version: .http1_1, code: 100, reason: "Continue")),
        ("Content-Type: application/json\r\n", .field(HTTPField(name: "Content-Type", value: "application/json"))),
        ("x-empty:\r\n", .field(HTTPField(name: "x-empty", value: ""))),
        ("Set-Cookie:  a=b; Path=/ \t\r\n", .field(HTTPField(name: "Set-Cookie", value: "a=b; Path=/"))),
        ("\r\n", .end),
        ("\n", .end),
        ("", .end),
    ])
    func linesAreParsed(_ line: String, _ expected: ResponseHeadLine) {
        #expect(parseLine(line) == expected)
    }

    @Test(arguments: [
        " folded continuation\r\n", "\tfolded\r\n", "HTTP/1.1 20 OK\r\n", "HTTP/1.1 2000 OK\r\n", "HTTP/1.1 099 X\r\n",
        "HTTP/1.1200 OK\r\n", "HTTP/1 200 OK\r\n", "HTTP/x.1 200\r\n", "HTTP/1.1 abc\r\n", "HTTP/1.1 200OK\r\n",
        "HTTP/ 200\r\n", "No colon here\r\n", ": value\r\n", "Bad Name: v\r\n", "X: a\u{0}b\r\n", "X: a\rb\r\n",
        "HTTP/1.1 200 O\u{1}K\r\n",
    ])
    func invalidLinesAreReportedAsInvalid(_ line: String) {
        #expect(parseLine(line) == .invalid)
    }
}

@Suite struct ResponseWriterTests {
    func text(_ build: (ByteBuffer) -> Void) -> String {
        let buf = ByteBuffer(Array("prefix|".utf8))
        build(buf)
        return String(decoding: buf.bytes, as: UTF8.self)
    }

    @Test func aStatusLineIsAppended() {
        #expect(text { ResponseWriter.appendStatusLine($0, version: .http1_1, code: 200, reason: "OK") } == "prefix|HTTP/1.1 200 OK\r\n")
        #expect(text { ResponseWriter.appendStatusLine($0, version: .http1_0, code: 404, reason: "") } == "prefix|HTTP/1.0 404 \r\n")
    }

    @Test func aHeadIsAppendedFieldByField() {
        let out = text {
            ResponseWriter.appendStatusLine($0, version: .http1_1, code: 401, reason: ResponseWriter.reasonPhrase(for: 401))
            ResponseWriter.appendField($0, name: "WWW-Authenticate", value: "Bearer realm=\"tokenproxy\"")
            ResponseWriter.appendField($0, name: "Content-Length", value: "0")
            ResponseWriter.appendEndOfHead($0)
        }
        #expect(out == "prefix|HTTP/1.1 401 Unauthorized\r\nWWW-Authenticate: Bearer realm=\"tokenproxy\"\r\nContent-Length: 0\r\n\r\n")
    }

    @Test(arguments: [(1, "1"), (9, "9"), (10, "a"), (15, "f"), (16, "10"), (255, "ff"), (4096, "1000"), (0x7FFF_FFFF_FFFF_FFFF, "7fffffffffffffff")])
    func chunkHeadersAreLowercaseHex(_ size: Int, _ hex: String) {
        #expect(text { ResponseWriter.appendChunkHeader($0, size: size) } == "prefix|\(hex)\r\n")
    }

    @Test func aChunkedBodyRoundTripsThroughTheParser() {
        let buf = ByteBuffer(Array("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n".utf8))
        for piece in ["hello", " ", String(repeating: "x", count: 300)] {
            ResponseWriter.appendChunkHeader(buf, size: piece.utf8.count)
            buf.append(utf8: piece)
            ResponseWriter.appendChunkEnd(buf)
        }
        ResponseWriter.appendLastChunk(buf)
        let events = collectEvents([buf.bytes])
        #expect(Array(events.dropFirst()) == [.body(Array(("hello " + String(repeating: "x", count: 300)).utf8)), .end])
    }

    @Test func emptyChunksAppendNothing() {
        #expect(text { ResponseWriter.appendChunkHeader($0, size: 0) } == "prefix|")
        #expect(text { buf in [UInt8]().withUnsafeBytes { ResponseWriter.appendChunk(buf, $0) } } == "prefix|")
        #expect(text { buf in Array("abc".utf8).withUnsafeBytes { ResponseWriter.appendChunk(buf, $0) } } == "prefix|3\r\nabc\r\n")
    }

    @Test func theLastChunkEndsTheBody() {
        #expect(text { ResponseWriter.appendLastChunk($0) } == "prefix|0\r\n\r\n")
    }

    @Test(arguments: [
        (0, "0"), (7, "7"), (10, "10"), (200, "200"), (1_234_567, "1234567"), (-42, "-42"),
        (Int.max, "\(Int.max)"), (Int.min, "\(Int.min)"),
    ])
    func decimalsAreAppended(_ n: Int, _ expected: String) {
        #expect(text { appendDecimal($0, n) } == "prefix|\(expected)")
    }

    @Test func reasonPhrasesFollowRfc9110() {
        #expect(ResponseWriter.reasonPhrase(for: 200) == "OK")
        #expect(ResponseWriter.reasonPhrase(for: 413) == "Content Too Large")
        #expect(ResponseWriter.reasonPhrase(for: 431) == "Request Header Fields Too Large")
        #expect(ResponseWriter.reasonPhrase(for: 504) == "Gateway Timeout")
        #expect(ResponseWriter.reasonPhrase(for: 299) == "")
    }
}
