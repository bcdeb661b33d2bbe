import Foundation
import TestSupport
import Testing

/// What the proxy writes upstream (issue 11 point 3; CONTRACT.md points 1 and 8): the request head
/// byte for byte as `framing_upstream.py` received it, and `Expect: 100-continue` end to end.
@Suite(.tags(.endToEnd), .timeLimit(.minutes(35))) struct UpstreamRequestTests {
    /// The request head the upstream received, split into lines (raw bytes, CRLF removed).
    func forwardedHead(_ response: HTTPResponse) throws -> [[UInt8]] {
        let b64 = try #require(response.json?["head_b64"] as? String, "\(response)")
        let head = try #require(Data(base64Encoded: b64)).map { $0 }
        var lines: [[UInt8]] = []
        var current: [UInt8] = []
        var i = 0
        while i < head.count {
            if head[i] == 13, i + 1 < head.count, head[i + 1] == 10 {
                lines.append(current)
                current = []
                i += 2
            } else {
                current.append(head[i])
                i += 1
            }
        }
        return lines.filter { !$0.isEmpty }
    }

    func name(of line: [UInt8]) -> String {
        String(decoding: line.prefix { $0 != UInt8(ascii: ":") }, as: UTF8.self)
    }

    /// The fields tokenproxy may write besides the client's own end-to-end fields.
    static let proxyFields: Set<String> = [
        "host", "authorization", "x-forwarded-for", "x-forwarded-proto", "x-forwarded-host", "content-length", "transfer-encoding",
    ]

    @Test func fieldsAreForwardedInOrderWithTheirCaseAndNothingIsAdded() throws {
        let f = try FramingFixture()
        let client = try f.connect()
        let sent: [(String, String)] = [
            ("X-Zeta", "1"), ("x-alpha", "two"), ("X-MiXeD-CaSe", "Value  With\tInner Space"), ("X-Zeta", "3"), ("cache-control", "no-cache"),
        ]
        try client.send(rawRequest("GET", "/rawhead", host: f.host, headers: sent))
        let lines = try forwardedHead(try client.readResponse())
        #expect(String(decoding: lines[0], as: UTF8.self) == "GET /f/rawhead HTTP/1.1")
        let own = lines.dropFirst().filter { !Self.proxyFields.contains(name(of: $0).lowercased()) }
        #expect(own.map { String(decoding: $0, as: UTF8.self) } == sent.map { "\($0.0): \($0.1)" })
        let fieldLines = lines.dropFirst().map { String(decoding: $0, as: UTF8.self) }
        #expect(fieldLines.contains("Authorization: Bearer \(e2eToken)"))
        #expect(fieldLines.filter { $0.lowercased().hasPrefix("authorization:") }.count == 1)

        // Uploads, with a length and chunked: no Expect, Content-Type, Accept or User-Agent of the
        // proxy's own (libcurl would add some of them).
        let big = testBytes(count: 2 * 1024 * 1024)
        try client.send(rawRequest("POST", "/rawhead", host: f.host, body: big))
        let withLength = try forwardedHead(try client.readResponse())
        try client.send(rawRequest("PUT", "/rawhead", host: f.host, headers: [("Transfer-Encoding", "chunked")], body: chunked(big), contentLength: false))
        let withChunks = try forwardedHead(try client.readResponse())
        for head in [withLength, withChunks] {
            let names = head.dropFirst().map { name(of: $0).lowercased() }
            #expect(Set(names).isSubset(of: Self.proxyFields), "\(names)")
        }
        #expect(withLength.contains(Array("Content-Length: \(big.count)".utf8)))
        try f.finish()
    }

    @Test func fieldValueBytesAbove0x7FReachTheUpstreamUnchanged() throws {
        let f = try FramingFixture()
        let client = try f.connect()
        // Latin-1 "café crème" (invalid UTF-8), an obs-text byte 0xFF, and valid UTF-8 "ü".
        let latin: [UInt8] = Array("X-Latin: caf".utf8) + [0xE9] + Array(" cr".utf8) + [0xE8] + Array("me".utf8)
        let obs: [UInt8] = Array("X-Obs: a".utf8) + [0xFF, 0x80] + Array("b".utf8)
        let utf8: [UInt8] = Array("X-Utf8: ü".utf8)
        var request = Array("GET /rawhead HTTP/1.1\r\nHost: \(f.host)\r\n".utf8)
        for line in [latin, obs, utf8] { request += line + [13, 10] }
        request += [13, 10]
        try client.send(request)
        let response = try client.readResponse()
        #expect(response.status == 200, "\(response)")
        let lines = try forwardedHead(response)
        for line in [latin, obs, utf8] {
            #expect(lines.contains(line), "not forwarded byte for byte: \(line); got \(lines.filter { $0.starts(with: line.prefix(5)) })")
        }
        try f.finish()
    }

    // MARK: - Expect: 100-continue

    @Test func expectContinueUploadFromCurlArrivesWhole() throws {
        // Today's proxy answers 100 itself, the new one relays the upstream's: either way curl's
        // body arrives whole and the answer is the upstream's.
        let f = try FramingFixture()
        let body = testBytes(count: 1024 * 1024 + 5, seed: 11)
        let file = try f.proxy.directory.write("body.bin", Data(body))
        let r = try curl(["-H", "Expect: 100-continue", "--expect100-timeout", "30", "--data-binary", "@\(file)", f.url("/expect")])
        #expect(r.status == 200, "\(r.bodyString)")
        #expect(r.json?["body_len"] as? Int == body.count)
        #expect(r.json?["body_sha256"] as? String == (try sha256Hex(body)))
        try f.finish()
    }

    @Test func upstreams100ContinueComesBackAndTheBodyFollows() throws {
        let f = try FramingFixture()
        let body = testBytes(count: 300 * 1024, seed: 3)
        let client = try f.connect()
        // The client waits for the 100 before sending a byte of the body: it must be the upstream's.
        let final = try sendAfterTheUpstreams100(client, "POST", "/expect?tag=go", host: f.host, body: body)
        #expect(final.status == 200, "\(final)")
        #expect(final.json?["expect"] as? Bool == true, "Expect did not reach the upstream")
        #expect(final.json?["sent_100"] as? Bool == true)
        #expect(final.json?["body_len"] as? Int == body.count)
        #expect(final.json?["body_sha256"] as? String == (try sha256Hex(body)))
        // The connection goes on.
        try client.send(rawRequest("GET", "/ok", host: f.host))
        #expect(try client.readResponse().status == 200)
        try f.finish()
    }

    @Test(arguments: [417, 401, 413])
    func finalAnswerWithout100ReachesTheClientAndNoBodyGoesUp(status: Int) throws {
        let f = try FramingFixture()
        let tag = "refuse\(status)"
        let client = try f.connect()
        try client.send(
            rawRequest(
                "POST", "/expect-refuse?status=\(status)&tag=\(tag)", host: f.host, headers: [("Expect", "100-continue"), ("Content-Length", "1048576")],
                contentLength: false))
        let first = try client.readResponse()
        #expect(first.status == status, "the client was told to send its body: \(first)")
        #expect(first.json?["refused"] as? Int == status)
        client.close()
        let records = try f.closedRecords(tag)
        #expect(records.count == 1, "\(records)")
        #expect(records.first?["expect"] as? Bool == true)
        #expect(records.first?["post_final_bytes"] as? Int == 0, "body bytes reached the upstream: \(records)")
        // A 401 with a static token is retried once (CONTRACT point 3); either way no body went up.
        #expect(try f.get("/ok").status == 200)
        try f.finish()
    }

    @Test func curlsBodyIsNotSentWhenTheUpstreamRefusesBefore100() throws {
        // A real client: curl waits for the 100 (up to 30 s here) and sends nothing after a 413.
        let f = try FramingFixture()
        let body = testBytes(count: 4 * 1024 * 1024, seed: 5)
        let file = try f.proxy.directory.write("body.bin", Data(body))
        let r = try curl([
            "-H", "Expect: 100-continue", "--expect100-timeout", "30", "--data-binary", "@\(file)", f.url("/expect-refuse?status=413&tag=curl413"),
        ])
        #expect(r.status == 413, "\(r.bodyString) \(r.stderr)")
        let records = try f.closedRecords("curl413")
        #expect(records.count == 1, "\(records)")
        #expect(records.first?["post_final_bytes"] as? Int == 0, "body bytes reached the upstream: \(records)")
        try f.finish()
    }
}

