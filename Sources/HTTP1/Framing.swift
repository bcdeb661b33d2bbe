import Basics

// Message framing (RFC 9112 §6, §7; RFC 9110 §7.6.1): what the framing fields say, which fields are
// hop-by-hop, and the reader of a body whose head gave its length.

/// What the fields that frame a message or decide its connection's fate say: read by both parsers as
/// the fields go by, judged by each at the head's end (RFC 9112 §6 and §9.3, RFC 9110 §7.6.1 and
/// §10.1.1). The rules a request and a response share are here once; what differs (a 400 or 501 for a
/// request, a 502 for an answer; a request's Host) is the parser's.
struct FramingFields {
    /// The fields this reads, by name; a name's length picks its one candidate.
    enum Kind {
        case other, host, contentLength, transferEncoding, connection, expect

        init(name: Range<Int>, in bytes: UnsafeRawBufferPointer) {
            switch name.count {
            case 4: self = asciiEqualsIgnoringCase(bytes, name, "host") ? .host : .other
            case 6: self = asciiEqualsIgnoringCase(bytes, name, "expect") ? .expect : .other
            case 10: self = asciiEqualsIgnoringCase(bytes, name, "connection") ? .connection : .other
            case 14: self = asciiEqualsIgnoringCase(bytes, name, "content-length") ? .contentLength : .other
            case 17: self = asciiEqualsIgnoringCase(bytes, name, "transfer-encoding") ? .transferEncoding : .other
            default: self = .other
            }
        }
    }

    /// The Content-Length, when every element of every such field is the same number.
    private(set) var contentLength: Int?
    /// Why the Content-Length fields give no length (RFC 9112 §6.3 point 5), when they do not.
    private(set) var contentLengthProblem: String?
    private(set) var sawTransferEncoding = false
    private(set) var codingCount = 0
    private(set) var chunkedCount = 0
    private(set) var closeListed = false
    private(set) var keepAliveListed = false
    /// `Expect: 100-continue` (RFC 9110 §10.1.1).
    private(set) var expectContinue = false
    /// The Connection options other than `close` and `keep-alive`, lowercased: the names of more
    /// hop-by-hop fields (RFC 9110 §7.6.1), `upgrade` among them.
    private(set) var connectionOptions: [String] = []

    /// Notes one field of a kind other than `.other` and `.host`.
    mutating func take(_ kind: Kind, value: Range<Int>, in bytes: UnsafeRawBufferPointer) {
        switch kind {
        case .other, .host:
            return
        case .contentLength:
            // RFC 9110 §8.6: Content-Length = 1*DIGIT; a list of identical values (fields combined on the
            // way) may be taken as one; differing or invalid ones make the length unknowable.
            guard contentLengthProblem == nil else { return }
            // The usual value, one number and the first: no list to walk.
            if contentLength == nil, let parsed = decimal(bytes, value) {
                contentLength = parsed
                return
            }
            var sawElement = false
            forEachListElement(bytes, value) { element in
                guard let parsed = decimal(bytes, element) else {
                    contentLengthProblem = "invalid Content-Length"
                    return false
                }
                sawElement = true
                if let existing = contentLength, existing != parsed {
                    contentLengthProblem = "conflicting Content-Length values"
                    return false
                }
                contentLength = parsed
                return true
            }
            if !sawElement && contentLengthProblem == nil { contentLengthProblem = "invalid Content-Length" }
        case .transferEncoding:
            sawTransferEncoding = true
            forEachListElement(bytes, value) { element in
                // transfer-coding = token *( OWS ";" OWS transfer-parameter ) (RFC 9112 §7): the name is
                // the token before any parameters.
                var end = element.lowerBound
                while end < element.upperBound && isTokenByte(bytes[end]) { end += 1 }
                codingCount += 1
                if asciiEqualsIgnoringCase(bytes, element.lowerBound..<end, "chunked") { chunkedCount += 1 }
                return true
            }
        case .connection:
            // The usual values, one option alone: no list to walk.
            if asciiEqualsIgnoringCase(bytes, value, "keep-alive") {
                keepAliveListed = true
                return
            }
            if asciiEqualsIgnoringCase(bytes, value, "close") {
                closeListed = true
                return
            }
            forEachListElement(bytes, value) { element in
                if asciiEqualsIgnoringCase(bytes, element, "close") {
                    closeListed = true
                } else if asciiEqualsIgnoringCase(bytes, element, "keep-alive") {
                    keepAliveListed = true
                } else {
                    connectionOptions.append(lowercasedString(bytes, element))
                }
                return true
            }
        case .expect:
            forEachListElement(bytes, value) { element in
                if asciiEqualsIgnoringCase(bytes, element, "100-continue") { expectContinue = true }
                return true
            }
        }
    }

    /// What is wrong with the Transfer-Encoding fields, when something is: no coding, a coding other
    /// than chunked, or chunked twice (RFC 9112 §6.1, §7).
    enum TransferCodingProblem: Equatable {
        case empty
        /// A request gets 501 (RFC 9112 §6.1); an answer would reach the client with a coding that the
        /// rewritten (hop-by-hop) Transfer-Encoding no longer declares.
        case unsupported
        case chunkedTwice

