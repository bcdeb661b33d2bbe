import Foundation
import TestSupport
import Testing

/// A route's `budget` (CONTRACT.md "Programs in a sandbox", "Budgets"), driven by curl against the
/// real binary with two event loops: requests beyond `max_concurrent` or the rate get 429
/// `rate_limited` with `Retry-After` and never reach the upstream, which counts what it got.
@Suite(.tags(.endToEnd), .timeLimit(.minutes(20))) struct SandboxBudgetTests {
    /// The echo upstream and a tokenproxy whose one route has `budget` (flow YAML), two workers and
    /// an admin listener; `upstream`: another upstream URL (e.g. a port nobody listens on).
    static func world(budget: String, upstream: String? = nil) throws -> (upstream: PythonServer, proxy: ProxyProcess) {
        let echo = try PythonServer("echo_upstream")
        let config = staticTokenConfig(
            upstream: upstream ?? echo.baseURL + "/base", workers: 2, drainTimeout: "2s", admin: true, logLevel: "debug", more: "budget: \(budget)")
        return (echo, try ProxyProcess(config: config, environment: ["E2E_TOKEN": e2eToken]))
    }

    /// The value of one sample of /metrics, by its whole name and labels as the text writes them.
    static func metric(_ proxy: ProxyProcess, _ sample: String) throws -> Int? {
        let text = try curl([proxy.adminURL! + "/metrics"]).bodyString
        for line in text.split(separator: "\n") where line.hasPrefix(sample + " ") {
            return Int(line.dropFirst(sample.count + 1))
        }
        return nil
    }

    static func slowStats(_ upstream: PythonServer) throws -> (slowHeads: Int, maxInFlight: Int) {
        let stats = try #require(try curl([upstream.baseURL + "/slow-stats"]).json)
        return (stats["slow_heads"] as? Int ?? -1, stats["max_in_flight"] as? Int ?? -1)
    }

    /// `count` requests to `path` at once from one curl (`--parallel`, each on its connection): each
    /// answer's status and `Retry-After` ("" when none).
    static func parallel(_ proxy: ProxyProcess, path: String, count: Int) throws -> [(status: Int, retryAfter: String)] {
        let folder = try TempDir(prefix: "budget-parallel")
        let lines = (0..<count).map { "url = \"\(proxy.baseURL)\(path)&n=\($0)\"\noutput = \"/dev/null\"" }
        let file = try folder.write("urls.conf", lines.joined(separator: "\n") + "\n")
        let run = try runCommand(
            "curl",
            arguments: [
                "--silent", "--parallel", "--parallel-immediate", "--parallel-max", String(count), "--max-time", "120", "--config", file,
                "--write-out", "%{http_code} %header{retry-after}\\n",
            ], timeout: 180)
        return run.stdout.split(separator: "\n").map { line in
            let parts = line.split(separator: " ", maxSplits: 1)
            return (Int(parts.first ?? "") ?? 0, parts.count > 1 ? String(parts[1]) : "")
        }
    }

    @Test func fiftyAtOnceAgainstMaxConcurrentEightLetEightThroughAndRefuseTheRest() throws {
        let (upstream, proxy) = try Self.world(budget: "{max_concurrent: 8}")
        let answers = try Self.parallel(proxy, path: "/slow-head?ms=6000", count: 50)
        #expect(answers.count == 50, "\(answers)")
        let passed = answers.filter { $0.status == 200 }
        let refused = answers.filter { $0.status == 429 }
        #expect(passed.count + refused.count == 50, "\(answers)")
        #expect(passed.count >= 8 && !refused.isEmpty, "\(answers)")
        #expect(refused.allSatisfy { $0.retryAfter == "1" }, "\(refused)")
        // Counted at the upstream: never more than 8 at once, and nothing of the refused.
        let stats = try Self.slowStats(upstream)
        #expect(stats.maxInFlight >= 1 && stats.maxInFlight <= 8, "\(stats)")
        #expect(stats.slowHeads == passed.count, "\(stats)")
        let sample = #"tokenproxy_budget_refusals_total{route="default",caller="default",reason="concurrency"}"#
        #expect(try Self.metric(proxy, sample) == refused.count)
        #expect(try Self.metric(proxy, #"tokenproxy_budget_refusals_total{route="default",caller="default",reason="rate"}"#) == 0)
        // Every place was given back: eight at once pass again.
        let again = try Self.parallel(proxy, path: "/slow-head?ms=100", count: 8)
        #expect(again.map(\.status) == Array(repeating: 200, count: 8), "\(again)")
        try proxy.stopAndExpectCleanExit()
        upstream.stop()
    }

    @Test func theRefusalIsTheContractsErrorAndNothingGoesUpstream() throws {
        let (upstream, proxy) = try Self.world(budget: "{max_concurrent: 1}")
        let slow = BackgroundRequests(1) { _ in try curl([proxy.baseURL + "/slow-head?ms=5000"], timeout: 60).status }
        // Once the slow one is at the upstream, one more is refused at once.
        #expect(try within(30) { try Self.slowStats(upstream).slowHeads == 1 })
        let refused = try curl([proxy.baseURL + "/refused-path"])
        expectProxyError(refused, status: 429, code: "rate_limited")
        #expect(refused.header("Retry-After") == "1")
        #expect(slow.wait().map { try? $0.get() } == [200])
        let count = try #require(try curl([upstream.baseURL + "/count?path=/base/refused-path"]).json)
        #expect(count["count"] as? Int == 0, "the refused request reached the upstream")
        try proxy.stopAndExpectCleanExit()
        upstream.stop()
    }

    @Test func aRateRefusesBeyondItsBurstWithTheSecondsUntilTheNextToken() throws {
        let (upstream, proxy) = try Self.world(budget: "{rate: 1/m, burst: 2}")
        #expect(try curl([proxy.baseURL + "/one"]).status == 200)
        #expect(try curl([proxy.baseURL + "/two"]).status == 200)
        let third = try curl([proxy.baseURL + "/three"])
        expectProxyError(third, status: 429, code: "rate_limited")
        let retryAfter = try #require(third.header("Retry-After").flatMap { Int($0) }, "\(third.headers)")
        #expect((1...60).contains(retryAfter))
        #expect(try Self.metric(proxy, #"tokenproxy_budget_refusals_total{route="default",caller="default",reason="rate"}"#) == 1)
        let count = try #require(try curl([upstream.baseURL + "/count?path=/base/three"]).json)
        #expect(count["count"] as? Int == 0)
        try proxy.stopAndExpectCleanExit()
        upstream.stop()
    }

    @Test func anUpstreams429And503GoBackAsTheyCame() throws {
        let (upstream, proxy) = try Self.world(budget: "{max_concurrent: 4, rate: 100/s}")
        for status in [429, 503] {
            let r = try curl([proxy.baseURL + "/status/\(status)?retry_after=7"])
            #expect(r.status == status)
            #expect(r.header("Retry-After") == "7")
            #expect(r.json?["status"] as? Int == status, "the upstream's own body: \(r.bodyString)")
        }
        let counts = try #require(try curl([upstream.baseURL + "/count"]).json?["counts"] as? [String: Int])
        #expect(counts["/base/status/429"] == 1 && counts["/base/status/503"] == 1, "never retried: \(counts)")
        #expect(try Self.metric(proxy, #"tokenproxy_budget_refusals_total{route="default",caller="default",reason="concurrency"}"#) == 0)
        try proxy.stopAndExpectCleanExit()
        upstream.stop()
    }

    /// A place is given back however the request ends: the upstream unreachable (502), or the
    /// client gone before the answer.
    @Test func placesComeBackAfterUpstreamFailuresAndClientsThatLeave() throws {
        let (dead, proxy) = try Self.world(budget: "{max_concurrent: 1}", upstream: "http://127.0.0.1:9/never")
        for _ in 0..<3 {
            expectProxyError(try curl([proxy.baseURL + "/x"]), status: 502, code: "bad_gateway")
        }
        try proxy.stopAndExpectCleanExit()
        dead.stop()

        let (upstream, left) = try Self.world(budget: "{max_concurrent: 2}")
        // Two clients give up after a second, while the upstream takes three.
        for _ in 0..<2 {
            let run = try runCommand("curl", arguments: ["--silent", "--max-time", "1", left.baseURL + "/slow-head?ms=3000"], timeout: 30)
            #expect(run.status == 28, "curl timed out: \(run.output)")
        }
        // Their places come back (at the latest when the upstream answers): two pass at once again,
        // and a third is refused, so no place was given back twice.
        var answers: [Int] = []
        let deadline = Date().addingTimeInterval(60)
        repeat {
            answers = try Self.parallel(left, path: "/slow-head?ms=2000", count: 3).map(\.status).sorted()
        } while answers != [200, 200, 429] && Date() < deadline
        #expect(answers == [200, 200, 429])
        try left.stopAndExpectCleanExit()
        upstream.stop()
    }

    /// A request retried after an upstream 401 holds one place and took one token: with
    /// `max_concurrent: 1` its retry is not refused, and a burst of 2 serves exactly two requests.
    @Test func aRetryAfter401CountsOnce() throws {
        let idp = try OAuthServer.start()
        let upstream = try PythonServer("refusing_upstream")
        let proxy = try ProxyProcess(
            config: """
                \(routesProxyTop)
                admin: {listen: "127.0.0.1:0"}
                routes:
                  - name: api
                    upstream: \(upstream.baseURL)
                    credentials: {type: oauth2_client_credentials, token_url: "\(idp.tokenURL)", client_id: app, client_secret_env: BUDGET_SECRET}
                    budget: {max_concurrent: 1, rate: 1/m, burst: 2}
                """, environment: ["BUDGET_SECRET": "secret"])
        #expect(try curl([proxy.baseURL + "/first"]).status == 200)
        _ = try curl(["-X", "POST", upstream.baseURL + "/test/refuse?count=1&status=401"])
        let retried = try curl([proxy.baseURL + "/second"])
        #expect(retried.status == 200, "\(retried.bodyString)")
        #expect(try idp.stats().count(OAuthGrant.clientCredentials) == 2, "the 401 cost one refresh and one retry")
        expectProxyError(try curl([proxy.baseURL + "/third"]), status: 429, code: "rate_limited")
        #expect(try Self.metric(proxy, #"tokenproxy_budget_refusals_total{route="api",caller="default",reason="rate"}"#) == 1)
        #expect(try Self.metric(proxy, #"tokenproxy_budget_refusals_total{route="api",caller="default",reason="concurrency"}"#) == 0)
        try proxy.stopAndExpectCleanExit()
        upstream.stop()
    }
}
