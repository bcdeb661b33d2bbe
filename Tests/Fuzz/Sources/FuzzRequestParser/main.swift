import FuzzSupport
import HTTP1

// libFuzzer target: the request parser (RFC 9112) and what the proxy does next with a parsed head
// (request-target forms, RFC 9112 §3.2; dot-segment removal, RFC 3986 §5.2.4).
//
// Input: byte 0 picks the limits, byte 1 seeds the split points, the rest is what a client sends.
// The bytes are parsed three ways (whole, in pieces cut where the seed says, one byte at a time)
// and the three must report the same events: a parser that depends on where reads happen to end
// is a smuggling risk. Every call must also keep the parser's promises (consumed within the input,
// body ranges within the consumed prefix, progress on every call that returns no event).

/// What every run shares.
enum Fixed {
    static let limitChoices = [
        ParserLimits(maxHeaderBytes: 65536, maxBodyBytes: 0),
        ParserLimits(maxHeaderBytes: 64, maxBodyBytes: 0),
        ParserLimits(maxHeaderBytes: 256, maxBodyBytes: 16),
        ParserLimits(maxHeaderBytes: 8192, maxBodyBytes: 1000),
    ]
}

@_cdecl("LLVMFuzzerTestOneInput")
func fuzzOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    guard let data, size >= 2 else { return 0 }
    let input = Array(UnsafeBufferPointer(start: data, count: size))
    let limits = Fixed.limitChoices[Int(input[0]) % Fixed.limitChoices.count]
    let message = input[2...]
    let whole = parseRequests([message], limits: limits)
    let split = parseRequests(pieces(of: message, seed: input[1]), limits: limits)
    precondition(whole == split, "events differ when the input is split")
    let dripped = parseRequests(message.indices.map { message[$0...$0] }, limits: limits)
    precondition(whole == dripped, "events differ when the input comes one byte at a time")
    return 0
}

runFuzzer(fuzzOneInput)
