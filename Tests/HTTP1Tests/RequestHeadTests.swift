import HTTP1
import Testing

/// The parser run over `input` whole; its heads, in order.
func parsedHeads(_ input: [UInt8], limits: ParserLimits = testLimits) -> [RequestHead] {
    collectEvents([input], limits: limits).compactMap { event in
        if case .head(let head) = event { return head }
        return nil
    }
}

@Suite struct RequestHeadTests {
    @Test func fieldsAreReadByIndexWithoutChangingThem() throws {
        let head = try #require(parsedHeads(bytes("GET / HTTP/1.1\r\nHost: h\r\nX-Trace:   a  b \t\r\nx-empty:\r\n\r\n")).first)
        #expect(head.fields.count == 3)
        #expect((0..<head.fields.count).map(head.fields.name) == ["Host", "X-Trace", "x-empty"])
        #expect((0..<head.fields.count).map(head.fields.value) == ["h", "a  b", ""])
        #expect(head.fields.nameEquals(1, "x-trace") && !head.fields.nameEquals(1, "x-tracer") && !head.fields.nameEquals(0, "x-trace"))
        #expect(head.fields.nameEquals(1, lowercasedName: "x-trace"))
        #expect(head.fields.firstIndex("x-empty") == 2 && head.fields.firstIndex("absent") == nil)
        #expect(head.first("X-TRACE".lowercased()) == "a  b")
    }

    @Test func copyFieldWritesNameColonSpaceValueWithTheWhitespaceAroundTheValueRemoved() throws {
        let head = try #require(parsedHeads(bytes("GET / HTTP/1.1\r\nHost: h\r\nX-A:\t a b \r\nX-B:c\r\nX-C:\r\nX-D: d\r\n\r\n")).first)
        let out = ByteBuffer()
        for i in 0..<head.fields.count { head.fields.copyField(i, to: out) }
        #expect(String(decoding: out.bytes, as: UTF8.self) == "Host: h\r\nX-A: a b\r\nX-B: c\r\nX-C: \r\nX-D: d\r\n")
    }

    /// obs-text (RFC 9110 §5.5) reaches the upstream byte for byte, whether or not it is UTF-8.
    @Test func copyFieldKeepsObsTextByteForByte() throws {
        let input = bytes("GET / HTTP/1.1\r\nHost: h\r\nX-Latin1: caf") + [0xE9] + bytes("\r\nX-Odd:  ") + [0xFF, 0x80, 0x41] + bytes("\r\n\r\n")
        let head = try #require(parsedHeads(input).first)
        let out = ByteBuffer()
        head.fields.copyField(1, to: out)
        head.fields.copyField(2, to: out)
        #expect(out.bytes == bytes("X-Latin1: caf") + [0xE9] + bytes("\r\nX-Odd: ") + [0xFF, 0x80, 0x41] + bytes("\r\n"))
        #expect(head.fields.field(1).rawValue == bytes("caf") + [0xE9])
        #expect(head.fields.value(1) == "caf\u{FFFD}")
    }

    /// The Strings made in place come out as `String(decoding:as:)` would make them: short or long,
    /// ASCII or not, invalid UTF-8 repaired.
    @Test func theTargetAndHostStringsAreTheBytesDecoded() throws {
        let hosts: [[UInt8]] = [
            bytes("h"), bytes("127.0.0.1:18682"), bytes("a-host-name-longer-than-15.example.com:8443"),
            bytes("caf") + [0xE9], bytes("caf") + [0xC3, 0xA9], [0xFF, 0x80, 0x41], bytes("a-long-one-") + [0xE9] + bytes("-with-latin1"),
        ]
        for host in hosts {
            for target in ["/", "/small", "/exactly15bytes", "/a/longer/target/than/fifteen?q=1"] {
                let head = try #require(parsedHeads(bytes("GET \(target) HTTP/1.1\r\nHost: ") + host + bytes("\r\n\r\n")).first)
                #expect(head.target == target)
                #expect(head.target.utf8.elementsEqual(target.utf8))
                #expect(head.host == String(decoding: host, as: UTF8.self))
                #expect(head.host.map { Array($0.utf8) } == Array(String(decoding: host, as: UTF8.self).utf8))
                #expect(head.first("host") == head.host)
            }
        }
    }

