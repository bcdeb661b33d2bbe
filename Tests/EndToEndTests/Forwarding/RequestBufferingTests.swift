import Foundation
import TestSupport
import Testing

/// What Django (on gunicorn, a real WSGI stack) says it received.
struct DjangoEcho: Decodable {
    let method: String
    let body_len: Int
    let body_sha256: String
    let content_length: String?
    let transfer_encoding: String?
    let x_forwarded_for: String?

    /// Django read `body` whole: as many bytes, the same digest.
    func expectWhole(_ body: [UInt8], sourceLocation: SourceLocation = #_sourceLocation) throws {
        #expect(body_len == body.count, sourceLocation: sourceLocation)
        #expect(body_sha256 == (try sha256Hex(body)), sourceLocation: sourceLocation)
    }

    /// Django read `body` whole, and it came with Content-Length, not chunked.
    func expectWholeWithContentLength(_ body: [UInt8], sourceLocation: SourceLocation = #_sourceLocation) throws {
        try expectWhole(body, sourceLocation: sourceLocation)
        #expect(content_length == String(body.count), sourceLocation: sourceLocation)
        #expect(transfer_encoding == nil, sourceLocation: sourceLocation)
    }
}

struct DjangoStats: Decodable {
    let requests: Int
    let unauthorized: Int
}

