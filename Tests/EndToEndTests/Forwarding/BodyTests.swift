import Foundation
import TestSupport
import Testing

/// CONTRACT.md point 8: bodies stream both ways, whole and byte-exact.
@Suite(.tags(.endToEnd), .timeLimit(.minutes(35))) struct BodyTests {
    @Test func postBodyWithContentLengthArrivesByteExact() throws {
        let f = try Fixture()
        let body = testBytes(count: 300 * 1024 + 7)
        let file = try f.proxy.directory.write("body.bin", Data(body))
        let r = try curl(["-X", "POST", "-H", "Content-Type: application/octet-stream", "--data-binary", "@\(file)", f.url("/upload")])
        #expect(r.status == 200, "\(r.bodyString)")
        let echo = try Echo(r.body)
        #expect(echo.method == "POST")
        #expect(echo.body_len == body.count)
        #expect(echo.body_sha256 == (try sha256Hex(body)))
        #expect(echo.values("Content-Length") == [String(body.count)])
        try f.finish()
    }

    @Test func chunkedPostBodyArrivesByteExact() throws {
        let f = try Fixture()
        let body = testBytes(count: 200 * 1024 + 3, seed: 7)
        let client = try f.connect()
        let head = rawRequest("POST", "/chunked", host: f.host, headers: [("Transfer-Encoding", "chunked"), ("Content-Type", "application/octet-stream")])
        try client.send(head)
        // Sent in several writes, with chunks of odd sizes.
        let encoded = chunked(body, chunkSize: 7001)
        var offset = 0
        while offset < encoded.count {
            let n = min(50_000, encoded.count - offset)
            try client.send(Array(encoded[offset..<(offset + n)]))
            offset += n
        }
        let response = try client.readResponse(timeout: 20)
        #expect(response.status == 200, "\(response)")
        let echo = try Echo(response.body)
        #expect(echo.body_len == body.count)
        #expect(echo.body_sha256 == (try sha256Hex(body)))
        try f.finish()
    }

    @Test func smallJSONBodyArrivesAsSent() throws {
        let f = try Fixture()
        let json = #"{"name":"ä ö","n":1}"#
        let r = try curl(["-X", "PUT", "-H", "Content-Type: application/json", "--data-binary", json, f.url("/items/1")])
        let echo = try Echo(r.body)
        #expect(echo.method == "PUT")
        #expect(echo.body == json)
        #expect(echo.values("Content-Type") == ["application/json"])
        try f.finish()
    }

    @Test func oneMebibyteDownloadArrivesWhole() throws {
        let f = try Fixture()
        let size = 1024 * 1024
        let r = try curl([f.url("/big?bytes=\(size)")], timeout: 60)
        expectEchoPattern(r, count: size)
        try f.finish()
    }

    @Test func chunkedDownloadArrivesWhole() throws {
        let f = try Fixture()
        let size = 1024 * 1024 + 17
        let response = try f.exchange(rawRequest("GET", "/stream?bytes=\(size)", host: f.host), timeout: 60).response
        expectEchoPattern(response, count: size)
        try f.finish()
    }

    @Test func headRequestGetsHeadersWithoutBody() throws {
        let f = try Fixture()
        let (client, response) = try f.exchange(rawRequest("HEAD", "/big?bytes=1000", host: f.host), method: "HEAD")
        #expect(response.status == 200)
        #expect(response.header("Content-Length") == "1000")
        // The next request on the same connection still works: no body bytes were sent.
        try client.send(rawRequest("GET", "/after-head", host: f.host))
        let next = try client.readResponse()
        #expect(next.status == 200)
        #expect(try Echo(next.body).path == "/base/after-head")
        try f.finish()
    }
}
