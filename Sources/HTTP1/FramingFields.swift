import Basics

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
