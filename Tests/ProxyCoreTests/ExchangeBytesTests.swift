import HTTP1
import Testing

@testable import ProxyCore

/// An exchange for `head` with no route (no spool, no replay), as `Connection.open` makes it.
private func exchange(_ head: String, upOut: ByteBuffer = ByteBuffer()) -> Exchange {
    var parser = RequestParser(limits: ParserLimits(maxHeaderBytes: 8192, maxBodyBytes: 0))
    let bytes = Array(head.utf8)
    let (_, event) = bytes.withUnsafeBytes { parser.parse($0) }
    guard case .head(let parsed)? = event else { fatalError("not a request head: \(head)") }
    return Exchange(head: parsed, route: nil, startedAt: 0, upOut: upOut)
}

private let chunkedPost = "POST /a HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
private let lengthPost = "POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\n"

/// The exchange of `lengthPost` in its first try: `head` written, then the body `hello` queued
/// behind it.
private func lengthPostInItsFirstTry(head: String) -> Exchange {
    let e = exchange(lengthPost)
    _ = e.beginTry(wholeBody: false, bodyDone: false, bodyOnWire: false)
    e.upOut.append(Array(head.utf8))
    e.headWritten(token: nil)
    e.queueBody("hello")
    return e
}

private func text(_ buffer: ByteBuffer) -> String { String(decoding: buffer.bytes, as: UTF8.self) }

extension Exchange {
    fileprivate func queueBody(_ string: String) {
        Array(string.utf8).withUnsafeBytes { queueBody($0) }
    }
}

/// `Exchange` holds the bytes of one request and its tries; it sees no machine: each method takes
/// the facts it needs and answers what happened to the bytes (`Connection.takeBody`).
@Suite struct ExchangeBytesTests {
    @Test func aStreamedChunkedBodyIsQueuedAsChunksAndEndsWithTheLastChunk() {
        let e = exchange(chunkedPost)
        e.queueBody("hello")
        e.streamedBodyEnded()
        #expect(text(e.upOut) == "5\r\nhello\r\n0\r\n\r\n")
    }

    @Test func aContentLengthBodyIsQueuedAsItCame() {
        let e = exchange(lengthPost)
        e.queueBody("hello")
        e.streamedBodyEnded()
        #expect(text(e.upOut) == "hello", "no chunk framing and no last chunk")
    }

    @Test func bodyBytesAreCountedAndUnboundedWithoutARoutesLimit() {
        let e = exchange(lengthPost)
        #expect(e.countBody(5), "no limit without a route")
        #expect(e.bodyBytesSeen == 5 && !e.overBodyLimit)
    }

    @Test func aBodyTooLongToWaitForGoesAsOneChunk() {
        let e = exchange(chunkedPost)
        let held = Array("abc".utf8).withUnsafeBytes { e.holdWaitedBody($0) }
        #expect(held == 3)
        e.chunkWaitedBody()
        #expect(text(e.upOut) == "3\r\nabc\r\n")
    }

    @Test func sentBytesReachTheBodyOnlyPastTheHead() {
        let e = lengthPostInItsFirstTry(head: "HEAD\r\n\r\n")
        #expect(e.pendingUpstreamCount == 13)
        #expect(!e.sent(8), "the head alone went")
        #expect(e.sent(2), "two body bytes went")
        #expect(e.pendingUpstreamCount == 3)
    }

    @Test func aNewTryKeepsTheBodyBytesNeverSentAfterItsNewHead() {
        let e = lengthPostInItsFirstTry(head: "HEAD1\r\n\r\n")
        // Nothing went: the next try sends a new head, then the same body.
        #expect(e.beginTry(wholeBody: false, bodyDone: true, bodyOnWire: false) == nil)
        #expect(e.pendingUpstreamCount == 0)
        e.upOut.append(Array("HEAD2\r\n\r\n".utf8))
        e.headWritten(token: nil)
        #expect(text(e.upOut) == "HEAD2\r\n\r\nhello")
    }

    @Test func aChunkedBodyReadWholeGoesWithItsLengthAfterTheHead() {
        let e = exchange(chunkedPost)
        _ = Array("abc".utf8).withUnsafeBytes { e.holdWaitedBody($0) }
        #expect(e.beginTry(wholeBody: true, bodyDone: true, bodyOnWire: false) == 3, "its Content-Length")
        e.upOut.append(Array("HEAD\r\n\r\n".utf8))
        e.headWritten(token: nil)
        #expect(text(e.upOut) == "HEAD\r\n\r\nabc", "as it came, no chunk framing")
    }

    @Test func noReplayIsKeptWithoutARoute() {
        let e = exchange(lengthPost)
        #expect(!e.keepsReplay)
        #expect(Array("hello".utf8).withUnsafeBytes { e.keepForReplay($0) }, "nothing to drop")
        #expect(!e.spools && e.spoolSize == 0 && !e.bodyEndsInSpool)
    }
}
