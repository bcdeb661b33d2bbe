import HTTP1
import TestSupport
import Testing

/// A response parser event in a form tests can compare: heads as text, body ranges as the bytes they
/// pointed at, and what a caller does around the parser (the bytes it takes as tunnel data after a 101).
enum Got: Equatable, CustomStringConvertible {
    /// "100 Continue|Name: value|..."
    case informational(String)
    case head(String, ResponseBodyFraming)
    case body([UInt8])
    case end
    case error(ResponseParseError)
    /// Bytes after a 101 head: the parser leaves them to the caller.
    case tunnel([UInt8])

    var description: String {
        switch self {
        case .informational(let text): return "informational(\(text))"
        case .head(let text, let framing): return "head(\(text), \(framing))"
        case .body(let bytes): return "body(\(String(decoding: bytes, as: UTF8.self).debugDescription))"
        case .end: return "end"
        case .error(let error): return "error(\(error))"
        case .tunnel(let bytes): return "tunnel(\(String(decoding: bytes, as: UTF8.self).debugDescription))"
        }
    }
}

/// "status reason|Name: value|Name: value", the fields as the head holds them.
func headText(_ head: ResponseHead) -> String {
    var text = "\(head.status) \(head.reason)"
    for i in 0..<head.fields.count { text += "|\(head.fields.name(i)): \(head.fields.value(i))" }
    return text
}

/// What one run of a parser over some input produced.
struct Fed: Equatable, CustomStringConvertible {
    var events: [Got] = []
    /// The parser's flags after the input (and `finish()`, when the run closed the connection).
    var mustClose = false
    var http10 = false
    var idle = false

    var description: String { "\(events) mustClose=\(mustClose) http10=\(http10) idle=\(idle)" }
}

let responseTestLimits = ResponseParserLimits(maxHeadBytes: 8192)

/// Feeds `pieces` to one parser in order, as an upstream connection would, and collects its events
/// (consecutive body or tunnel bytes merged). `heads[k]` says whether the k-th response answers a HEAD
/// request (missing: not HEAD). With `close`, `finish()` is called after the last piece and its event
/// recorded. Feeding stops at the first error. Checks the parse contract on every call.
func feedResponses(
    _ pieces: [[UInt8]], limits: ResponseParserLimits = responseTestLimits, heads: [Bool] = [], close: Bool = false
) -> Fed {
    var parser = ResponseParser(limits: limits)
    var fed = Fed()
    var responseIndex = 0
    var upgraded = false
    var failed = false
    parser.expect(requestMethodIsHEAD: heads.first ?? false)

    func append(_ got: Got) {
        switch (fed.events.last, got) {
        case (.body(let a)?, .body(let b)): fed.events[fed.events.count - 1] = .body(a + b)
        case (.tunnel(let a)?, .tunnel(let b)): fed.events[fed.events.count - 1] = .tunnel(a + b)
        default: fed.events.append(got)
        }
    }

    for piece in pieces where !failed {
        piece.withUnsafeBytes { buffer in
            var offset = 0
            while true {
                let rest = UnsafeRawBufferPointer(rebasing: buffer[offset...])
                let (consumed, event) = parser.parse(rest)
                precondition(consumed >= 0 && consumed <= rest.count, "consumed out of bounds")
                if upgraded {
                    // Once upgraded the parser takes nothing: the caller owns the bytes.
                    precondition(consumed == 0 && event == nil, "the parser consumed tunnel bytes")
                    if !rest.isEmpty { append(.tunnel(Array(rest))) }
                    return
                }
                if let event {
                    switch event {
                    case .informational(let head):
                        append(.informational(headText(head)))
                    case .head(let head, let framing):
                        append(.head(headText(head), framing))
                        if head.status == 101 { upgraded = true }
                    case .body(let range):
                        precondition(!range.isEmpty, "empty body event")
                        precondition(range.lowerBound >= 0 && range.upperBound <= consumed, "body range beyond the consumed prefix")
                        append(.body(Array(rest[range])))
                    case .end:
                        append(.end)
                        responseIndex += 1
                        parser.expect(requestMethodIsHEAD: responseIndex < heads.count ? heads[responseIndex] : false)
                    case .error(let error):
                        append(.error(error))
                        failed = true
                        return
                    }
                }
                offset += consumed
                if upgraded { continue }
                if event == nil && offset == buffer.count { return }
                precondition(event != nil || consumed > 0, "no progress without an event")
            }
        }
    }
    if close && !failed, let event = parser.finish() {
        switch event {
        case .end: append(.end)
        case .error(let error): append(.error(error))
        default: Issue.record("finish() returned \(event)")
        }
    }
    fed.mustClose = parser.connectionMustClose
    fed.http10 = parser.isHTTP10
    fed.idle = parser.isIdle
    return fed
}

/// Feeds `input` whole, one byte at a time, split in two at every position, and cut at random points
/// (seeded, so failures reproduce), and demands the same events and flags each way (after swift-nio's
/// ByteToMessageDecoderVerifier). Returns what the whole input produced.
@discardableResult
func verifyResponses(
    _ input: [UInt8], limits: ResponseParserLimits = responseTestLimits, heads: [Bool] = [], close: Bool = false,
    sourceLocation: SourceLocation = #_sourceLocation
) -> Fed {
    let whole = feedResponses([input], limits: limits, heads: heads, close: close)
    let bytewise = feedResponses(input.map { [$0] }, limits: limits, heads: heads, close: close)
    #expect(bytewise == whole, "one byte at a time", sourceLocation: sourceLocation)
    for split in 0...input.count {
        let halves = feedResponses([Array(input[..<split]), Array(input[split...])], limits: limits, heads: heads, close: close)
        if halves != whole {
            Issue.record("split at \(split): \(halves) != \(whole)", sourceLocation: sourceLocation)
            break
        }
    }
    var rng = SeededGenerator(state: UInt64(input.count) &* 0x5851_F42D_4C95_7F2D &+ 17)
    for _ in 0..<24 where input.count > 1 {
        var cuts = (0..<Int.random(in: 2...8, using: &rng)).map { _ in Int.random(in: 0...input.count, using: &rng) }
        cuts.sort()
        var pieces: [[UInt8]] = []
        var start = 0
        for cut in cuts + [input.count] {
            pieces.append(Array(input[start..<cut]))
            start = cut
        }
        let random = feedResponses(pieces, limits: limits, heads: heads, close: close)
        if random != whole {
            Issue.record("cut at \(cuts): \(random) != \(whole)", sourceLocation: sourceLocation)
            break
        }
    }
    return whole
}

@discardableResult
func verifyResponses(
    _ input: String, limits: ResponseParserLimits = responseTestLimits, heads: [Bool] = [], close: Bool = false,
    sourceLocation: SourceLocation = #_sourceLocation
) -> Fed {
    verifyResponses(Array(input.utf8), limits: limits, heads: heads, close: close, sourceLocation: sourceLocation)
}

/// The error the input ends in, if any.
func finalError(_ fed: Fed) -> ResponseParseError? {
    if case .error(let error)? = fed.events.last { return error }
    return nil
}
