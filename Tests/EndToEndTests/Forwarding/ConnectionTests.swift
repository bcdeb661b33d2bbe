import Foundation
import TestSupport
import Testing

/// Keep-alive, pipelining and framing errors (RFC 9112; CONTRACT.md point 8 and the error table).
@Suite(.tags(.endToEnd), .timeLimit(.minutes(35))) struct ConnectionTests {
    @Test func twoRequestsShareOneKeepAliveConnection() throws {
        let f = try Fixture()
        let (client, first) = try f.exchange(rawRequest("GET", "/one", host: f.host))
        try client.send(rawRequest("POST", "/two", host: f.host, body: Array("payload".utf8)))
        let second = try client.readResponse()
        #expect(first.status == 200)
        #expect(second.status == 200)
        #expect(try Echo(first.body).path == "/base/one")
        let echo2 = try Echo(second.body)
        #expect(echo2.path == "/base/two")
        #expect(echo2.body == "payload")
        #expect(!client.peerClosed)
        try f.finish()
    }

    @Test func pipelinedRequestsAreAnsweredInOrder() throws {
        let f = try Fixture()
        let client = try f.connect()
        let both =
            rawRequest("GET", "/slow-head?ms=300&n=1", host: f.host)
            + rawRequest("POST", "/second", host: f.host, body: Array("two".utf8))
            + rawRequest("GET", "/third", host: f.host)
        try client.send(both)
        let first = try client.readResponse()
        let second = try client.readResponse()
        let third = try client.readResponse()
        #expect(first.status == 200)
        #expect(first.json?["slept_ms"] as? Int == 300)
        #expect(try Echo(second.body).path == "/base/second")
        #expect(try Echo(second.body).body == "two")
        #expect(try Echo(third.body).path == "/base/third")
        try f.finish()
    }

    @Test func contentLengthWithTransferEncodingIsRefusedAndClosed() throws {
        let f = try Fixture()
        let client = try f.connect()
        // RFC 9112 §6.1: a request with both is a smuggling attempt.
        try client.send(
            "POST /smuggle HTTP/1.1\r\nHost: \(f.host)\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n")
        let response = try client.readResponse()
        expectProxyError(response, status: 400, code: "bad_request")
        #expect(client.waitForClose(timeout: 5), "the connection stayed open after a 400")
        let count = try curl(["\(f.upstream.baseURL)/count?path=/base/smuggle"])
        #expect(count.json?["count"] as? Int == 0, "the request reached the upstream")
        try f.finish()
    }

    /// Two Content-Length fields that differ (RFC 9112 §6.3), and a request line that is not HTTP.
    @Test(arguments: ["POST /x HTTP/1.1\r\nHost: HOST\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabcd", "THIS IS NOT HTTP\r\n\r\n"])
    func aMalformedRequestIsABadRequestAndClosed(request: String) throws {
        let f = try Fixture()
        let (client, response) = try f.exchange(request.replacingOccurrences(of: "HOST", with: f.host))
        expectProxyError(response, status: 400, code: "bad_request")
        #expect(client.waitForClose(timeout: 5))
        try f.finish()
    }

    @Test func oversizedRequestHeadGets431() throws {
        let f = try Fixture(extra: "limits:\n  max_header_bytes: 8KiB")
        let (client, response) = try f.exchange(rawRequest("GET", "/big-head", host: f.host, headers: [("X-Filler", String(repeating: "a", count: 16 * 1024))]))
        expectProxyError(response, status: 431, code: "headers_too_large")
        #expect(client.waitForClose(timeout: 5))
        try f.finish()
    }

    @Test func defaultHeaderLimitRefusesAHugeHead() throws {
        let f = try Fixture()
        let client = try f.connect()
        var headers: [(String, String)] = []
        for i in 0..<20 { headers.append(("X-Filler-\(i)", String(repeating: "b", count: 4000))) }
        try client.send(rawRequest("GET", "/huge", host: f.host, headers: headers))
        let response = try client.readResponse()
        expectProxyError(response, status: 431, code: "headers_too_large")
        try f.finish()
    }

    @Test func connectIsRefusedWith405AndAllow() throws {
        let f = try Fixture()
        let response = try f.exchange("CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n").response
        expectProxyError(response, status: 405, code: "method_not_allowed")
        let allow = try #require(response.header("Allow"))
        #expect(!allow.uppercased().contains("CONNECT"))
        #expect(allow.uppercased().contains("GET"))
        try f.finish()
    }
}
