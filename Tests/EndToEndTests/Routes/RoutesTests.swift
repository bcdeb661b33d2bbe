import Foundation
import Synchronization
import TestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// CONTRACT.md "Several APIs in one process: routes", end to end: the real binary, two real OAuth
/// servers and two protected APIs, each route counted at its own identity provider.
@Suite("Routes, end to end", .serialized, .tags(.endToEnd), .timeLimit(.minutes(40)))
struct RoutesTests {
    /// Two worlds (identity provider + API each) and one proxy file with the routes `a` (path
    /// prefix /a/) and `b` (host b.example.test and path prefix /b/), plus `extra` routes.
    final class TwoAPIs: Sendable {
        let a: Lifecycle
        let b: Lifecycle
        var dir: TempDir { a.dir }

        init(ttl: String = "3600") throws {
            a = try Lifecycle(idpArguments: ["--access-ttl", ttl])
            b = try Lifecycle(idpArguments: ["--access-ttl", ttl])
        }

        var environment: [String: String] { ["A_SECRET": a.clientSecret, "B_SECRET": b.clientSecret] }

        func config(margin: String = "5s", extraRoutes: String = "", top: String = "") -> String {
            """
            listen: 127.0.0.1:0
            workers: 2
            drain_timeout: 2s
            admin:
              listen: 127.0.0.1:0
            store:
              path: ./state/tokens.json
            limits:
              refresh_wait: 60s
            \(top)
            routes:
              - name: a
                match: {path_prefix: /a/}
                upstream: \(a.api.baseURL)
                credentials:
                  type: oauth2_refresh
                  token_url: \(a.idp.baseURL)/oauth/token
                  client_id: app
                  client_secret_env: A_SECRET
                  refresh_margin: \(margin)
              - name: b
                match: {host: b.example.test}
                upstream: \(b.api.baseURL)
                credentials:
                  type: oauth2_refresh
                  token_url: \(b.idp.baseURL)/oauth/token
                  client_id: app
                  client_secret_env: B_SECRET
                  refresh_margin: \(margin)
            \(extraRoutes)
            """
        }

        func write(_ yaml: String, as name: String = "tokenproxy.yaml") throws -> String { try dir.write(name, yaml) }

        func command(_ arguments: [String], stdin: String? = nil, file: String = "tokenproxy.yaml") throws -> CommandResult {
            try ProxyProcess.run(args: [arguments[0], "--config", dir.file(file)] + arguments.dropFirst(), env: environment, stdin: stdin)
        }

        func loginBoth() throws {
            let loginA = try command(["login", "--route", "a", "--username", "alice", "--password-stdin"], stdin: a.password + "\n")
            #expect(loginA.status == 0, "\(loginA.stderr)")
            let loginB = try command(["login", "--route", "b", "--username", "alice", "--password-stdin"], stdin: b.password + "\n")
            #expect(loginB.status == 0, "\(loginB.stderr)")
        }

        func serve(_ yaml: String) throws -> ProxyProcess {
            try ProxyProcess(config: yaml, directory: dir, environment: environment)
        }

        /// Rewrites the route's stored session so that its access token expired a minute ago (an
        /// opaque token: a JWT's own `exp` would count instead).
        func expireStoredToken(_ route: String) throws {
            let path = dir.file("state/\(route).json")
            let data = try #require(FileManager.default.contents(atPath: path))
            var json = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
            json["expires_at"] = Date().timeIntervalSince1970 - 60
            json["access_token"] = "expired-opaque-token"
            try JSONSerialization.data(withJSONObject: json).write(to: URL(fileURLWithPath: path))
        }

        func expiresAt(_ route: String) -> Double? {
            guard let data = FileManager.default.contents(atPath: dir.file("state/\(route).json")),
                let json = (try? JSONSerialization.jsonObject(with: data)) as? [String: Any]
            else { return nil }
            return json["expires_at"] as? Double
        }

        func stop() {
            a.stop()
            b.stop()
        }
    }

