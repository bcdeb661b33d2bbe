import Foundation
import TestSupport
import Testing

/// The admin listener keeps the proxy listener's rules (issue 29, point 3): a web page cannot make a
/// browser call it across sites (no `Origin` is accepted) nor read it after DNS rebinding (`Host` must
/// be a loopback name or the admin address), and forced refreshes back off as failed ones do, counted
/// at a real OAuth server.
@Suite(.tags(.endToEnd), .timeLimit(.minutes(35))) struct AdminListenerTests {
    final class World: Sendable {
        let idp: OAuthServer
        let proxy: ProxyProcess
        let admin: String
        let adminPort: Int

        /// `accessTTL`: the identity provider's token lifetime (the proxy refreshes by itself at half of it).
        init(accessTTL: Int = 20) throws {
            var options = OAuthServer.Options()
            options.accessTTL = accessTTL
            idp = try OAuthServer.start(options)
            proxy = try ProxyProcess(
                config: """
                    listen: 127.0.0.1:0
                    workers: 1
                    admin:
                      listen: 127.0.0.1:0
                    upstream: http://127.0.0.1:9
                    credentials:
                      type: oauth2_client_credentials
                      token_url: \(idp.tokenURL)
                      client_id: app
                      client_secret_env: ADMIN_TEST_SECRET
                    """, environment: ["ADMIN_TEST_SECRET": "secret"])
            admin = try #require(proxy.adminURL)
            adminPort = try #require(proxy.adminPort)
        }

        func tokenCalls() throws -> Int { try idp.stats().count(OAuthGrant.clientCredentials) }

        func finish() throws {
            try proxy.stopAndExpectCleanExit()
            idp.stop()
        }
    }

    @Test(arguments: ["/healthz", "/readyz", "/metrics"])
    func aHostThatIsNotLoopbackOrTheAdminAddressIsForbidden(path: String) throws {
        let w = try World()
        for host in ["attacker.example", "attacker.example:\(w.adminPort)", "10.0.0.1:\(w.adminPort)"] {
            expectProxyError(try curl(["-H", "Host: \(host)", w.admin + path]), status: 403, code: "forbidden_host")
        }
        // (/readyz is 503 until the first token is in: a busy machine may still be fetching it.)
        #expect(try eventually { try curl([w.admin + "/readyz"]).status == 200 })
        for host in ["localhost:\(w.adminPort)", "127.0.0.1:\(w.adminPort)", "LOCALHOST", "[::1]:\(w.adminPort)"] {
            #expect(try curl(["-H", "Host: \(host)", w.admin + path]).status == 200, "Host: \(host)")
        }
        try w.finish()
    }

    @Test(arguments: ["/refresh", "/reload", "/metrics"])
    func aRequestWithAnOriginIsForbidden(path: String) throws {
        let w = try World()
        #expect(try eventually { try w.tokenCalls() == 1 })
        let method = path == "/metrics" ? "GET" : "POST"
        for origin in ["https://attacker.example", "null", "http://localhost:\(w.adminPort)"] {
            expectProxyError(try curl(["-X", method, "-H", "Origin: \(origin)", w.admin + path]), status: 403, code: "forbidden_origin")
        }
        // Nothing reached the identity provider: still only the start-up fetch.
        #expect(try w.tokenCalls() == 1)
        try w.finish()
    }

    /// 20 forced refreshes at once cost a handful of token requests at most, not 20: the others join
    /// a fetch in flight or are answered 202 "refresh deferred" with when to try again (Retry-After),
    /// and one is admitted again once that time has passed.
    @Test func forcedRefreshesBackOffAsFailedOnesDo() throws {
        let w = try World()
        #expect(try eventually { try w.tokenCalls() == 1 })
        // All at once, as a page's script would send them (and so that a busy machine does not
        // spread them over the back-off's steps).
        let admin = w.admin
        let answers = try concurrently(20) { _ in try curl(["-X", "POST", admin + "/refresh"]) }.map { try $0.get() }
        #expect(answers.allSatisfy { $0.status == 202 }, "\(answers.map(\.status))")
        let started = answers.filter { $0.json?["status"] as? String == "refresh started" }.count
        let limited = answers.filter { $0.json?["status"] as? String == "refresh deferred" }
        #expect(started + limited.count == 20, "\(answers.map(\.bodyString))")
        // Requests that arrive while an admitted refresh is still fetching join it ("refresh
        // started", no call of their own): on a slow box that may be most of them. What the back-off
        // guarantees is the number of token requests.
        #expect(started >= 1)
        for answer in limited {
            #expect(Int(answer.header("Retry-After") ?? "") ?? 0 >= 1)
            #expect(answer.json?["retry_after"] as? Int == Int(answer.header("Retry-After") ?? ""))
        }
        // At most one token request per admitted refresh (one admitted while a fetch was still in
        // flight joins it instead).
        #expect(try eventually { try w.tokenCalls() >= 2 })
        let afterBurst = try w.tokenCalls()
        // (and the deferred ones make one more, when the back-off allows).
        #expect(afterBurst <= 1 + started + (limited.isEmpty ? 0 : 1), "\(afterBurst) token requests for \(started) admitted refreshes")
        #expect(afterBurst - 1 <= 6, "1, 2, 4 … s apart: a handful at most, however slow the box: \(afterBurst - 1) token requests")
        // Asked again at once, a forced refresh is deferred, saying when the next may start.
        var deferred: CurlResult?
        #expect(
            try within(60) {
                let answer = try curl(["-X", "POST", admin + "/refresh"])
                if answer.json?["status"] as? String == "refresh deferred" { deferred = answer }
                return deferred != nil
            })
        let retryAfter = Int(deferred?.header("Retry-After") ?? "") ?? 0
        #expect(retryAfter >= 1)
        #expect(deferred?.json?["retry_after"] as? Int == retryAfter)
        let afterDeferred = try w.tokenCalls()
        // Once Retry-After has passed, the deferred one is done without being asked again.
        #expect(try within(70) { try w.tokenCalls() > afterDeferred })
        try w.finish()
    }

    /// Issue 39: SIGHUP and, half a second later, `POST /refresh`: the second was answered 202
    /// "refresh deferred" and then dropped, so no refresh happened at all. A deferred forced refresh
    /// is done once when the back-off allows, however many were deferred meanwhile.
    @Test func aDeferredForcedRefreshIsDoneOnceWhenTheBackOffAllows() throws {
        // Tokens that last an hour: no refresh of the proxy's own comes between.
        let w = try World(accessTTL: 3600)
        let admin = w.admin
        // Ready: the start-up fetch has ended (one still in flight would serve the SIGHUP).
        #expect(try eventually { try curl([admin + "/readyz"]).status == 200 })
        #expect(try w.tokenCalls() == 1)
        w.proxy.terminate(signal: SIGHUP)
        #expect(try eventually { try w.tokenCalls() == 2 })
        // Asked until one is deferred (on a slow box an ask may come after the back-off: admitted).
        var first: CurlResult?
        var statuses: [Int] = []
        #expect(
            try within(60) {
                let answer = try curl(["-X", "POST", admin + "/refresh"])
                statuses.append(answer.status)
                if answer.json?["status"] as? String == "refresh deferred" { first = answer }
                return first != nil
            })
        #expect(statuses.allSatisfy { $0 == 202 }, "\(statuses)")
        // Deferred means no fetch was in flight: every call so far has been counted.
        let before = try w.tokenCalls()
        let more = try concurrently(5) { _ in try curl(["-X", "POST", admin + "/refresh"]) }.map { try $0.get() }
        #expect(more.allSatisfy { $0.status == 202 }, "\(more.map(\.status))")
        // Every ask was answered before the deferred refresh ended: each was deferred into it or
        // joined it. (On a slow box one may come after it: it is then a forced refresh of its own.)
        let allAskedBeforeIt = try w.tokenCalls() == before
        #expect(try within(90) { try w.tokenCalls() > before }, "the deferred refresh was never done")
        // Past the longest wait any answer named, nothing else comes.
        let longest = ([first].compactMap { $0 } + more).compactMap { Int($0.header("Retry-After") ?? "") }.max() ?? 1
        Thread.sleep(forTimeInterval: Double(longest) + 2)
        let refreshes = try w.tokenCalls() - before
        #expect(allAskedBeforeIt ? refreshes == 1 : refreshes >= 1 && refreshes <= 1 + more.count, "\(refreshes) refreshes for the deferred asks")
        try w.finish()
    }
}