/// `Expect: 100-continue` meets an upstream 401 before its 100, with a token source that can be
/// refreshed (the Authlib OAuth server of the token life-cycle tests).
@Suite(.serialized, .tags(.endToEnd), .timeLimit(.minutes(35))) struct ExpectContinueRefreshTests {
    @Test func a401Before100IsRefreshedOnceAndRetriedWithoutReplay() throws {
        let life = try Lifecycle(idpArguments: ["--access-ttl", "3600"])
        defer { life.stop() }
        #expect(try life.login().status == 0)
        let upstream = try PythonServer("framing_upstream")
        defer { upstream.stop() }
        let proxy = try ProxyProcess(
            config: """
                listen: 127.0.0.1:0
                upstream: \(upstream.baseURL)/f
                workers: 1
                drain_timeout: 2s
                credentials:
                  type: oauth2_refresh
                  token_url: \(life.idp.baseURL)/oauth/token
                  client_id: app
                  client_secret_env: LIFE_CLIENT_SECRET
                  refresh_margin: 5s
                forward:
                  retry_body_limit: 64KiB
                log:
                  level: debug
                """,
            directory: life.dir, environment: life.environment)
        // Larger than retry_body_limit: only a retry that needs no replay can succeed.
        let body = testBytes(count: 2 * 1024 * 1024, seed: 9)
        let client = try RawHTTPClient(port: proxy.port, timeout: 20)
        let final = try sendAfterTheUpstreams100(client, "PUT", "/expect-auth?tag=auth", host: proxy.address, body: body)
        #expect(final.status == 200, "\(final)")
        #expect(final.json?["body_len"] as? Int == body.count)
        #expect(final.json?["body_sha256"] as? String == (try sha256Hex(body)))
        #expect(try life.idpCalls("refresh_token") == 1)

        let stats = try #require(try curl([upstream.baseURL + "/_stats"]).json)
        let records = try #require((stats["tags"] as? [String: Any])?["auth"] as? [[String: Any]])
        #expect(records.count == 2, "\(records)")
        #expect(records.first?["status"] as? Int == 401)
        #expect(records.last?["status"] as? Int == 200)
        let tokens = records.compactMap { $0["auth"] as? String }
        #expect(tokens.count == 2 && tokens[0] != tokens[1] && tokens.allSatisfy { $0.hasPrefix("Bearer ") }, "the retry did not carry a new token")
        try proxy.stopAndExpectCleanExit()
        // Every upstream connection is closed now: the refused attempt's count is final.
        let refused = try #require(try curl([upstream.baseURL + "/_wait?tag=auth"], timeout: 30).json?["entries"] as? [[String: Any]])
        #expect(refused.first?["post_final_bytes"] as? Int == 0, "the first attempt's body went upstream: \(refused)")
        life.assertNoLeaks([proxy])
    }
}

/// Sends the head of a request with `Expect: 100-continue`, expects the upstream's own 100 (not
/// one the proxy made up, RFC 9110 §10.1.1), then sends `body`; the final answer.
func sendAfterTheUpstreams100(
    _ client: RawHTTPClient, _ method: String, _ target: String, host: String, body: [UInt8], sourceLocation: SourceLocation = #_sourceLocation
) throws -> HTTPResponse {
    try client.send(
        rawRequest(method, target, host: host, headers: [("Expect", "100-continue"), ("Content-Length", String(body.count))], contentLength: false))
    let interim = try client.readResponse()
    #expect(interim.status == 100, "\(interim)", sourceLocation: sourceLocation)
    #expect(interim.header("X-Interim-From") == "framing-upstream", "the proxy answered 100 itself: \(interim)", sourceLocation: sourceLocation)
    try client.send(body)
    return try client.readResponse()
}
