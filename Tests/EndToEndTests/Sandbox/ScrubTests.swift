import Foundation
import TestSupport
import Testing

/// CONTRACT.md "Programs in a sandbox", "Scrubbing", through the real binary with curl and Python
/// requests: an upstream that echoes the credential back (`credential_echo.py`) in a field, in a
/// Content-Length body, in a chunked body and split across two writes with a pause between; each
/// comes back with the same number of `*` and right lengths. A gzip answer is 502; a route without
/// `scrub` passes the answer as it came.
@Suite(.tags(.endToEnd), .timeLimit(.minutes(10))) struct ScrubTests {
    static let stars = String(repeating: "*", count: e2eToken.count)

    static func expectNoToken(_ r: CurlResult, _ secret: String = e2eToken, sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(!r.bodyString.contains(secret), "the body carries the secret: \(r.bodyString)", sourceLocation: sourceLocation)
        for field in r.headers {
            #expect(!field.value.contains(secret), "\(field.name) carries the secret", sourceLocation: sourceLocation)
        }
    }

    @Test func aFieldThatCarriesTheTokenComesBackWithStarsOfItsLength() throws {
        let f = try ScrubFixture(extra: "scrub: true")
        let r = try curl([f.url("/field")])
        #expect(r.status == 200, "\(r.bodyString)")
        #expect(r.header("X-Echoed") == "Bearer \(Self.stars)")
        Self.expectNoToken(r)
        #expect(try f.scrubbedTotal() == 1)
        try f.finish()
    }

    @Test func aContentLengthBodyIsScrubbedAndKeepsItsLength() throws {
        let f = try ScrubFixture(extra: "scrub: true")
        let r = try curl([f.url("/length")])
        #expect(r.status == 200)
        #expect(r.bodyString == "first: Bearer \(Self.stars)\nsecond: Bearer \(Self.stars)\n")
        #expect(r.header("Content-Length") == String(r.body.count))
        Self.expectNoToken(r)
        #expect(try f.scrubbedTotal() == 2)
        try f.finish()
    }

    @Test func aChunkedBodyIsScrubbedAcrossItsChunksAndFramedAgain() throws {
        let f = try ScrubFixture(extra: "scrub: true")
        let r = try curl([f.url("/chunked")])
        #expect(r.status == 200)
        #expect(r.header("Transfer-Encoding") == "chunked")
        #expect(r.bodyString == "cut: Bearer \(Self.stars)\nwhole: Bearer \(Self.stars)\n")
        Self.expectNoToken(r)
        try f.finish()
    }

    /// The upstream writes the body up to the token's middle, flushes, waits, then sends the rest:
    /// the two halves reach the proxy in two reads.
    @Test(arguments: ["/split", "/split-chunked"])
    func aTokenSplitAcrossTwoWritesWithAPauseIsFoundWithCurl(path: String) throws {
        let f = try ScrubFixture(extra: "scrub: true")
        let r = try curl([f.url(path + "?ms=400")])
        #expect(r.status == 200)
        #expect(r.bodyString == "before Bearer \(Self.stars) after\n")
        Self.expectNoToken(r)
        #expect(try f.scrubbedTotal() == 1)
        try f.finish()
    }

    /// The same with Python requests (its own HTTP/1.1 client, asking for gzip by default) and a
    /// key in a field of its own (`x-api-key`, as an agent SDK sends it).
    @Test func aTokenSplitAcrossTwoWritesIsFoundWithPythonRequests() throws {
        let f = try ScrubFixture(extra: "scrub: true\ninject: {header: x-api-key, format: \"{token}\"}")
        let script = """
            import json, sys, requests
            out = []
            for path in ["/split?from=x-api-key&ms=400", "/split-chunked?from=x-api-key&ms=400", "/field?from=x-api-key"]:
                r = requests.get(sys.argv[1] + path, timeout=30)
                out.append({"status": r.status_code, "body": r.text, "fields": dict(r.headers)})
            print(json.dumps(out))
            """
        let run = try runCommand("python3", arguments: ["-c", script, f.proxy.baseURL])
        #expect(run.status == 0, "\(run.stderr)")
        let answers = try #require(try JSONSerialization.jsonObject(with: Data(run.stdout.utf8)) as? [[String: Any]])
        #expect(answers.count == 3)
        for answer in answers.prefix(2) {
            #expect(answer["status"] as? Int == 200)
            #expect(answer["body"] as? String == "before \(Self.stars) after\n")
        }
        let fields = answers.last?["fields"] as? [String: String] ?? [:]
        #expect(fields["X-Echoed"] == Self.stars)
        #expect(fields["X-Accept-Encoding"] == "identity", "the client's gzip, deflate made way for identity")
        #expect(!run.stdout.contains(e2eToken))
        try f.finish()
    }

    @Test func theBasicSpellingAndThePercentEncodedQueryAreScrubbedToo() throws {
        let basic = try ScrubFixture(extra: "scrub: true\ninject: {basic_username: x-access-token}")
        let encoded = Data("x-access-token:\(e2eToken)".utf8).base64EncodedString()
        let r = try curl([basic.url("/length")])
        #expect(r.bodyString == "first: Basic \(String(repeating: "*", count: encoded.count))\nsecond: Basic \(String(repeating: "*", count: encoded.count))\n")
        Self.expectNoToken(r, encoded)
        try basic.finish()
        let query = try ScrubFixture(extra: "scrub: true\ninject: {query: key}")
        let q = try curl([query.url("/split?from=query")])
        #expect(q.status == 200)
        #expect(q.bodyString == "before from=query&key=\(Self.stars) after\n")
        Self.expectNoToken(q)
        // A field is counted like the body (the query route's own field scrubbing makes way for this one).
        let field = try curl([query.url("/field?from=query")])
        #expect(field.header("X-Echoed") == "from=query&key=\(Self.stars)")
        Self.expectNoToken(field)
        #expect(try query.scrubbedTotal() == 2)
        try query.finish()
    }

    /// `type: aws`: the session token went up (X-Amz-Security-Token) and comes back scrubbed; the
    /// secret key never went up, and an upstream that hands it out anyway (here from a field the test
    /// sends) has it scrubbed too.
    @Test func theAWSSessionTokenAndSecretKeyAreScrubbed() throws {
        let secret = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYscrubKEY"
        let session = "FwoGZXIvYXdzEscrub-session-\(UUID().uuidString)"
        let f = try ScrubFixture(
            extra: "scrub: true", credentials: "type: aws\nregion: eu-west-1\nservice: execute-api\nsource: environment",
            environment: ["AWS_ACCESS_KEY_ID": "AKIDSCRUBEXAMPLE", "AWS_SECRET_ACCESS_KEY": secret, "AWS_SESSION_TOKEN": session])
        let token = try curl([f.url("/split?from=x-amz-security-token")])
        #expect(token.status == 200, "\(token.bodyString)")
        #expect(token.bodyString == "before \(String(repeating: "*", count: session.count)) after\n")
        Self.expectNoToken(token, session)
        let plain = try curl([f.url("/field?from=x-secret"), "-H", "X-Secret: \(secret)"])
        #expect(plain.header("X-Echoed") == String(repeating: "*", count: secret.count))
        Self.expectNoToken(plain, secret)
        #expect(try f.scrubbedTotal() == 2)
        try f.finish()
    }

    /// Fail closed: an answer the proxy cannot read is not passed on, whatever the client accepts.
    @Test func aGzipAnswerIs502AndNothingOfItsBodyReachesTheClient() throws {
        let f = try ScrubFixture(extra: "scrub: true")
        let r = try curl(["--compressed", f.url("/gzip")])
        expectProxyError(r, status: 502, code: "bad_gateway")
        #expect(r.header("Content-Encoding") == nil)
        Self.expectNoToken(r)
        // The connection to the upstream is not kept with an unread body: the next request works.
        let next = try curl([f.url("/field")])
        #expect(next.status == 200)
        #expect(next.header("X-Accept-Encoding") == "identity")
        try f.finish()
    }

    @Test func aRouteWithoutScrubPassesTheAnswerAsItCame() throws {
        let f = try ScrubFixture(extra: "")
        let r = try curl(["-H", "Accept-Encoding: gzip", f.url("/field")])
        #expect(r.header("X-Echoed") == "Bearer \(e2eToken)")
        #expect(r.header("X-Accept-Encoding") == "gzip", "the client's Accept-Encoding goes up as it came")
        let body = try curl([f.url("/split")])
        #expect(body.bodyString == "before Bearer \(e2eToken) after\n")
        #expect(try f.scrubbedTotal() == 0)
        try f.finish()
    }
}
