import HTTP1
import Testing

/// A parser event with body ranges turned into the bytes they pointed at.
enum Event: Equatable, CustomStringConvertible {
    case head(RequestHead)
    case body([UInt8])
    case end
    case error(RequestParseError)

    var description: String {
        switch self {
        case .head(let head): return "head(\(head.method) \(head.target) \(head.framing))"
        case .body(let bytes): return "body(\(String(decoding: bytes, as: UTF8.self).debugDescription))"
        case .end: return "end"
        case .error(let error): return "error(\(error))"
        }
    }
}

let testLimits = ParserLimits(maxHeaderBytes: 8192, maxBodyBytes: 0)

/// Feeds `pieces` to one parser in order, as a connection would, and collects its events. Consecutive
/// body events are merged. Feeding stops at the first error.
func collectEvents(_ pieces: [[UInt8]], limits: ParserLimits = testLimits) -> [Event] {
    var parser = RequestParser(limits: limits)
    var events: [Event] = []
    outer: for piece in pieces {
        let done: Bool = piece.withUnsafeBytes { buffer in
            var offset = 0
            while true {
                let rest = UnsafeRawBufferPointer(rebasing: buffer[offset...])
                let (consumed, event) = parser.parse(rest)
                precondition(consumed >= 0 && consumed <= rest.count, "consumed out of bounds")
                if let event {
                    switch event {
                    case .head(let head): events.append(.head(head))
                    case .body(let range):
                        precondition(range.upperBound <= consumed, "body range beyond the consumed prefix")
                        let bytes = Array(rest[range])
                        if case .body(let previous)? = events.last {
                            events[events.count - 1] = .body(previous + bytes)
                        } else {
                            events.append(.body(bytes))
                        }
                    case .end: events.append(.end)
                    case .error(let error):
                        events.append(.error(error))
                        return true
                    }
                }
                offset += consumed
                if event == nil && offset == buffer.count { return false }
                precondition(event != nil || consumed > 0, "no progress without an event")
            }
        }
        if done { break outer }
    }
    return events
}

/// Feeds `input` whole, one byte at a time, and split in two at every position, and demands the same
/// events each way (after swift-nio's ByteToMessageDecoderVerifier). Returns the events.
@discardableResult
func dripFeed(
    _ input: [UInt8], limits: ParserLimits = testLimits, sourceLocation: SourceLocation = #_sourceLocation
) -> [Event] {
    let whole = collectEvents([input], limits: limits)
    let bytewise = collectEvents(input.map { [$0] }, limits: limits)
    #expect(bytewise == whole, "one byte at a time", sourceLocation: sourceLocation)
    for split in 0...input.count {
        let halves = collectEvents([Array(input[..<split]), Array(input[split...])], limits: limits)
        if halves != whole {
            Issue.record("split at \(split): \(halves) != \(whole)", sourceLocation: sourceLocation)
            break
        }
    }
    return whole
}

func dripFeed(
    _ input: String, limits: ParserLimits = testLimits, sourceLocation: SourceLocation = #_sourceLocation
) -> [Event] {
    dripFeed(Array(input.utf8), limits: limits, sourceLocation: sourceLocation)
}

func bytes(_ s: String) -> [UInt8] { Array(s.utf8) }

/// The head of the first `.head` event, if any.
func firstHead(_ events: [Event]) -> RequestHead? {
    for case .head(let head) in events { return head }
    return nil
}

/// The error the input ends in, if any.
func finalError(_ events: [Event]) -> RequestParseError? {
    if case .error(let error)? = events.last { return error }
    return nil
}