/// A chunked request body arrives whole at Django: CONTRACT point 8 and `forward.request_buffering`
/// (Django reads a body by Content-Length only; a chunked one reads as empty). A Django application
/// on gunicorn, an Authlib authorization server and tokenproxy, each a real process.
@Suite(.tags(.endToEnd), .timeLimit(.minutes(35))) struct RequestBufferingTests {
    /// tokenproxy with `oauth2_client_credentials` in front of django_upstream.py.
    final class DjangoFixture: Sendable {
        let django: PythonServer
        let idp: OAuthServer
        let proxy: ProxyProcess

        init(extra: String = "") throws {
            django = try PythonServer("django_upstream")
            idp = try OAuthServer.start()
            let config = """
                listen: 127.0.0.1:0
                upstream: \(django.baseURL)
                workers: 1
                drain_timeout: 2s
                credentials:
                  type: oauth2_client_credentials
                  token_url: \(idp.tokenURL)
                  client_id: app
                  client_secret_env: DJANGO_TEST_SECRET
                log:
                  level: debug
                \(extra)
                """
            proxy = try ProxyProcess(config: config, environment: ["DJANGO_TEST_SECRET": "secret"])
        }

        /// A chunked PUT through the proxy, as `curl -T - -H 'Expect:'` sends it from a pipe.
        func putChunked(_ body: [UInt8]) throws -> (CurlResult, DjangoEcho?) {
            let file = try proxy.directory.write("body-\(UUID().uuidString).bin", Data(body))
            let r = try curl(["-T", file, "-H", "Transfer-Encoding: chunked", "-H", "Expect:", proxy.baseURL + "/echo"], timeout: 60)
            return (r, try? JSONDecoder().decode(DjangoEcho.self, from: Data(r.body)))
        }

        /// `putChunked`, answered 200 by Django: what Django says it received.
        func upload(_ body: [UInt8], sourceLocation: SourceLocation = #_sourceLocation) throws -> DjangoEcho {
            let (r, echo) = try putChunked(body)
            #expect(r.status == 200, "\(r.bodyString)", sourceLocation: sourceLocation)
            return try #require(echo, "not Django's echo: \(r.bodyString)", sourceLocation: sourceLocation)
        }

        func stats() throws -> DjangoStats {
            let r = try curl([django.baseURL + "/test/stats"])
            return try JSONDecoder().decode(DjangoStats.self, from: Data(r.body))
        }

        func finish() throws {
            proxy.terminate(signal: SIGTERM)
            #expect(try proxy.waitForExit(timeout: 15) == 0)
            django.stop()
            idp.stop()
        }
    }

    @Test func aChunkedUploadReachesDjangoWholeWithContentLength() throws {
        let f = try DjangoFixture()
        let body = testBytes(count: 200_000, seed: 11)
        let seen = try f.upload(body)
        #expect(seen.method == "PUT")
        try seen.expectWholeWithContentLength(body)
        try f.finish()
    }

    /// The upstream refuses the token: the proxy refreshes once and sends the request again with the
    /// kept body, which must arrive whole too (before, the replay went chunked and Django read nothing).
    @Test func aChunkedUploadThatMeetsA401IsRetriedWholeWithContentLength() throws {
        let f = try DjangoFixture()
        // A first request makes Django see the proxy's token; then Django refuses every token it saw.
        let (warm, _) = try f.putChunked(Array("warm".utf8))
        #expect(warm.status == 200)
        let fetchesBefore = try f.idp.stats().count(OAuthGrant.clientCredentials)
        try TestControlledServer.post(f.django.baseURL + "/test/reject-seen")

        let body = testBytes(count: 200_000, seed: 12)
        let seen = try f.upload(body)
        try seen.expectWholeWithContentLength(body)
        let stats = try f.stats()
        #expect(stats.unauthorized == 1, "one 401, then the retry")
        #expect(stats.requests == 3)
        #expect(try f.idp.stats().count(OAuthGrant.clientCredentials) == fetchesBefore + 1, "exactly one new token")
        try f.finish()
    }

    /// Beyond `forward.request_buffering` the body streams as it came (chunked): memory stays bounded.
    /// Beyond `request_buffering_disk` too: what was spooled goes first, then the rest, in order.
    @Test(arguments: ["{request_buffering: 64KiB}", "{request_buffering: 16KiB, request_buffering_disk: 256KiB}"])
    func aChunkedBodyOverTheLimitStreamsChunked(forward: String) throws {
        let f = try Fixture(extra: "forward: \(forward)")
        let body = testBytes(count: 2_000_000, seed: 13)
        let file = try f.proxy.directory.write("big.bin", Data(body))
        let r = try curl(["-T", file, "-H", "Transfer-Encoding: chunked", "-H", "Expect:", f.url("/upload")], timeout: 60)
        #expect(r.status == 200, "\(r.bodyString)")
        let echo = try Echo(r.body)
        #expect(echo.body_len == body.count)
        #expect(echo.body_sha256 == (try sha256Hex(body)))
        #expect(echo.values("Transfer-Encoding") == ["chunked"])
        #expect(!echo.has("Content-Length"))
        try f.finish()
    }

    /// A client that waits for `100 Continue` before its chunked body gets the proxy's own 100 (no byte
    /// of the request has gone upstream yet), and the body goes up with Content-Length and without
    /// the Expect the proxy answered (CONTRACT `forward.request_buffering`, as nginx does).
    @Test func aChunkedBodyWithExpectContinueIsAnsweredByTheProxyAndGoesWhole() throws {
        let f = try Fixture()
        let body = testBytes(count: 5_000, seed: 14)
        let client = try f.connect()
        try client.send(
            rawRequest("PUT", "/upload", host: f.host, headers: [("Transfer-Encoding", "chunked"), ("Expect", "100-continue")], contentLength: false))
        let interim = try client.readResponse(timeout: 30)
        #expect(interim.status == 100, "\(interim)")
        try client.send(chunked(body))
        let final = interim.status == 100 ? try client.readFinalResponse() : interim
        #expect(final.status == 200, "\(final)")
        let echo = try Echo(final.body)
        #expect(echo.body_len == body.count)
        #expect(echo.body_sha256 == (try sha256Hex(body)))
        #expect(echo.values("Content-Length") == [String(body.count)])
        #expect(!echo.has("Transfer-Encoding"))
        #expect(!echo.has("Expect"), "the proxy answered the Expect itself")
        try f.finish()
    }

    /// Issue 39: curl sends `Expect: 100-continue` with every upload over 1 MiB, and Django on gunicorn
    /// read such a chunked upload as empty (it went up chunked). Buffered in memory, or beyond memory
    /// in the spool, it reaches Django whole with Content-Length.
    @Test(arguments: ["{request_buffering: 4MiB}", "{request_buffering: 64KiB, request_buffering_disk: 8MiB}"])
    func curlsChunkedUploadOverOneMebibyteReachesDjangoWhole(forward: String) throws {
        let f = try DjangoFixture(extra: "forward: \(forward)")
        let body = testBytes(count: 2_500_000, seed: 18)
        let file = try f.proxy.directory.write("big.bin", Data(body))
        // Expect named as curl sends it for this size (so the test does not rest on curl's threshold).
        let r = try curl(
            ["-T", file, "-H", "Transfer-Encoding: chunked", "-H", "Expect: 100-continue", "--expect100-timeout", "30", f.proxy.baseURL + "/echo"],
            timeout: 90)
        #expect(r.status == 200, "\(r.bodyString)")
        let seen = try #require(try? JSONDecoder().decode(DjangoEcho.self, from: Data(r.body)), "not Django's echo: \(r.bodyString)")
        try seen.expectWholeWithContentLength(body)
        try f.finish()
    }

    /// Beyond `request_buffering`, `request_buffering_disk` spools the body to a 0600 file beside the
    /// store and sends it with Content-Length, as nginx does, so Django reads it whole (issue 33: it
    /// read 0 bytes); the file is gone when the request ends.
    @Test func aChunkedUploadBeyondMemoryIsSpooledAndReachesDjangoWhole() throws {
        let f = try DjangoFixture(extra: "forward: {request_buffering: 64KiB, request_buffering_disk: 8MiB}")
        let body = testBytes(count: 3_000_000, seed: 16)
        let seen = try f.upload(body)
        try seen.expectWholeWithContentLength(body)
        // The spool folder is 0700 beside the store and holds nothing once the request has ended.
        let spool = f.proxy.directory.file("state/spool")
        let attributes = try FileManager.default.attributesOfItem(atPath: spool)
        #expect((attributes[.posixPermissions] as? Int) == 0o700)
        #expect(try FileManager.default.contentsOfDirectory(atPath: spool).isEmpty)
        try f.finish()
    }

    /// A spooled body is wholly at hand: a 401 is retried from the spool, whole again.
    @Test func aSpooledUploadThatMeetsA401IsRetriedWhole() throws {
        let f = try DjangoFixture(extra: "forward: {request_buffering: 64KiB, request_buffering_disk: 8MiB, retry_body_limit: 64KiB}")
        let (warm, _) = try f.putChunked(Array("warm".utf8))
        #expect(warm.status == 200)
        try TestControlledServer.post(f.django.baseURL + "/test/reject-seen")
        let body = testBytes(count: 1_000_000, seed: 17)
        let seen = try f.upload(body)
        try seen.expectWhole(body)
        #expect(try f.stats().unauthorized == 1, "one 401, then the retry")
        try f.finish()
    }

    /// Spooled bodies together stay within `request_buffering_disk_total`: a body that would take the
    /// spools beyond it streams chunked from there, whole and in order; one within it still goes with
    /// Content-Length, before and after (the space of a spool is given back when its request ends).
    @Test func bodiesBeyondTheSpoolTotalStreamChunkedAndArriveWhole() throws {
        let f = try Fixture(extra: "forward: {request_buffering: 16KiB, request_buffering_disk: 8MiB, request_buffering_disk_total: 64KiB}")
        func upload(_ body: [UInt8], _ name: String) throws -> Echo {
            let file = try f.proxy.directory.write(name, Data(body))
            let r = try curl(["-T", file, "-H", "Transfer-Encoding: chunked", "-H", "Expect:", f.url("/upload")], timeout: 90)
            #expect(r.status == 200, "\(r.bodyString)")
            let echo = try Echo(r.body)
            #expect(echo.body_len == body.count)
            #expect(echo.body_sha256 == (try sha256Hex(body)))
            return echo
        }
        let small = testBytes(count: 40_000, seed: 19)
        #expect(try upload(small, "small.bin").values("Content-Length") == [String(small.count)], "within the total: spooled, whole")
        let big = try upload(testBytes(count: 2_000_000, seed: 20), "big.bin")
        #expect(big.values("Transfer-Encoding") == ["chunked"])
        #expect(!big.has("Content-Length"))
        #expect(try upload(small, "small.bin").values("Content-Length") == [String(small.count)], "the big body's spool space came back")
        try f.finish()
    }

    /// The spool folder must be the process's own, mode 0700, not a symbolic link: `check` and `serve`
    /// refuse anything else, naming the key, the folder and what is wrong (issue 39: a symbolic link to
    /// a folder everyone writes in was taken).
    @Test(arguments: ["a symbolic link", "mode 0755", "another owner"])
    func checkAndServeRefuseASpoolFolderThatIsNotTheProcesssOwn(_ kind: String) throws {
        let dir = try TempDir()
        let spool = dir.file("state/spool")
        try FileManager.default.createDirectory(atPath: dir.file("state"), withIntermediateDirectories: true)
        let expected: String
        switch kind {
        case "a symbolic link":
            let open = dir.file("open")
            try FileManager.default.createDirectory(atPath: open, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o777])
            try FileManager.default.createSymbolicLink(atPath: spool, withDestinationPath: open)
            expected = "\(spool) is a symbolic link"
        case "mode 0755":
            try FileManager.default.createDirectory(atPath: spool, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o755])
            expected = "\(spool) has mode 0755"
        default:
            // Only root can give a folder away.
            guard getuid() == 0 else { return }
            try FileManager.default.createDirectory(atPath: spool, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
            #expect(chown(spool, 65534, 65534) == 0)
            expected = "\(spool) is owned by uid 65534"
        }
        let config = try dir.write(
            "tokenproxy.yaml", staticTokenConfig(upstream: "http://127.0.0.1:9", workers: nil, more: "forward: {request_buffering_disk: 8MiB}"))
        for command in ["check", "serve"] {
            let result = try ProxyProcess.run(args: [command, "--config", config], env: ["E2E_TOKEN": e2eToken], timeout: 30)
            #expect(result.status == 2, "\(command): \(result.output)")
            #expect(result.stderr.contains("forward.request_buffering_disk: the spool folder \(expected)"), "\(command): \(result.stderr)")
            #expect(result.stderr.contains("mode 0700"), "\(command): \(result.stderr)")
        }
        // The process's own 0700 folder is taken.
        try FileManager.default.removeItem(atPath: spool)
        try FileManager.default.createDirectory(atPath: spool, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        let accepted = try ProxyProcess.run(args: ["check", "--config", config], env: ["E2E_TOKEN": e2eToken], timeout: 30)
        #expect(accepted.status == 0, "\(accepted.output)")
        #expect(accepted.stdout.contains("forward.request_buffering_disk_total: 1GiB"), "\(accepted.stdout)")
    }

    /// `request_buffering: 0` keeps the old streaming behaviour.
    @Test func zeroTurnsBufferingOff() throws {
        let f = try Fixture(extra: "forward:\n  request_buffering: 0")
        let body = testBytes(count: 1_000, seed: 15)
        let file = try f.proxy.directory.write("small.bin", Data(body))
        let r = try curl(["-T", file, "-H", "Transfer-Encoding: chunked", "-H", "Expect:", f.url("/upload")])
        let echo = try Echo(r.body)
        #expect(echo.body_len == body.count)
        #expect(echo.values("Transfer-Encoding") == ["chunked"])
        try f.finish()
    }
}

extension TestControlledServer {
    /// POSTs to a URL and expects 200 (a control call of a server that is not a TestControlledServer).
    static func post(_ url: String) throws {
        let result = try curl(["-X", "POST", "--data", "", url])
        guard result.status == 200 else { throw HarnessError("POST \(url) answered \(result.status): \(result.bodyString)") }
    }
}