    /// curl through the proxy (`-x`, or `http_proxy` in its environment): status and body, and the
    /// status the proxy gave a CONNECT (curl reports 0 as `status` when its tunnel is refused).
    static func proxiedCurl(
        _ url: String, arguments: [String] = [], environment: [String: String] = [:]
    ) throws -> (status: Int, body: String, connectStatus: Int) {
        let dir = try TempDir(prefix: "curl-proxied")
        defer { dir.remove() }
        var env = ProcessInfo.processInfo.environment
        for key in ["http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "no_proxy", "NO_PROXY", "all_proxy", "ALL_PROXY"] { env[key] = nil }
        env.merge(environment) { $1 }
        let result = try runCommand(
            "curl",
            arguments: ["--silent", "--max-time", "30", "--output", dir.file("body"), "--write-out", "%{http_code} %{http_connect}"] + arguments + [url],
            environment: env, timeout: 40)
        let body = (try? String(contentsOfFile: dir.file("body"), encoding: .utf8)) ?? ""
        let codes = result.stdout.split(separator: " ").map { Int($0.trimmingCharacters(in: .whitespacesAndNewlines)) ?? 0 }
        return (codes.first ?? 0, body, codes.count > 1 ? codes[1] : 0)
    }

    /// A request to route b: by its host name.
    static func sendB(_ proxy: ProxyProcess, path: String = "/data") throws -> HTTPResponse {
        let client = try RawHTTPClient(port: proxy.port, timeout: 60)
        defer { client.close() }
        try client.send(rawRequest("GET", path, host: "b.example.test", headers: [("Connection", "close")]))
        return try client.readResponse(method: "GET")
    }

    @Test(
        "each route has its own session: 50 requests on each of two expired tokens make one refresh at each provider, and a stalled provider delays only its route"
    )
    func twoProvidersOneRefreshEachAndNoCrossDelay() throws {
        let apis = try TwoAPIs()
        defer { apis.stop() }
        _ = try apis.write(apis.config())
        try apis.loginBoth()
        #expect(try apis.command(["login", "--username", "alice", "--password-stdin"], stdin: "x\n").status == 2, "two sessions: --route is needed")
        // Both stored tokens expired (the providers' tokens last an hour, so no later refresh is due).
        for route in ["a", "b"] { try apis.expireStoredToken(route) }
        // Provider a holds its next refresh: requests to a wait for it.
        try apis.a.idp("/test/hold?count=1&when=before")
        let proxy = try apis.serve(apis.config())

        let aRequests = BackgroundRequests(50) { _ in try send(proxy, "GET", "/a/data", timeout: 60) }
        #expect(within(20) { (try? apis.a.idpStats()["held_now"] as? Int) == 1 }, "provider a holds the refresh")

        // Meanwhile route b: 50 requests on its expired token, all served while a is still held.
        let bResults = concurrently(50) { _ in try Self.sendB(proxy) }
        #expect(bResults.map { (try? $0.get().status) ?? -1 } == Array(repeating: 200, count: 50))
        #expect(try apis.a.idpStats()["held_now"] as? Int == 1, "b was served while a's provider still held its refresh")
        let statsB = try apis.b.idpStats()
        #expect(try apis.b.idpCalls("refresh_token") == 1, "\(statsB)")

        try apis.a.idp("/test/release")
        let aStatuses = aRequests.wait().map { (try? $0.get().status) ?? -1 }
        #expect(aStatuses == Array(repeating: 200, count: 50), "\(aStatuses)")
        let statsA = try apis.a.idpStats()
        #expect(try apis.a.idpCalls("refresh_token") == 1, "\(statsA)")
        #expect(try apis.a.apiStats()["unauthorized"] as? Int == 0)
        #expect(try apis.b.apiStats()["unauthorized"] as? Int == 0)

        // The metrics name each route.
        let metrics = try curl([proxy.adminURL! + "/metrics"]).bodyString
        #expect(
            metrics.contains(#"tokenproxy_refreshes_total{route="a",source="oauth2_refresh",outcome="success"} 1"#),
            "\(metrics.split(separator: "\n").filter { $0.contains("refreshes_total") })")
        #expect(metrics.contains(#"tokenproxy_refreshes_total{route="b",source="oauth2_refresh",outcome="success"} 1"#))
        #expect(metrics.contains(#"tokenproxy_requests_total{route="a",code="200"} 50"#))
        #expect(metrics.contains(#"tokenproxy_requests_total{route="b",code="200"} 50"#))
        try proxy.stopAndExpectCleanExit()
    }

    @Test("http_proxy clients reach a host route; unknown hosts, paths and CONNECT are refused; token errors name the route")
    func httpProxyAndRefusals() throws {
        let apis = try TwoAPIs()
        defer { apis.stop() }
        let yaml = apis.config(
            extraRoutes: """
                  - name: nologin
                    match: {path_prefix: /n/}
                    upstream: \(apis.a.api.baseURL)
                    credentials:
                      type: oauth2_refresh
                      token_url: \(apis.a.idp.baseURL)/oauth/token
                      client_id: app
                      client_secret_env: A_SECRET
                """)
        _ = try apis.write(yaml)
        try apis.loginBoth()
        let proxy = try apis.serve(yaml)

        // A tool run with http_proxy sends the absolute form: GET http://b.example.test/data.
        let okBefore = try apis.b.apiStats()["ok"] as? Int ?? 0
        let viaEnvironment = try Self.proxiedCurl("http://b.example.test/data?x=1", environment: ["http_proxy": "http://\(proxy.address)"])
        #expect(viaEnvironment.status == 200, "\(viaEnvironment.body)")
        let viaOption = try Self.proxiedCurl("http://b.example.test/data", arguments: ["-x", "http://\(proxy.address)"])
        #expect(viaOption.status == 200, "\(viaOption.body)")
        #expect(try apis.b.apiStats()["ok"] as? Int == okBefore + 2, "both reached b's API with b's token")

        let other = try Self.proxiedCurl("http://elsewhere.example.test/a/data", arguments: ["-x", "http://\(proxy.address)"])
        #expect(other.status == 403)
        #expect(other.body.contains(#""error":"forbidden_target""#))
        let noRoute = try send(proxy, "GET", "/nowhere")
        #expect(noRoute.status == 404)
        #expect(noRoute.bodyString.contains(#""error":"no_route""#))
        let connect = try Self.proxiedCurl("https://b.example.test/", arguments: ["-x", "http://\(proxy.address)"])
        #expect(connect.connectStatus == 405, "CONNECT stays 405: \(connect)")

        let noSession = try send(proxy, "GET", "/n/data")
        #expect(noSession.status == 401)
        #expect(noSession.bodyString.contains(#""route":"nologin""#), "\(noSession.bodyString)")
        // The prefix is stripped: /a/data reaches the API as /data.
        #expect(try send(proxy, "GET", "/a/data").status == 200)

        // The command line: status of every route, keyed by name.
        let status = try apis.command(["status", "--json"])
        let json = try #require(try JSONSerialization.jsonObject(with: Data(status.stdout.utf8)) as? [String: [String: Any]])
        #expect(json["a"]?["session"] as? String == "active")
        #expect(json["b"]?["session"] as? String == "active")
        #expect(json["nologin"]?["session"] as? String == "none")
        #expect(status.status == 1, "one route has no session")
        let check = try apis.command(["check"])
        #expect(check.status == 0)
        for name in ["a", "b", "nologin"] { #expect(check.stdout.contains("route \(name):")) }

        // Admin: readiness per route.
        let admin = proxy.adminURL!
        #expect(try curl([admin + "/readyz?route=a"]).status == 200)
        #expect(try curl([admin + "/readyz?route=nologin"]).status == 503)
        #expect(try curl([admin + "/readyz"]).status == 503)
        try proxy.stopAndExpectCleanExit()
    }

    @Test("reload: a route whose credentials did not change keeps its token (no refresh, no login); an invalid file changes nothing")
    func reloadKeepsSessions() throws {
        let apis = try TwoAPIs()
        defer { apis.stop() }
        let first = apis.config()
        _ = try apis.write(first)
        try apis.loginBoth()
        let proxy = try apis.serve(first)
        let admin = proxy.adminURL!
        #expect(try send(proxy, "GET", "/a/data").status == 200)
        #expect(try Self.sendB(proxy).status == 200)
        let before = (try apis.a.idpCalls("refresh_token"), try apis.b.idpCalls("refresh_token"), try apis.a.idpCalls("password"))

        // A new route, and route a moved to another prefix: a's credentials are the same.
        let second = apis.config().replacingOccurrences(of: "path_prefix: /a/", with: "path_prefix: /alpha/")
        _ = try apis.write(second)
        let reload = try curl(["-sS", "-X", "POST", admin + "/reload"])
        #expect(reload.status == 200, "\(reload.bodyString)")
        #expect(try send(proxy, "GET", "/alpha/data").status == 200, "a request sent after the 200 follows the new file")
        #expect(try send(proxy, "GET", "/a/data").status == 404)
        #expect(try Self.sendB(proxy).status == 200)

        // An invalid file: 422 naming every error; the running routes keep serving.
        _ = try apis.write(second.replacingOccurrences(of: "name: b", with: "name: a") + "\nbogus_key: 1\n")
        let refused = try curl(["-sS", "-X", "POST", admin + "/reload"])
        #expect(refused.status == 422)
        #expect(refused.bodyString.contains("bogus_key"), "\(refused.bodyString)")
        #expect(refused.bodyString.contains("routes[1].name"), "\(refused.bodyString)")
        #expect(try send(proxy, "GET", "/alpha/data").status == 200)
        #expect(try Self.sendB(proxy).status == 200)

        // SIGUSR2 with the first file again.
        _ = try apis.write(first)
        proxy.terminate(signal: SIGUSR2)
        #expect(within(10) { (try? send(proxy, "GET", "/a/data").status) == 200 })

        let after = (try apis.a.idpCalls("refresh_token"), try apis.b.idpCalls("refresh_token"), try apis.a.idpCalls("password"))
        #expect(after == before, "no refresh and no login for routes whose credentials did not change")
        let metrics = try curl([admin + "/metrics"]).bodyString
        #expect(metrics.contains(#"tokenproxy_config_reloads_total{outcome="failed"} 1"#), "\(metrics)")
        #expect(metrics.contains(#"tokenproxy_config_reloads_total{outcome="success"} 2"#))
        try proxy.stopAndExpectCleanExit()
    }

    @Test("20 reloads under a steady load, alternating two valid files and an invalid one: no request fails, no connection is reset")
    func reloadsUnderLoad() throws {
        let apis = try TwoAPIs()
        defer { apis.stop() }
        let first = apis.config()
        // The second file adds a route with a listener of its own and moves b to a path prefix.
        let second = apis.config(
            extraRoutes: """
                  - name: c
                    match: {listen: 127.0.0.1:0}
                    upstream: \(apis.b.api.baseURL)
                    credentials: {type: static, token_env: A_SECRET}
                """
        ).replacingOccurrences(of: "match: {host: b.example.test}", with: "match: {path_prefix: /b/}")
        let invalid = first + "\n  - name: a\n    upstream: nowhere\n"
        _ = try apis.write(first)
        try apis.loginBoth()
        let proxy = try apis.serve(first)
        let admin = proxy.adminURL!

        // Eight keep-alive clients send to route a without pause until told to stop.
        let stop = Atomic<Bool>(false)
        let served = Atomic<Int>(0)
        let failures = Mutex<[String]>([])
        let clients = DispatchGroup()
        for _ in 0..<8 {
            clients.enter()
            Thread.detachNewThread {
                defer { clients.leave() }
                do {
                    var client = try RawHTTPClient(port: proxy.port, timeout: 30)
                    var onConnection = 0
                    while !stop.load(ordering: .relaxed) {
                        try client.send(rawRequest("GET", "/a/data", host: proxy.address, headers: []))
                        let response = try client.readResponse(method: "GET")
                        if response.status != 200 { failures.withLock { $0.append("status \(response.status)") } }
                        served.add(1, ordering: .relaxed)
                        onConnection += 1
                        if onConnection == 200 {
                            client.close()
                            client = try RawHTTPClient(port: proxy.port, timeout: 30)
                            onConnection = 0
                        }
                    }
                    client.close()
                } catch {
                    failures.withLock { $0.append("\(error)") }
                }
            }
        }
        #expect(within(20) { served.load(ordering: .relaxed) > 50 })
        var statuses: [Int] = []
        for round in 0..<20 {
            let file = [first, second, invalid][round % 3]
            _ = try apis.write(file)
            let before = served.load(ordering: .relaxed)
            statuses.append(try curl(["-sS", "-X", "POST", admin + "/reload"]).status)
            // Some requests are served under each configuration before the next reload.
            #expect(within(20) { served.load(ordering: .relaxed) > before + 20 })
        }
        stop.store(true, ordering: .relaxed)
        clients.wait()
        #expect(failures.withLock { $0 } == [], "no failed request, no reset")
        #expect(statuses == (0..<20).map { $0 % 3 == 2 ? 422 : 200 })
        #expect(try apis.a.idpCalls("refresh_token") == 0, "route a kept its token through every reload")
        #expect(try apis.a.idpCalls("password") == 1)
        try proxy.stopAndExpectCleanExit()
    }

    @Test("an http_proxy client's plain-http request goes upstream over TLS when its host route's upstream is https")
    func httpProxyToATLSUpstream() throws {
        let pki = try TestPKI()
        let upstream = try PythonServer("echo_upstream", arguments: ["--tls-cert", pki.serverCert, "--tls-key", pki.serverKey])
        defer { upstream.stop() }
        let token = "route-tls-token-\(UUID().uuidString.lowercased())"
        let proxy = try ProxyProcess(
            config: """
                listen: 127.0.0.1:0
                workers: 1
                drain_timeout: 2s
                routes:
                  - name: secure
                    match: {host: [api.example.test, "*.example.test"]}
                    upstream: https://127.0.0.1:\(upstream.port)/base
                    upstream_tls: {ca_file: \(pki.caFile)}
                    credentials: {type: static, token_env: ROUTE_TOKEN}
                  - name: other
                    match: {path_prefix: /other/}
                    upstream: http://127.0.0.1:9
                    credentials: {type: static, token_env: ROUTE_TOKEN}
                """,
            environment: ["ROUTE_TOKEN": token])
        for host in ["api.example.test", "deep.sub.example.test"] {
            let response = try Self.proxiedCurl("http://\(host)/hello", environment: ["http_proxy": "http://\(proxy.address)"])
            #expect(response.status == 200, "\(response.body)")
            #expect(response.body.contains("Bearer \(token)"))
            #expect(response.body.contains("/base/hello"))
        }
        // The route's names are allowed Host values: an origin-form request with one reaches it too.
        let client = try RawHTTPClient(port: proxy.port, timeout: 30)
        defer { client.close() }
        try client.send(rawRequest("GET", "/hello", host: "API.example.test", headers: [("Connection", "close")]))
        #expect(try client.readResponse(method: "GET").status == 200)
        try proxy.stopAndExpectCleanExit()
        #expect(!proxy.stderr.contains(token))
    }

    @Test("a reload that removes a route's own listener closes it; its kept-alive connections close once idle")
    func removedListenerCloses() throws {
        let upstream = try PythonServer("echo_upstream")
        defer { upstream.stop() }
        func file(withOwn: Bool) -> String {
            """
            listen: 127.0.0.1:0
            workers: 1
            drain_timeout: 2s
            admin:
              listen: 127.0.0.1:0
            routes:
              - {name: main, upstream: "\(upstream.baseURL)", credentials: {type: static, token_env: L_TOKEN}}
            \(withOwn ? "  - {name: own, match: {listen: 127.0.0.1:0}, upstream: \"\(upstream.baseURL)\", credentials: {type: static, token_env: L_TOKEN}}" : "")
            """
        }
        let proxy = try ProxyProcess(config: file(withOwn: true), environment: ["L_TOKEN": "listener-token"])
        let line = try #require(proxy.stderr.split(separator: "\n").first { $0.contains("route own listening on ") })
        let port = ProxyProcess.port(of: String(line.split(separator: " ").last!))
        let client = try RawHTTPClient(port: port, timeout: 10)
        defer { client.close() }
        try client.send(rawRequest("GET", "/kept", host: "127.0.0.1", headers: []))
        #expect(try client.readResponse(method: "GET").status == 200)

        _ = try proxy.directory.write("tokenproxy.yaml", file(withOwn: false))
        #expect(try curl(["-sS", "-X", "POST", proxy.adminURL! + "/reload"]).status == 200)
        #expect(client.waitForClose(timeout: 10), "the idle kept-alive connection of the removed listener is closed")
        #expect(throws: (any Error).self) { _ = try RawHTTPClient(port: port, timeout: 2) }
        #expect(try curl([proxy.baseURL + "/x"]).status == 200)
        try proxy.stopAndExpectCleanExit()
    }
}
