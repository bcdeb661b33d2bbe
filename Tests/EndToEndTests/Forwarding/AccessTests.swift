import Foundation
import TestSupport
import Testing

/// CONTRACT.md points 7 and 9: the token goes to the upstream's origin only, and browsers cannot
/// be used against it.
@Suite(.tags(.endToEnd), .timeLimit(.minutes(35))) struct AccessTests {
    /// Another host, or the upstream's host on another port.
    @Test(arguments: [("http://other.example/steal", "other.example"), ("http://127.0.0.1:1/steal", "127.0.0.1:1")])
    func absoluteFormForAnotherOriginIsForbiddenTarget(target: String, host: String) throws {
        let f = try Fixture()
        expectProxyError(try f.exchange(rawRequest("GET", target, host: host)).response, status: 403, code: "forbidden_target")
        try f.finish()
    }

    @Test func foreignHostHeaderIsForbiddenHost() throws {
        let f = try Fixture()
        let r = try curl(["-H", "Host: evil.example", f.url("/rebind")])
        expectProxyError(r, status: 403, code: "forbidden_host")
        let count = try curl(["\(f.upstream.baseURL)/count?path=/base/rebind"])
        #expect(count.json?["count"] as? Int == 0)
        try f.finish()
    }

    @Test func loopbackHostsWithAnyPortAreAccepted() throws {
        let f = try Fixture()
        for host in ["localhost:\(f.proxy.port)", "127.0.0.1", "localhost", "LOCALHOST:1234", "[::1]:\(f.proxy.port)"] {
            let r = try curl(["-H", "Host: \(host)", f.url("/ok")])
            #expect(r.status == 200, "Host: \(host) → \(r.status) \(r.bodyString)")
        }
        try f.finish()
    }

    @Test func foreignOriginIsForbiddenOrigin() throws {
        let f = try Fixture()
        let r = try curl(["-H", "Origin: https://evil.example", f.url("/cors")])
        expectProxyError(r, status: 403, code: "forbidden_origin")
        try f.finish()
    }

    @Test func connectWinsOverAForeignHost() throws {
        // Point 10: CONNECT (405) comes before forbidden_host.
        let f = try Fixture()
        let response = try f.exchange("CONNECT evil.example:443 HTTP/1.1\r\nHost: evil.example:443\r\n\r\n").response
        expectProxyError(response, status: 405, code: "method_not_allowed")
        try f.finish()
    }

    @Test func forbiddenHostWinsOverForbiddenOrigin() throws {
        let f = try Fixture()
        let r = try curl(["-H", "Host: evil.example", "-H", "Origin: https://evil.example", f.url("/both")])
        expectProxyError(r, status: 403, code: "forbidden_host")
        try f.finish()
    }
}
