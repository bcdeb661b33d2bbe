import FuzzSupport
import HTTP1

// libFuzzer target: the chunked transfer coding (RFC 9112 §7.1), HTTP1's ChunkedDecoder, which both
// the request parser and the response parser use.
//
// Input: byte 0 picks the body limit, byte 1 seeds the split points, the rest follows a fixed
// `Transfer-Encoding: chunked` request head. Besides the split-independence and call-contract checks
// shared with the request parser target, a body the parser accepts (it reports `.end`) must be exactly
// what a plain reading of the chunks gives: a parser that delivers bytes of the framing as body, or
// drops body bytes, would let a client smuggle a second request past the proxy. The same bytes after
// a fixed chunked response head must end the same way in the response parser (accepted with the same
// body, refused, or unfinished): the two sides share the decoder and its limits, and only the request
// side caps the body's total, so the comparison holds when no body limit was picked.

/// What every run shares.
enum Fixed {
    static let head = Array("POST /upload HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\n\r\n".utf8)
    static let responseHead = Array("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n".utf8)
    /// The head limit, which is also the trailer section's limit on both sides.
    static let headLimit = 512

    static let bodyLimits = [0, 1, 64, 4096]
}

/// The body of an already accepted chunked message: sizes, skipped extensions, data, no checks.
/// Nil when the input runs out (the parser then cannot have accepted it).
func plainReading(_ bytes: ArraySlice<UInt8>) -> [UInt8]? {
    var body: [UInt8] = []
    var i = bytes.startIndex
    while true {
        var size = 0
        while i < bytes.endIndex, let digit = hexDigit(bytes[i]) {
            let (shifted, overflow) = size.multipliedReportingOverflow(by: 16)
            if overflow { return nil }
            size = shifted + digit
            i += 1
        }
        // Whatever follows the size up to the line's LF is whitespace or an extension.
        guard let lf = bytes[i...].firstIndex(of: 0x0A) else { return nil }
        i = lf + 1
        if size == 0 { return body }
        guard bytes.endIndex - i >= size + 2 else { return nil }
        body.append(contentsOf: bytes[i..<(i + size)])
        i += size + 2  // the CRLF after the data
    }
}

/// How the first chunked body in the input ended.
enum Outcome: Equatable {
    case accepted([UInt8])
    case refused
    case unfinished
}

/// The response parser over `pieces` (a fixed chunked head, then the body): how its first body ended.
func responseOutcome(_ pieces: [ArraySlice<UInt8>]) -> Outcome {
    var parser = ResponseParser(limits: ResponseParserLimits(maxHeadBytes: Fixed.headLimit))
    var body: [UInt8] = []
    for piece in pieces {
        let outcome: Outcome? = Array(piece).withUnsafeBytes { raw in
            var offset = 0
            while true {
                let rest = UnsafeRawBufferPointer(rebasing: raw[offset...])
                let (consumed, event) = parser.parse(rest)
                precondition(consumed >= 0 && consumed <= rest.count, "consumed out of bounds")
                switch event {
                case .head(_, let framing)?:
                    precondition(framing == .chunked, "the fixed response head is chunked")
                case .informational?:
                    preconditionFailure("the fixed response head is final")
                case .body(let range)?:
                    precondition(range.lowerBound >= 0 && range.upperBound <= consumed, "body range beyond the consumed prefix")
                    body.append(contentsOf: rest[range])
                case .end?:
                    return .accepted(body)
                case .error?:
                    return .refused
                case nil:
                    precondition(consumed > 0 || offset + consumed == raw.count, "no progress without an event")
                }
                offset += consumed
                if event == nil && offset == raw.count { return nil }
            }
        }
        if let outcome { return outcome }
    }
    return .unfinished
}

func hexDigit(_ byte: UInt8) -> Int? {
    switch byte {
    case UInt8(ascii: "0")...UInt8(ascii: "9"): return Int(byte - UInt8(ascii: "0"))
    case UInt8(ascii: "a")...UInt8(ascii: "f"): return Int(byte - UInt8(ascii: "a") + 10)
    case UInt8(ascii: "A")...UInt8(ascii: "F"): return Int(byte - UInt8(ascii: "A") + 10)
    default: return nil
    }
}

@_cdecl("LLVMFuzzerTestOneInput")
func fuzzOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    guard let data, size >= 2 else { return 0 }
    let input = Array(UnsafeBufferPointer(start: data, count: size))
    let limits = ParserLimits(maxHeaderBytes: Fixed.headLimit, maxBodyBytes: Fixed.bodyLimits[Int(input[0]) % Fixed.bodyLimits.count])
    let message = (Fixed.head + input[2...])[...]
    let whole = parseRequests([message], limits: limits)
    let split = parseRequests(pieces(of: message, seed: input[1]), limits: limits)
    precondition(whole == split, "events differ when the body is split")

    guard case .head(let parsed)? = whole.first else { preconditionFailure("the fixed head did not parse") }
    precondition(parsed.framing == .chunked, "the fixed head is chunked")
    if limits.maxBodyBytes == 0 {
        let request: Outcome
        if let endIndex = whole.firstIndex(of: .end) {
            if endIndex == 2, case .body(let bytes) = whole[1] { request = .accepted(bytes) } else { request = .accepted([]) }
        } else if case .error? = whole.last {
            request = .refused
        } else {
            request = .unfinished
        }
        let response = responseOutcome(pieces(of: (Fixed.responseHead + input[2...])[...], seed: input[1]))
        precondition(request == response, "the request and response parsers end the same chunked body differently")
    }
    // The first message ends at the first `.end`; its body is the `.body` event before it, if any.
    guard let endIndex = whole.firstIndex(of: .end) else { return 0 }
    precondition(endIndex <= 2, "more than one body event before the end")
    var accepted: [UInt8] = []
    if endIndex == 2, case .body(let bytes) = whole[1] { accepted = bytes }
    guard let expected = plainReading(input[2...]) else {
        preconditionFailure("the parser accepted a chunked body that a plain reading cannot finish")
    }
    precondition(accepted == expected, "the accepted body differs from the chunks' data")
    if limits.maxBodyBytes > 0 { precondition(accepted.count <= limits.maxBodyBytes, "body over the limit accepted") }
    return 0
}

runFuzzer(fuzzOneInput)
