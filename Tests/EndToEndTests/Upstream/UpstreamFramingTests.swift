import Foundation
import TestSupport
import Testing

/// How the proxy frames what the upstream answers (issue 11 point 4; CONTRACT.md point 8 and the
/// error table): RFC 9112 §6.3 message length, read from scripted raw answers of
/// `framing_upstream.py`, checked at a raw client socket.
@Suite(.tags(.endToEnd), .timeLimit(.minutes(35))) struct UpstreamFramingTests {
    @Test func headWithContentLengthHasNoBodyAndTheConnectionGoesOn() throws {
        let f = try FramingFixture()
        let (client, head) = try f.exchange(rawRequest("HEAD", "/head-cl", host: f.host), method: "HEAD")
        #expect(head.status == 200)
        #expect(head.header("Content-Length") == "1234")
        // Had the proxy waited for (or sent) 1234 body bytes, this answer would not parse.
        try client.send(rawRequest("GET", "/head-cl", host: f.host))
        let get = try client.readResponse()
        #expect(get.status == 200)
        #expect(get.body == framingPattern(count: 1234))
        #expect(client.pending.isEmpty)
        try f.finish()
    }

    @Test func interim103IsRelayedBeforeTheFinalAnswer() throws {
        let f = try FramingFixture()
        let (client, interim) = try f.exchange(rawRequest("GET", "/interim", host: f.host))
        #expect(interim.status == 103, "\(interim)")
        #expect(interim.header("Link") == "</style.css>; rel=preload; as=style")
        let final = try client.readResponse()
        #expect(final.status == 200)
        #expect(final.bodyString == "hello")
        try f.finish()
    }

    @Test func interim103NeverReplacesTheFinalAnswer() throws {
        // Whether or not the 103 is relayed (today it is dropped), the final answer follows whole.
        let f = try FramingFixture()
        let client = try f.connect()
        try client.send(rawRequest("GET", "/interim", host: f.host))
        let final = try client.readFinalResponse()
        #expect(final.status == 200, "\(final)")
        #expect(final.bodyString == "hello")
        try client.send(rawRequest("GET", "/ok", host: f.host))
        #expect(try client.readFinalResponse().status == 200)
        try f.finish()
    }

    @Test(arguments: [("nocontent", 204), ("notmodified", 304)])
    func bodilessStatusIgnoresALyingContentLength(script: String, status: Int) throws {
        let f = try FramingFixture()
        let (client, response) = try f.exchange(rawRequest("GET", "/\(script)", host: f.host))
        #expect(response.status == status)
        #expect(response.body.isEmpty)
        // The same client connection, and likely the same upstream connection, serve the next one.
        try client.send(rawRequest("GET", "/ok?after=\(script)", host: f.host))
        let next = try client.readResponse()
        #expect(next.status == 200, "\(next)")
        #expect(next.json?["path"] as? String == "/f/ok?after=\(script)")
        #expect(client.pending.isEmpty, "bytes after the answers: \(String(decoding: client.pending, as: UTF8.self))")
        try f.finish()
    }

    @Test func chunkedWithExtensionsAndTrailersIsDecoded() throws {
        let f = try FramingFixture()
        let (client, response) = try f.exchange(rawRequest("GET", "/chunked-ext", host: f.host))
        #expect(response.status == 200)
        #expect(response.bodyString == "hello world")
        // Trailer fields may be passed on or dropped (RFC 9110 §6.5.1); nothing else may be added.
        for trailer in response.trailers {
            #expect(trailer.name.caseInsensitiveCompare("X-Checksum") == .orderedSame, "\(response.trailers)")
        }
        try client.send(rawRequest("GET", "/ok", host: f.host))
        #expect(try client.readResponse().status == 200)
        try f.finish()
    }

    @Test func contentLengthBodyArrivesWhole() throws {
        let f = try FramingFixture()
        let r = try curl([f.url("/cl?bytes=300007")])
        #expect(r.status == 200)
        #expect(r.body == framingPattern(count: 300_007))
        try f.finish()
    }

    @Test(arguments: ["cl-alpha", "cl-negative"])
    func invalidContentLengthIsBadGateway(script: String) throws {
        try expectBadGatewayForInvalidLength(script)
    }

    /// Today libcurl takes the first of two differing lengths and the client gets "hello".
    @Test(arguments: ["cl-differ", "cl-list-differ"])
    func conflictingContentLengthsAreBadGateway(script: String) throws {
        try expectBadGatewayForInvalidLength(script)
    }

    func expectBadGatewayForInvalidLength(_ script: String) throws {
        let f = try FramingFixture()
        let (client, response) = try f.exchange(rawRequest("GET", "/\(script)", host: f.host))
        expectProxyError(response, status: 502, code: "bad_gateway")
        #expect(!response.bodyString.contains("hello"))
        // The proxy keeps serving.
        #expect(try f.get("/ok").status == 200)
        try f.finish()
    }

    /// `Transfer-Encoding: gzip, chunked`: once the hop-by-hop field is rewritten the gzip coding would
    /// reach the client undeclared (plain `chunked`, compressed bytes): 502, as nginx answers.
    @Test func aTransferCodingOtherThanChunkedIsBadGateway() throws {
        try expectBadGatewayForInvalidLength("te-gzip-chunked")
    }

    @Test func chunkedWithContentLengthIsNeverSmuggled() throws {
        let f = try FramingFixture()
        let (client, first) = try f.exchange(rawRequest("GET", "/te-cl", host: f.host))
        let inner = "HTTP/1.1 200 OK\r\nContent-Length: 8\r\nX-Smuggled: yes\r\n\r\nSMUGGLED"
        if first.status == 502 {
            expectProxyError(first, status: 502, code: "bad_gateway")
        } else {
            #expect(first.status == 200, "\(first)")
            #expect(first.bodyString == inner, "the body is not the chunked decoding")
        }
        // Whatever the proxy chose, the next answers are the upstream's real ones, on this client
        // connection (after a 200; a 502 may close it) and on fresh ones (a pooled connection
        // with leftover bytes would hand out the smuggled response).
        for i in 0..<(first.status == 200 ? 3 : 0) {
            try client.send(rawRequest("GET", "/ok?n=\(i)", host: f.host))
            let next = try client.readResponse()
            #expect(next.header("X-Smuggled") == nil, "\(next)")
            #expect(next.json?["path"] as? String == "/f/ok?n=\(i)", "\(next)")
        }
        for i in 0..<3 {
            let next = try f.get("/ok?fresh=\(i)")
            #expect(next.header("X-Smuggled") == nil, "\(next)")
            #expect(next.json?["path"] as? String == "/f/ok?fresh=\(i)", "\(next)")
        }
        try f.finish()
    }

    @Test(arguments: ["close-delimited", "http10-close"])
    func closeDelimitedBodyArrivesWhole(script: String) throws {
        let f = try FramingFixture()
        let size = 200 * 1024 + 3
        let (client, response) = try f.exchange(rawRequest("GET", "/\(script)?bytes=\(size)", host: f.host), timeout: 20)
        expectEchoPattern(response, count: size)
        // Re-framed (chunked or with a length): the connection may go on; close-delimited: it ends.
        let framed = response.header("Content-Length") != nil || response.header("Transfer-Encoding") != nil
        if framed && !client.peerClosed {
            try client.send(rawRequest("GET", "/ok", host: f.host))
            #expect(try client.readResponse().status == 200)
        } else {
            #expect(client.waitForClose(timeout: 5), "a close-delimited answer on a connection that stays open")
        }
        try f.finish()
    }

    @Test func http10AnswerIsRelayedAndItsConnectionIsNotReused() throws {
        let f = try FramingFixture()
        let (client, old) = try f.exchange(rawRequest("GET", "/http10", host: f.host))
        #expect(old.status == 200)
        #expect(old.bodyString == "hello")
        let connectionsBefore = try f.connections()
        try client.send(rawRequest("GET", "/ok", host: f.host))
        let next = try client.readResponse()
        #expect(next.status == 200)
        // An HTTP/1.0 answer without keep-alive retires its connection (the script leaves it open).
        #expect(try f.connections() == connectionsBefore + 1)
        try f.finish()
    }

    @Test func oversizedUpstreamHeadIsBadGateway() throws {
        let f = try FramingFixture()
        let response = try f.get("/big-head?kib=100")
        expectProxyError(response, status: 502, code: "bad_gateway")
        #expect(try f.get("/ok").status == 200)
        try f.finish()
    }

    @Test(arguments: ["garbage-open", "bad-status", "bad-field"])
    func notHTTPIsBadGateway(script: String) throws {
        // The upstream keeps these connections open: waiting for more would end in 504, not 502.
        let f = try FramingFixture(extra: "limits:\n  upstream_timeout: 20s")
        let response = try f.get("/\(script)")
        expectProxyError(response, status: 502, code: "bad_gateway")
        #expect(try f.get("/ok").status == 200)
        try f.finish()
    }

    @Test(arguments: ["cut-cl", "cut-chunked"])
    func upstreamClosingMidBodyIsAVisiblyCutAnswer(script: String) throws {
        let f = try FramingFixture()
        let client = try f.connect()
        try client.send(rawRequest("GET", "/\(script)", host: f.host))
        let bytes = try client.readUntilClose()
        switch CutOutcome.of(bytes) {
        case .visiblyCut(_, let bodyBytes):
            #expect(bodyBytes >= 0)
        case .complete(let response):
            // Only an error of the proxy's own may look whole (nothing of the body was sent yet).
            expectProxyError(response, status: 502, code: "bad_gateway")
        case .other(let what):
            Issue.record("the client could not tell the answer was cut: \(what)")
        }
        #expect(try f.get("/ok").status == 200)
        try f.finish()
    }

    @Test func upstreamClosingBeforeAnyByteIsBadGateway() throws {
        let f = try FramingFixture()
        expectProxyError(try f.get("/close-before"), status: 502, code: "bad_gateway")
        #expect(try f.get("/ok").status == 200)
        try f.finish()
    }

    @Test func upstreamThatNeverAnswersIsUpstreamTimeout() throws {
        let f = try FramingFixture(extra: "limits:\n  upstream_timeout: 1s")
        let (client, response) = try f.exchange(rawRequest("GET", "/never", host: f.host), timeout: 30)
        expectProxyError(response, status: 504, code: "upstream_timeout")
        // The proxy keeps serving: on this client connection unless it closed it, and on a new one.
        do {
            try client.send(rawRequest("GET", "/ok?same", host: f.host))
            #expect(try client.readResponse().status == 200)
        } catch  where client.peerClosed {}
        #expect(try f.get("/ok").status == 200)
        try f.finish()
    }
}
