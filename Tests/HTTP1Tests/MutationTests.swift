import HTTP1
import Testing

/// A small seeded generator so failures reproduce (SplitMix64).
struct SeededGenerator: RandomNumberGenerator {
    var state: UInt64
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

@Suite struct RequestParserMutationTests {
    static let corpus = [
        "GET /a?b=c HTTP/1.1\r\nHost: h\r\nConnection: keep-alive\r\n\r\n",
        "POST /p HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\n\r\nhelloGET / HTTP/1.0\r\n\r\n",
        "PUT /u HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n4;x=y\r\nwiki\r\n5\r\npedia\r\n0\r\nT: v\r\n\r\n",
        "\r\nOPTIONS * HTTP/1.1\nHost: h\nExpect: 100-continue\n\n",
    ]
    static let interesting: [UInt8] = Array("\r\n :\t;,0aF-".utf8) + [0x00, 0x7F, 0xFF]

    @Test func mutatedRequestsParseTheSameWhateverTheSplitsAndNeverCrash() {
        var rng = SeededGenerator(state: 0x7E57)
        let limits = ParserLimits(maxHeaderBytes: 96, maxBodyBytes: 16)
        for round in 0..<400 {
            var input = Array(Self.corpus[round % Self.corpus.count].utf8)
            for _ in 0..<Int.random(in: 1...3, using: &rng) {
                let at = Int.random(in: 0..<input.count, using: &rng)
                let byte = Self.interesting.randomElement(using: &rng)!
                switch Int.random(in: 0..<3, using: &rng) {
                case 0: input[at] = byte
                case 1: input.insert(byte, at: at)
                default: input.remove(at: at)
                }
            }
            let events = dripFeed(input, limits: limits)
            // Whatever happened, a body never appears before a head and nothing follows an error.
            if let errorIndex = events.firstIndex(where: { if case .error = $0 { return true } else { return false } }) {
                #expect(errorIndex == events.count - 1)
            }
            if case .body? = events.first { Issue.record("body before head for \(input)") }
        }
    }
}
