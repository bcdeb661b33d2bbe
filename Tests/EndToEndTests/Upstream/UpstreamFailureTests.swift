import Foundation
import TestSupport
import Testing

/// The proxy's own answers when the upstream fails (CONTRACT.md, errors table).
@Suite(.tags(.endToEnd), .timeLimit(.minutes(35))) struct UpstreamFailureTests {
    @Test func unreachableUpstreamIsBadGateway() throws {
        // A port that was just free: start a server, note its port, stop it.
        let gone = try PythonServer("echo_upstream")
        let deadURL = gone.baseURL + "/base"
        gone.stop()
        let f = try Fixture(upstreamURL: deadURL)
        let r = try curl([f.url("/anything")])
        expectProxyError(r, status: 502, code: "bad_gateway")
        // The proxy keeps serving afterwards.
        let again = try curl([f.url("/anything")])
        #expect(again.status == 502)
        try f.finish()
    }

    @Test func upstreamAnsweringGarbageIsBadGateway() throws {
        let f = try Fixture()
        let r = try curl([f.url("/garbage")])
        expectProxyError(r, status: 502, code: "bad_gateway")
        try f.finish()
    }

    @Test func upstreamClosingWithoutAnswerIsBadGateway() throws {
        let f = try Fixture()
        let r = try curl([f.url("/close")])
        expectProxyError(r, status: 502, code: "bad_gateway")
        try f.finish()
    }

    @Test func slowUpstreamHeadIsUpstreamTimeout() throws {
        let f = try Fixture(extra: "limits:\n  upstream_timeout: 1s")
        let started = Date()
        let r = try curl([f.url("/slow-head?ms=4000")])
        let elapsed = Date().timeIntervalSince(started)
        expectProxyError(r, status: 504, code: "upstream_timeout")
        #expect(elapsed < 3.5, "answered after \(elapsed) s")
        // A fast request still works.
        #expect(try curl([f.url("/slow-head?ms=10")]).status == 200)
        try f.finish()
    }

    @Test func upstream401WithAStaticTokenGoesBackToTheClient() throws {
        // The retry happens once; the second 401 is passed on as it came.
        let f = try Fixture()
        let r = try curl([f.url("/auth?token=not-the-token")])
        #expect(r.status == 401)
        #expect(r.json?["auth"] as? String == "refused")
        let ok = try curl([f.url("/auth?token=\(e2eToken)")])
        #expect(ok.status == 200)
        try f.finish()
    }
}
