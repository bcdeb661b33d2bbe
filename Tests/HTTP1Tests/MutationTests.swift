import HTTP1
import TestSupport
import Testing

/// `rounds` inputs, the strings of `corpus` in turn, each changed in one to three random places: a
/// byte of `interesting` written over one or inserted, or a byte removed. Seeded: every run makes the
/// same inputs, so a failure reproduces.
func mutations(of corpus: [String], interesting: [UInt8], seed: UInt64, rounds: Int = 400) -> [[UInt8]] {
    var rng = SeededGenerator(state: seed)
    return (0..<rounds).map { round in
        var input = Array(corpus[round % corpus.count].utf8)
        for _ in 0..<Int.random(in: 1...3, using: &rng) {
            let at = Int.random(in: 0..<input.count, using: &rng)
            let byte = interesting.randomElement(using: &rng) ?? 0
            switch Int.random(in: 0..<3, using: &rng) {
            case 0: input[at] = byte
            case 1: input.insert(byte, at: at)
            default: input.remove(at: at)
            }
        }
        return input
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
        let limits = ParserLimits(maxHeaderBytes: 96, maxBodyBytes: 16)
        for input in mutations(of: Self.corpus, interesting: Self.interesting, seed: 0x7E57) {
            let events = dripFeed(input, limits: limits)
            // Whatever happened, a body never appears before a head and nothing follows an error.
            if let errorIndex = events.firstIndex(where: { if case .error = $0 { return true } else { return false } }) {
                #expect(errorIndex == events.count - 1)
            }
            if case .body? = events.first { Issue.record("body before head for \(input)") }
        }
    }
}