    /// The parser's pass over the request line finds plain paths as `RequestTarget.isPlainPath` does.
    @Test func theParserSaysWhetherTheTargetIsAPlainPath() throws {
        let plain = ["/", "/small", "//h/a", "/a/b-c_d~e", "/a:b@c;d=e,f!g$h&i'j(k)l*m+n"]
        let notPlain = ["*", "a/b", "http://h/", "h:443", "/a?", "/a?b", "/a#f", "/a%41", "/a%zz", "/a.b", "/.", "/..", "/a/../b"]
        for target in plain + notPlain {
            let head = try #require(parsedHeads(bytes("GET \(target) HTTP/1.1\r\nHost: h\r\n\r\n")).first)
            #expect(head.targetIsPlainPath == plain.contains(target), "\(target)")
            #expect(head.targetIsPlainPath == RequestTarget.isPlainPath(target), "\(target)")
        }
        var head = RequestHead(
            method: "GET", target: "/a", version: .http1_1, fields: [HTTPField(name: "Host", value: "h")],
            framing: .none, keepAlive: true, expectContinue: false, connectionOptions: [])
        #expect(head.targetIsPlainPath)
        head.target = "/a/../b"
        #expect(!head.targetIsPlainPath)
        head.target = "/b"
        #expect(head.targetIsPlainPath)
    }

    @Test func aFieldIsFoundByAStaticNameAsByAString() throws {
        let head = try #require(parsedHeads(bytes("GET / HTTP/1.1\r\nHost: h\r\nOrigin: http://a\r\nORIGIN: http://b\r\nX-Or: c\r\n\r\n")).first)
        #expect(head.first(named: "origin") == "http://a")
        #expect(head.first(named: "origin") == head.first("origin"))
        #expect(head.first(named: "x-or") == "c")
        #expect(head.first(named: "host") == "h")
        #expect(head.first(named: "origi") == nil && head.first(named: "origins") == nil && head.first(named: "referer") == nil)
    }

    @Test func hopByHopFieldsAreTheFixedNamesAndThoseConnectionLists() throws {
        let input = "GET / HTTP/1.1\r\nHost: h\r\nConnection: X-Session, close\r\nX-Session: 1\r\nKeep-Alive: 5\r\nTE: trailers\r\nX-Other: 2\r\n\r\n"
        let head = try #require(parsedHeads(bytes(input)).first)
        let hop = (0..<head.fields.count).map { head.isHopByHop($0) }
        #expect(hop == [false, true, true, true, true, false])
    }

    @Test func aHeadKeptWhileTheParserReadsTheNextOneDoesNotChange() throws {
        var parser = RequestParser(limits: testLimits)
        func nextHead(_ text: String) -> RequestHead? {
            Array(text.utf8).withUnsafeBytes { raw in
                if case .head(let head)? = parser.parse(raw).event { return head }
                return nil
            }
        }
        let first = try #require(nextHead("GET /a HTTP/1.1\r\nHost: first.example\r\nX-A: 1\r\n\r\n"))
        _ = [UInt8]().withUnsafeBytes { parser.parse($0) }  // .end
        let second = try #require(nextHead("GET /b HTTP/1.1\r\nHost: second.example\r\nX-B: 2\r\nX-C: 3\r\n\r\n"))
        #expect(first.fields.all == [HTTPField(name: "Host", value: "first.example"), HTTPField(name: "X-A", value: "1")])
        #expect(second.first("host") == "second.example" && second.fields.count == 3)
    }

    @Test func headsBuiltFromStringsEqualParsedOnes() throws {
        let parsed = try #require(parsedHeads(bytes("POST /p HTTP/1.1\r\nHost:  h \r\nContent-Length: 0\r\n\r\n")).first)
        let built = RequestHead(
            method: "POST", target: "/p", version: .http1_1,
            fields: [HTTPField(name: "Host", value: "h"), HTTPField(name: "Content-Length", value: "0")],
            framing: .contentLength(0), keepAlive: true, expectContinue: false, connectionOptions: [])
        #expect(parsed == built)
        #expect(built.first("host") == "h" && parsed.first("host") == "h")
        let other = RequestHead(
            method: "POST", target: "/p", version: .http1_1, fields: [HTTPField(name: "Host", value: "h2")],
            framing: .contentLength(0), keepAlive: true, expectContinue: false, connectionOptions: [])
        #expect(parsed != other)
    }
}