        var reason: String {
            switch self {
            case .empty: return "empty Transfer-Encoding"
            case .unsupported: return "unsupported transfer coding"
            case .chunkedTwice: return "chunked applied more than once"
            }
        }
    }

    /// nil when Transfer-Encoding is absent or exactly `chunked` (which then frames the body).
    var transferCodingProblem: TransferCodingProblem? {
        guard sawTransferEncoding else { return nil }
        if codingCount == 0 { return .empty }
        if chunkedCount < codingCount { return .unsupported }
        if chunkedCount > 1 { return .chunkedTwice }
        return nil
    }

    /// RFC 9112 §9.3: HTTP/1.1 persists unless `close` is listed; HTTP/1.0 only with `keep-alive`.
    func persists(isHTTP10: Bool) -> Bool {
        !closeListed && (!isHTTP10 || keepAliveListed)
    }

    /// Ready for the next head (the options' memory is kept).
    mutating func reset() {
        contentLength = nil
        // Tested first: nearly every head leaves these empty, and a store would release the old value.
        if contentLengthProblem != nil { contentLengthProblem = nil }
        sawTransferEncoding = false
        codingCount = 0
        chunkedCount = 0
        closeListed = false
        keepAliveListed = false
        expectContinue = false
        if !connectionOptions.isEmpty { connectionOptions.removeAll(keepingCapacity: true) }
    }
}

/// Calls `body` with each non-empty element of a comma-separated list (RFC 9110 §5.6.1), whitespace
/// around it removed; stops early when `body` returns false.
func forEachListElement(_ bytes: UnsafeRawBufferPointer, _ value: Range<Int>, _ body: (Range<Int>) -> Bool) {
    var start = value.lowerBound
    while start < value.upperBound {
        var end = start
        while end < value.upperBound && bytes[end] != UInt8(ascii: ",") { end += 1 }
        var lower = start
        var upper = end
        while lower < upper && isOWS(bytes[lower]) { lower += 1 }
        while upper > lower && isOWS(bytes[upper - 1]) { upper -= 1 }
        if lower < upper && !body(lower..<upper) { return }
        start = end + 1
    }
}

/// 1*DIGIT as a number; nil for anything else, or a number too large for an Int.
func decimal(_ bytes: UnsafeRawBufferPointer, _ range: Range<Int>) -> Int? {
    guard !range.isEmpty else { return nil }
    var value = 0
    for index in range {
        let b = bytes[index]
        guard b >= UInt8(ascii: "0") && b <= UInt8(ascii: "9") else { return nil }
        let (times10, o1) = value.multipliedReportingOverflow(by: 10)
        let (sum, o2) = times10.addingReportingOverflow(Int(b &- UInt8(ascii: "0")))
        guard !o1 && !o2 else { return nil }
        value = sum
    }
    return value
}

/// The bytes in `range`, lowercased, as a String.
func lowercasedString(_ bytes: UnsafeRawBufferPointer, _ range: Range<Int>) -> String {
    String(unsafeUninitializedCapacity: range.count) { out in
        var k = 0
        for index in range {
            out[k] = asciiLower(bytes[index])
            k += 1
        }
        return k
    }
}

/// The hop-by-hop header rules a proxy applies (RFC 9110 §7.6.1).
public enum HopByHop {
    /// True when a field of this name must not be forwarded: the fixed hop-by-hop names, and any name
    /// the message's Connection fields list (`connectionOptions`, as in ``RequestHead/connectionOptions``).
    /// Case-insensitive; no allocation.
    public static func isHopByHop(_ name: String, connectionOptions: [String]) -> Bool {
        if isFixedHopByHop(name) { return true }
        for option in connectionOptions where asciiCaseInsensitiveEquals(name, option) {
            return true
        }
        return false
    }

    /// The names that are hop-by-hop whatever Connection says.
    public static func isFixedHopByHop(_ name: String) -> Bool {
        isFixedHopByHop(length: name.utf8.count) { asciiCaseInsensitiveEquals(name, $0.description) }
    }

    /// Whether a name of this length may be one of the fixed names (`isFixedHopByHop(length:_:)`'s
    /// lengths): most names are not, and are told by one bit test.
    @inlinable
    static func mayBeFixedHopByHop(length: Int) -> Bool {
        let lengths: UInt64 = 1 << 2 | 1 << 7 | 1 << 10 | 1 << 16 | 1 << 17 | 1 << 18 | 1 << 19
        return length < 64 && (lengths >> UInt64(truncatingIfNeeded: length)) & 1 != 0
    }

    /// The one list of fixed names, for request fields (Strings) and response fields (bytes): the
    /// length picks the candidates, so most names are rejected without a comparison. `equals` compares
    /// the name with a lowercase candidate.
    @inline(__always)
    static func isFixedHopByHop(length: Int, _ equals: (StaticString) -> Bool) -> Bool {
        switch length {
        case 2: return equals("te")
        case 7: return equals("trailer") || equals("upgrade")
        case 10: return equals("connection") || equals("keep-alive")
        case 16: return equals("proxy-connection")
        case 17: return equals("transfer-encoding")
        case 18: return equals("proxy-authenticate")
        case 19: return equals("proxy-authorization")
        default: return false
        }
    }
}

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
