import Config
import Credentials
import Foundation
import HTTP1
import Testing

@testable import ProxyCore

/// CONTRACT.md "Programs in a sandbox", "Scrubbing": the streaming replacer fed every way a body can
/// arrive (whole, split in two at every position, a byte at a time, random reads) must give what one
/// plain replacement over the whole body gives; the values a placement sends; the head scrubbed in
/// place; an encoded answer refused.
@Suite struct ResponseScrubberTests {
    /// The plain replacement, written independently: at each position the longest value there
    /// becomes as many `*`, and the scan goes on after it.
    static func reference(_ input: [UInt8], _ values: [String]) -> (bytes: [UInt8], count: Int) {
        let sorted = values.filter { !$0.isEmpty }.map { Array($0.utf8) }.sorted { $0.count > $1.count }
        var out = input
        var count = 0
        var i = 0
        while i < out.count {
            if let value = sorted.first(where: { i + $0.count <= input.count && Array(input[i..<(i + $0.count)]) == $0 }) {
                for j in i..<(i + value.count) { out[j] = UInt8(ascii: "*") }
                count += 1
                i += value.count
            } else {
                i += 1
            }
        }
        return (out, count)
    }

    /// `input` through one scrubber in pieces cut at `cuts`; the output, the count, and the most
    /// bytes it held back after any read.
    static func streamed(_ input: [UInt8], _ values: [String], cuts: [Int]) -> (bytes: [UInt8], count: Int, mostHeld: Int) {
        let scrubber = ResponseScrubber(ScrubPatterns(values))
        var out: [UInt8] = []
        var mostHeld = 0
        var start = 0
        for end in cuts + [input.count] where end >= start {
            input[start..<end].withUnsafeBytes { piece in _ = scrubber.scrub(piece) { out.append(contentsOf: $0) } }
            start = end
            mostHeld = max(mostHeld, start - out.count)
        }
        scrubber.finish { out.append(contentsOf: $0) }
        return (out, scrubber.count, mostHeld)
    }

    static let cases: [(body: String, values: [String])] = [
        ("before SECRET-TOKEN after", ["SECRET-TOKEN"]),
        ("SECRET-TOKEN", ["SECRET-TOKEN"]),
        ("xSECRET-TOKENSECRET-TOKENy SECRET-TOKE", ["SECRET-TOKEN"]),
        // Overlapping prefixes: the value begins again inside a false start.
        ("aaab aab aaaab", ["aab"]),
        ("abababc ababc", ["ababc"]),
        // Several values, one inside another, the longest wins where both start.
        ("token tokenABC dG9rZW4= tokentoken", ["token", "tokenABC", "dG9rZW4="]),
        ("abc abcd bcd", ["abcd", "bc"]),
        ("no value here at all", ["zzz", "qqqq"]),
        ("", ["x"]),
    ]

    @Test(arguments: cases.indices)
    func splitAtEveryPositionGivesWhatTheWholeGives(_ index: Int) {
        let (body, values) = Self.cases[index]
        let input = Array(body.utf8)
        let expected = Self.reference(input, values)
        let longest = values.map(\.utf8.count).max() ?? 0
        let whole = Self.streamed(input, values, cuts: [])
        #expect(whole.bytes == expected.bytes && whole.count == expected.count)
        for cut in 0...input.count {
            let split = Self.streamed(input, values, cuts: [cut])
            #expect(split.bytes == expected.bytes, "cut at \(cut): \(String(decoding: split.bytes, as: UTF8.self))")
            #expect(split.count == expected.count, "cut at \(cut)")
            #expect(split.mostHeld <= max(longest - 1, 0), "cut at \(cut) held \(split.mostHeld)")
        }
        let bytewise = Self.streamed(input, values, cuts: Array(0...input.count))
        #expect(bytewise.bytes == expected.bytes && bytewise.count == expected.count)
        #expect(bytewise.mostHeld <= max(longest - 1, 0))
    }

    /// Several values (the scan by first bytes), and one value whose least common byte is inside it
    /// (the scan by that anchor byte).
    @Test(arguments: [(["abca", "bcab", "aab", "c"], "abc"), (["ab-ab"], "ab-"), (["a-a"], "a-")])
    func randomBodiesInRandomReadsOverASmallAlphabet(values: [String], alphabet: String) {
        var state: UInt64 = 0x2545_F491_4F6C_DD1D
        func next(_ n: Int) -> Int {
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return Int((state >> 33) % UInt64(n))
        }
        let letters = Array(alphabet.utf8)
        let longest = values.map(\.utf8.count).max() ?? 0
        for _ in 0..<500 {
            let input = (0..<next(60)).map { _ in letters[next(letters.count)] }
            var cuts: [Int] = []
            var at = 0
            while at < input.count {
                at += 1 + next(7)
                cuts.append(min(at, input.count))
            }
            let expected = Self.reference(input, values)
            let got = Self.streamed(input, values, cuts: cuts)
            #expect(got.bytes == expected.bytes, "\(String(decoding: input, as: UTF8.self)) cut at \(cuts)")
            #expect(got.count == expected.count)
            #expect(got.mostHeld <= longest - 1)
        }
    }

