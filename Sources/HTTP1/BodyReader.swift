/// What one ``BodyReader/read(_:from:)`` found.
enum BodyRead: Sendable, Equatable {
    /// Everything given was taken: more bytes are needed.
    case needMore
    /// Body bytes: a range of the buffer passed to the call.
    case data(Range<Int>)
    /// The body is complete (after any trailers).
    case end
    case refused(ChunkedBodyError)
}

/// One message body whose head gave its length (RFC 9112 §6.3): a number of bytes, or chunked
/// (``ChunkedDecoder``). RequestParser reads a client's bodies with it, ResponseParser an upstream's
/// (a close-delimited answer is the response parser's own). Body bytes are ranges of the caller's
/// buffer.
struct BodyReader: Sendable {
    /// Fixed-length body: the bytes still due. `.end` is due when it reaches 0.
    private var remaining = 0
    private var isChunked = false
    private var chunked: ChunkedDecoder

    /// The trailer section of a chunked body is bounded like a head; `maxBodyBytes` 0: no cap on the
    /// sum of the chunk sizes.
    init(maxTrailerBytes: Int, maxBodyBytes: Int) {
        chunked = ChunkedDecoder(maxTrailerBytes: maxTrailerBytes, maxBodyBytes: maxBodyBytes)
    }

    /// Ready for the body `framing` announces; false when there is none (no body, or a length of 0).
    @inline(__always)  // per request, on the proxy's hot path (docs/ENGINE.md)
    mutating func begin(_ framing: BodyFraming) -> Bool {
        switch framing {
        case .none, .contentLength(0):
            return false
        case .contentLength(let length):
            remaining = length
            isChunked = false
        case .chunked:
            isChunked = true
            chunked.begin()
        }
        return true
    }

    /// Every byte of a fixed-length body has been reported: its `.end` is all that is left.
    var isComplete: Bool { !isChunked && remaining == 0 }

    /// Consumes input from `start` on and says what it found, with the index after the bytes taken.
    @inline(__always)  // per request, on the proxy's hot path (docs/ENGINE.md)
    mutating func read(_ input: UnsafeRawBufferPointer, from start: Int) -> (next: Int, found: BodyRead) {
        guard isChunked else {
            if remaining == 0 { return (start, .end) }
            guard start < input.count else { return (start, .needMore) }
            let take = min(remaining, input.count - start)
            remaining -= take
            return (start + take, .data(start..<(start + take)))
        }
        let (next, decoded) = chunked.decode(input, from: start)
        switch decoded {
        case nil: return (next, .needMore)
        case .data(let range): return (next, .data(range))
        case .end: return (next, .end)
        case .error(let error): return (next, .refused(error))
        }
    }
}
