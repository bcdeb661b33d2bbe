import FuzzSupport
import HTTP1

// libFuzzer target: the upstream response parser (RFC 9112 §4–§7: status line, fields, framing,
// chunked coding, trailers).
//
// Input: byte 0 picks the limit and whether the request was HEAD, byte 1 seeds the split points,
// the rest is what an upstream sends. The bytes are parsed whole, in pieces cut where the seed says,
// and one byte at a time, then the connection is closed (`finish()`); the three must report the same
// events. Every call must keep the parser's promises: consumed within the input, body ranges within
// the consumed prefix, progress on every call that returns no event (except once upgraded).

enum Seen: Equatable {
    case informational(Int)
    case head(Int, ResponseBodyFraming)
    case body([UInt8])
    case end
    case error
    case finished(String)
}

func parseResponses(_ pieces: [ArraySlice<UInt8>], limit: Int, head: Bool) -> [Seen] {
    var parser = ResponseParser(limits: ResponseParserLimits(maxHeadBytes: limit))
    parser.expect(requestMethodIsHEAD: head)
    var seen: [Seen] = []
    var bodyRun: [UInt8] = []
    func flushBody() {
        if !bodyRun.isEmpty { seen.append(.body(bodyRun)) }
        bodyRun = []
    }
    for piece in pieces {
        piece.withUnsafeBytes { raw in
            var offset = 0
            while true {
                let (consumed, event) = parser.parse(UnsafeRawBufferPointer(rebasing: raw[offset...]))
                precondition(consumed >= 0 && consumed <= raw.count - offset, "consumed outside the input")
                if let event {
                    switch event {
                    case .informational(let h):
                        flushBody()
                        seen.append(.informational(h.status))
                    case .head(let h, let framing):
                        flushBody()
                        seen.append(.head(h.status, framing))
                    case .body(let range):
                        precondition(range.lowerBound >= 0 && range.upperBound <= consumed, "body outside the consumed bytes")
                        bodyRun.append(contentsOf: raw[(offset + range.lowerBound)..<(offset + range.upperBound)])
                    case .end:
                        flushBody()
                        seen.append(.end)
                        parser.expect(requestMethodIsHEAD: head)
                    case .error:
                        flushBody()
                        seen.append(.error)
                    }
                    offset += consumed
                    continue
                }
                offset += consumed
                if consumed == 0 || offset >= raw.count { break }
            }
        }
        if parser.isUpgraded { break }
    }
    flushBody()
    switch parser.finish() {
    case .end?: seen.append(.finished("end"))
    case .error?: seen.append(.finished("error"))
    case nil: seen.append(.finished("idle"))
    default: preconditionFailure("finish() reported a head or body")
    }
    return seen
}

@_cdecl("LLVMFuzzerTestOneInput")
func fuzzOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    guard let data, size >= 2 else { return 0 }
    let input = Array(UnsafeBufferPointer(start: data, count: size))
    let limit = [65536, 64, 512, 8192][Int(input[0] & 3)]
    let head = input[0] & 4 != 0
    let message = input[2...]
    let whole = parseResponses([message], limit: limit, head: head)
    let split = parseResponses(pieces(of: message, seed: input[1]), limit: limit, head: head)
    precondition(whole == split, "events differ when the input is split")
    let dripped = parseResponses(message.indices.map { message[$0...$0] }, limit: limit, head: head)
    precondition(whole == dripped, "events differ when the input comes one byte at a time")
    return 0
}

runFuzzer(fuzzOneInput)