    @Test func aReadWithNoPossibleValueGoesAsItCameAndNothingIsHeld() {
        let scrubber = ResponseScrubber(ScrubPatterns(["Zq-secret"]))
        var runs: [[UInt8]] = []
        Array("plain body bytes".utf8).withUnsafeBytes { _ = scrubber.scrub($0) { runs.append(Array($0)) } }
        #expect(runs == [Array("plain body bytes".utf8)])
        var tail: [[UInt8]] = []
        scrubber.finish { tail.append(Array($0)) }
        #expect(tail.isEmpty)
    }

    @Test func aValueCutShortAtTheBodysEndGoesAsItCame() {
        let got = Self.streamed(Array("ends with Zq-sec".utf8), ["Zq-secret"], cuts: [3])
        #expect(String(decoding: got.bytes, as: UTF8.self) == "ends with Zq-sec")
        #expect(got.count == 0)
    }

    @Test func theHeadIsScrubbedInPlaceAndKeepsItsLength() {
        let out = ByteBuffer(Array("earlier bytes ".utf8))
        let start = out.count
        out.append(Array("HTTP/1.1 200 OK\r\nX-Echo: Bearer tok-123\r\nX-Two: tok-123tok-123\r\nContent-Length: 7\r\n\r\n".utf8))
        let scrubber = ResponseScrubber(ScrubPatterns(["tok-123"]))
        #expect(scrubber.scrubHead(out, from: start) == 3)
        #expect(
            String(decoding: out.bytes, as: UTF8.self)
                == "earlier bytes HTTP/1.1 200 OK\r\nX-Echo: Bearer *******\r\nX-Two: **************\r\nContent-Length: 7\r\n\r\n")
        #expect(scrubber.count == 3)
    }

    static func placement(_ extra: String, credentials: String = RequestCredentialTests.staticToken) throws -> CredentialPlacement {
        RouteCredential(try RequestCredentialTests.route(credentials, extra)).placement
    }

    @Test func theValuesEachPlacementSends() throws {
        let token = RequestCredentialTests.token("a/b+c")
        #expect(ScrubPatterns.values(of: token, placement: try Self.placement("")) == ["a/b+c"])
        #expect(ScrubPatterns.values(of: token, placement: try Self.placement("inject: {header: X-Key, format: \"k {token}\"}")) == ["a/b+c"])
        let basic = Data("x-access-token:a/b+c".utf8).base64EncodedString()
        #expect(ScrubPatterns.values(of: token, placement: try Self.placement("inject: {basic_username: x-access-token}")) == ["a/b+c", basic])
        #expect(ScrubPatterns.values(of: token, placement: try Self.placement("inject: {query: key}")) == ["a/b+c", "a%2Fb%2Bc"])
        let bound = RequestCredentialTests.token("bound-tok", dpop: DPoPProver.generate())
        #expect(ScrubPatterns.values(of: bound, placement: try Self.placement("", credentials: RequestCredentialTests.dpop)) == ["bound-tok"])
        let keys = AWSCredentials(accessKeyID: "AKIDEXAMPLE", secretAccessKey: "wJalr/SECRET", sessionToken: "FwoGZX-session")
        let aws = TokenSnapshot(accessToken: keys.containerEndpointJSON, expiresAt: nil, issuedAt: 0, generation: 1, aws: AWSSigningCredentials(keys))
        let signed = try Self.placement("", credentials: RequestCredentialTests.aws)
        #expect(ScrubPatterns.values(of: aws, placement: signed) == ["wJalr/SECRET", "FwoGZX-session"])
    }

    @Test func aRouteMakesNoScrubberWithoutAToken() throws {
        let scrubbing = RouteScrubbing(placement: try Self.placement(""))
        var kept: ResponseScrubber?
        #expect(scrubbing.scrubber(for: nil, kept: &kept) == nil)
        #expect(kept == nil)
        let token = RequestCredentialTests.token("tok")
        let first = try #require(scrubbing.scrubber(for: token, kept: &kept))
        let second = try #require(scrubbing.scrubber(for: token, kept: &kept))
        #expect(first.patterns === second.patterns, "one token's patterns are made once")
        #expect(first === second && kept === first, "a connection's answers share its one scrubber")
    }

    /// A connection's scrubber goes from one answer to the next: what the last held back and counted
    /// is gone, and the next token's values are the ones scrubbed.
    @Test func aKeptScrubberStartsEachAnswerAfresh() throws {
        let scrubbing = RouteScrubbing(placement: try Self.placement(""))
        var kept: ResponseScrubber?
        let old = try #require(scrubbing.scrubber(for: RequestCredentialTests.token("old-tok"), kept: &kept))
        var out: [UInt8] = []
        Array("old-tok and old-".utf8).withUnsafeBytes { _ = old.scrub($0) { out.append(contentsOf: $0) } }
        #expect(String(decoding: out, as: UTF8.self) == "******* and ", "old- waits for the next read")
        #expect(old.count == 1)
        let new = try #require(scrubbing.scrubber(for: RequestCredentialTests.token("new-tok"), kept: &kept))
        #expect(new === old && new.count == 0)
        var rest: [UInt8] = []
        new.finish { rest.append(contentsOf: $0) }
        #expect(rest.isEmpty, "the last answer's held bytes are not the next one's")
        out = []
        Array("old-tok new-tok".utf8).withUnsafeBytes { _ = new.scrub($0) { out.append(contentsOf: $0) } }
        new.finish { out.append(contentsOf: $0) }
        #expect(String(decoding: out, as: UTF8.self) == "old-tok *******")
        #expect(new.count == 1)
    }

    @Test(arguments: [
        ("Content-Encoding: gzip\r\n", true), ("Content-Encoding: identity\r\n", false), ("", false),
        ("Content-Encoding: identity, br\r\n", true), ("content-encoding: GZIP\r\n", true),
    ])
    func anEncodedAnswerIsRefused(field: String, refused: Bool) {
        let head = ForwarderTests.response("HTTP/1.1 200 OK\r\n\(field)Content-Length: 0\r\n\r\n")
        #expect((ResponseScrubber.refusal(head) != nil) == refused)
    }

    @Test func aScrubbingRouteAsksTheUpstreamForTheWholeAnswerInIdentity() throws {
        let forwarder = try ForwarderTests.forwarder("scrub: true")
        let head = ForwarderTests.request(
            "GET /items HTTP/1.1\r\nHost: h\r\nAccept-Encoding: gzip, br\r\nRange: bytes=7-12\r\nIf-Range: \"v1\"\r\nAccept: */*\r\n\r\n")
        let out = ByteBuffer()
        forwarder.writeRequestHead(
            into: out, for: head,
            Forwarder.RequestParts(path: "/items", query: nil, forwardedFor: Forwarder.forwardedForLines(peerHost: "127.0.0.1", https: false)),
            credential: RequestCredential(placement: forwarder.credential.placement, token: RequestCredentialTests.token()))
        let text = String(decoding: out.bytes, as: UTF8.self)
        #expect(text.contains("Accept-Encoding: identity\r\n"))
        #expect(!text.contains("gzip"))
        #expect(!text.contains("Range"), "a range could cut a token the scrubber would then not recognise")
        #expect(text.contains("Accept: */*\r\n"))
        let plain = try ForwarderTests.forwarder()
        #expect(!plain.asksWholeIdentity)
    }

    @Test func theKeyIsOffByDefaultAndARouteTakesTheTopLevelsUnlessItSaysOtherwise() throws {
        #expect(try RequestCredentialTests.route(RequestCredentialTests.staticToken, "").scrub == false)
        #expect(try RequestCredentialTests.route(RequestCredentialTests.staticToken, "scrub: true").scrub == true)
        let yaml = """
            listen: 127.0.0.1:8080
            scrub: true
            routes:
              - {name: a, match: {path_prefix: /a/}, upstream: "https://a.example", credentials: {type: static, token_env: T}}
              - {name: b, match: {path_prefix: /b/}, upstream: "https://b.example", credentials: {type: static, token_env: T}, scrub: false}
            """
        let routes = try ConfigurationLoader.parse(yaml: yaml, baseDirectory: "/", environment: ["T": "t"]).configuration.routes
        #expect(routes.map(\.scrub) == [true, false])
        let error = #expect(throws: ConfigurationError.self) { try RequestCredentialTests.route(RequestCredentialTests.staticToken, "scrub: yes") }
        #expect(error?.description.contains("scrub") == true, "the error names the key: \(String(describing: error))")
    }
}
