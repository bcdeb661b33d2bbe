import Foundation
import TestSupport
import Testing

/// The forward proxy for https URLs (CONTRACT.md "HTTPS for clients", issue 32 points 2 and 4),
/// driven by real, unmodified clients as processes, each with `HTTPS_PROXY` and the CA that
/// `tokenproxy ca` prints trusted through its usual variable: curl (`CURL_CA_BUNDLE`), Python
/// requests (`REQUESTS_CA_BUNDLE`), git (`GIT_SSL_CAINFO`), Node 20 (`NODE_EXTRA_CA_CERTS` and a proxy
/// agent), websockets (`SSL_CERT_FILE`). The names under `example.test` resolve nowhere: only the
/// proxy knows them.
@Suite(.tags(.endToEnd), .timeLimit(.minutes(35))) struct ForwardProxyTests {
    static let host = "api.example.test"

    /// The variable through which each client is given the CA: the one docs/HTTPS-CLIENTS.md "Tools
    /// that insist on https" names for it (`theHTTPSClientsRecipesRunAsWritten` holds the two to each other).
    enum CAVariable {
        static let curl = "CURL_CA_BUNDLE"
        static let requests = "REQUESTS_CA_BUNDLE"
        static let git = "GIT_SSL_CAINFO"
        static let node = "NODE_EXTRA_CA_CERTS"
    }

    static func echoWorld() throws -> (upstream: PythonServer, proxy: ForwardProxyFixture) {
        let upstream = try PythonServer("echo_upstream")
        let proxy = try ForwardProxyFixture(routes: [.init(name: "api", host: host, upstream: upstream.baseURL + "/base")])
        return (upstream, proxy)
    }

    @Test func curlReachesTheRouteThroughTheTunnelWithTheToken() throws {
        let (upstream, f) = try Self.echoWorld()
        let r = try f.curl(["https://\(Self.host)/hello?x=1"])
        #expect(r.status == 200, "\(r.stderr) \(f.proxy.stderr.suffix(2000))")
        let seen = try Echo(r.body)
        #expect(seen.path == "/base/hello?x=1")
        #expect(seen.value("Authorization") == "Bearer \(e2eToken)")
        #expect(seen.values("X-Forwarded-Proto") == ["https"], "\(seen.headers)")
        #expect(seen.tunnel == nil, "the upstream saw a CONNECT")
        // The access log has the request with the tunnel's host.
        #expect(f.proxy.waitForStderr(containing: "tunnel=\(Self.host)"), "\(f.proxy.stderr.suffix(2000))")
        // The CA is EC P-256, made at the first start in the store's folder with its key at 0600.
        let text = try TestCA.openssl(["x509", "-noout", "-text", "-in", f.caFile]).stdout
        #expect(text.contains("prime256v1") || text.contains("P-256"), "\(text.prefix(800))")
        let key = f.proxy.directory.file("state/forward-proxy-ca-key.pem")
        let mode = try FileManager.default.attributesOfItem(atPath: key)[.posixPermissions] as? Int
        #expect(mode == 0o600, "the made CA's key at \(key)")
        // `tokenproxy ca` prints the same CA again.
        let again = try ProxyProcess.run(args: ["ca", "--config", f.proxy.configPath], env: f.environment)
        #expect(again.stdout == (try String(contentsOfFile: f.caFile, encoding: .utf8)))
        try f.finish()
        upstream.stop()
    }

    /// A name with a trailing dot is the same name in the CONNECT line, the SNI and `Host` alike
    /// (issue 39 point 20): curl sends `api.example.test.` in all three, and the route answers.
    @Test func aTrailingDotNameReachesTheRouteThroughTheTunnel() throws {
        let (upstream, f) = try Self.echoWorld()
        let r = try f.curl(["https://\(Self.host)./dotted?x=1"])
        #expect(r.status == 200, "\(r.stderr) \(r.bodyString) \(f.proxy.stderr.suffix(2000))")
        let seen = try Echo(r.body)
        #expect(seen.path == "/base/dotted?x=1")
        #expect(seen.value("Authorization") == "Bearer \(e2eToken)")
        try f.finish()
        upstream.stop()
    }

    /// Two URLs in one curl run go through one CONNECT (`%{num_connects}`: 1, then 0), and a body
    /// goes both ways through the tunnel.
    @Test func keepAliveAndBodiesInTheTunnel() throws {
        let (upstream, f) = try Self.echoWorld()
        let run = try runCommand(
            "curl",
            arguments: [
                "--silent", "--show-error", "--max-time", "60", "--output", "/dev/null", "--output", "/dev/null", "--write-out",
                "%{http_code} %{num_connects}\\n",
                "https://\(Self.host)/one", "https://\(Self.host)/two",
            ],
            environment: childEnvironment(["HTTPS_PROXY": f.proxyURL, CAVariable.curl: f.caFile]), timeout: 90)
        #expect(run.stdout == "200 1\n200 0\n", "\(run.output)")

        let upload = testBytes(count: 500_000)
        let dir = try TempDir(prefix: "tunnel-body")
        let file = try dir.write("upload", Data(upload))
        let posted = try f.curl(["-X", "POST", "--data-binary", "@\(file)", "https://\(Self.host)/upload"])
        #expect(posted.status == 200, "\(posted.stderr)")
        #expect(try Echo(posted.body).body_sha256 == (try sha256Hex(upload)))
        let chunkedPost = try f.curl(["-X", "POST", "-H", "Transfer-Encoding: chunked", "--data-binary", "@\(file)", "https://\(Self.host)/chunked"])
        #expect(try Echo(chunkedPost.body).body_len == upload.count)
        let big = try f.curl(["https://\(Self.host)/stream?bytes=2000000"])
        #expect(big.body == echoPattern(count: 2_000_000))
        try f.finish()
        upstream.stop()
    }

    /// Requests pipelined in the tunnel are answered in order, each with the token.
    @Test func pipelinedRequestsInTheTunnel() throws {
        let (upstream, f) = try Self.echoWorld()
        let requests = (1...5).map { index in
            TLSClient.Request(
                index % 2 == 0 ? "POST" : "GET", "/pipe-\(index)", headers: [("Host", Self.host)], body: index % 2 == 0 ? "body \(index)" : "")
        }
        let outcome = try TLSClient.exchange(port: f.proxy.port, connect: "\(Self.host):443", caFile: f.caFile, pipeline: true, requests: requests)
        #expect(outcome.responses.map(\.status) == [200, 200, 200, 200, 200], "\(outcome)")
        for (index, response) in outcome.responses.enumerated() {
            let seen = try echo(response.body)
            #expect(seen.path == "/base/pipe-\(index + 1)")
            #expect(seen.body == requests[index].body)
            #expect(seen.value("Authorization") == "Bearer \(e2eToken)")
        }
        try f.finish()
        upstream.stop()
    }

    /// Python requests sends `CONNECT host:443 HTTP/1.0` without a Host field; its Session keeps the tunnel.
    @Test func pythonRequestsThroughTheTunnel() throws {
        let (upstream, f) = try Self.echoWorld()
        let run = try runCommand(
            "python3",
            arguments: [RepositoryPaths.servers.appendingPathComponent("requests_client.py").path, "https://\(Self.host)/py-1", "https://\(Self.host)/py-2"],
            environment: childEnvironment(["HTTPS_PROXY": f.proxyURL, CAVariable.requests: f.caFile, "PYTHONDONTWRITEBYTECODE": "1"]),
            timeout: 90)
        let result = try #require(try JSONSerialization.jsonObject(with: Data(run.stdout.utf8)) as? [String: Any], "\(run.output)")
        #expect(result["error"] is NSNull, "\(result) \(f.proxy.stderr.suffix(2000))")
        let results = result["results"] as? [[String: Any]] ?? []
        #expect(results.count == 2)
        for (index, item) in results.enumerated() {
            #expect(item["status"] as? Int == 200)
            let seen = try echo(item["body"] as? String ?? "")
            #expect(seen.path == "/base/py-\(index + 1)")
            #expect(seen.value("Authorization") == "Bearer \(e2eToken)")
            #expect(seen.value("X-Forwarded-Proto") == "https")
        }
        let post = result["post"] as? [String: Any]
        #expect(post?["status"] as? Int == 200)
        #expect(try echo(post?["body"] as? String ?? "").body_len == 256 * 800)
        try f.finish()
        upstream.stop()
    }

    /// git clone and push through the tunnel to a TLS git server (nginx `listen … ssl` in front of
    /// git http-backend, checking Basic credentials): the proxy injects the token as Basic
    /// (`inject: {basic_username: x-access-token}`) and verifies the server against its own CA.
    @Test func gitClonesAndPushesThroughTheTunnel() throws {
        let serverCA = try TestCA(name: "git server CA")
        let server = try GitHTTPServer(user: "x-access-token", password: e2eToken, tls: try serverCA.issue())
        let f = try ForwardProxyFixture(routes: [
            .init(
                name: "git", host: "git.example.test", upstream: "https://localhost:\(server.nginx.port)",
                extra: """
                        inject: {basic_username: x-access-token}
                        upstream_tls: {ca_file: \(serverCA.certificate)}
                    """)
        ])
        let env = ["HTTPS_PROXY": f.proxyURL, CAVariable.git: f.caFile]
        let url = "https://git.example.test/repo.git"
        let work = try TempDir(prefix: "git-tunnel")
        let source = try GitHTTPServer.repository("source", in: work, readme: "first line\n")
        try GitHTTPServer.git(["push", "--quiet", url, "HEAD:refs/heads/main"], in: source, environment: env)

        let clone = work.file("clone")
        try GitHTTPServer.git(["clone", "--quiet", url, clone], environment: env)
        #expect(try String(contentsOfFile: clone + "/README", encoding: .utf8) == "first line\n")
        // A pack bigger than http.postBuffer goes as a chunked POST through the tunnel.
        _ = try work.write("clone/data.bin", Data(testBytes(count: 200_000)))
        try GitHTTPServer.git(["add", "data.bin"], in: clone)
        try GitHTTPServer.git(["commit", "--quiet", "-m", "second"], in: clone)
        try GitHTTPServer.git(["-c", "http.postBuffer=4096", "push", "--quiet", "origin", "main"], in: clone, environment: env)
        let log = try GitHTTPServer.git(["--git-dir", server.root.file("repo.git"), "log", "--format=%s", "main"])
        #expect(log.stdout == "second\nfirst\n")
        try f.finish()
        #expect(!f.proxy.stderr.contains(InjectTests.basic("x-access-token", e2eToken).dropFirst(6)))
    }

    /// Node 20's https with a proxy agent and `NODE_EXTRA_CA_CERTS`: two requests, one tunnel.
    @Test func nodeThroughTheTunnel() throws {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/node") else {
            Issue.record("no node: run scripts/setup.sh")
            return
        }
        let (upstream, f) = try Self.echoWorld()
        let run = try runCommand(
            "node",
            arguments: [
                RepositoryPaths.servers.appendingPathComponent("node_https_client.js").path, "https://\(Self.host)/node-1", "https://\(Self.host)/node-2",
            ],
            environment: childEnvironment(["HTTPS_PROXY": f.proxyURL, CAVariable.node: f.caFile]), timeout: 90)
        let result = try #require(try JSONSerialization.jsonObject(with: Data(run.stdout.utf8)) as? [String: Any], "\(run.output)")
        #expect(result["error"] is NSNull, "\(result) \(f.proxy.stderr.suffix(2000))")
        let results = result["results"] as? [[String: Any]] ?? []
        try #require(results.count == 2, "\(result)")
        for (index, item) in results.enumerated() {
            #expect(item["status"] as? Int == 200)
            let seen = try echo(item["body"] as? String ?? "")
            #expect(seen.path == "/base/node-\(index + 1)")
            #expect(seen.value("Authorization") == "Bearer \(e2eToken)")
            #expect(seen.value("X-Forwarded-Proto") == "https")
        }
        // Debian 12's own https-proxy-agent (5.x) keeps no sockets; npm's 7.x and the fallback do.
        let agent = result["agent"] as? String ?? ""
        if !agent.hasPrefix("https-proxy-agent 5") {
            #expect(results[1]["reused"] as? Bool == true, "the second request opened a new tunnel (\(agent))")
        }
        try f.finish()
        upstream.stop()
    }

    /// docs/HTTPS-CLIENTS.md "Tools that insist on https" (issue 39 points 10 and 14, moved out of
    /// README.md by issue 40): its curl line and its Node script run as written, with the variables
    /// the page gives them (the CA's path replaced by the fixture's), against a route for
    /// api.github.com; for git and Python requests, the variable the page names is the one the tests
    /// above give them.
    @Test func theHTTPSClientsRecipesRunAsWritten() throws {
        let page = "docs/HTTPS-CLIENTS.md"
        let readme = try String(contentsOf: RepositoryPaths.root.appendingPathComponent(page), encoding: .utf8)
        let section = try #require(
            readme.components(separatedBy: "\n## Tools that insist on https\n").dropFirst().first?.components(separatedBy: "\n## ").first,
            "\(page) has no section \"Tools that insist on https\"")
        let lines = section.split(separator: "\n").map(String.init)
        let readmeCA = "/etc/tokenproxy/ca.pem"
        /// The line holding `marker`: its leading `NAME=value` words, and the words of the command after them.
        func recipe(_ marker: String) throws -> (environment: [String: String], command: [String]) {
            let line = try #require(lines.first { $0.contains(marker) }, "\(page) has no recipe with \(marker)")
            var words = (line.components(separatedBy: "#").first ?? "").split(separator: " ").map(String.init)[...]
            words = words.first == "//" ? words.dropFirst() : words
            var environment: [String: String] = [:]
            while let word = words.first, let equals = word.firstIndex(of: "="), word.first?.isUppercase == true {
                environment[String(word[..<equals])] = String(word[word.index(after: equals)...])
                words = words.dropFirst()
            }
            return (environment, Array(words))
        }
        #expect(try recipe("git clone https://").environment == [CAVariable.git: readmeCA])
        #expect(try recipe("python3 app.py").environment == [CAVariable.requests: readmeCA])
        let proxyVariable = try recipe("export HTTPS_PROXY=").command
        #expect(proxyVariable.prefix(2) == ["export", "HTTPS_PROXY=http://127.0.0.1:8080"], "\(proxyVariable)")

        let upstream = try PythonServer("echo_upstream")
        defer { upstream.stop() }
        let f = try ForwardProxyFixture(routes: [.init(name: "github", host: "api.github.com", upstream: upstream.baseURL + "/base")])
        func run(_ recipe: (environment: [String: String], command: [String]), in folder: URL? = nil) throws -> CommandResult {
            var environment = recipe.environment.mapValues { $0 == readmeCA ? f.caFile : $0 }
            environment["HTTPS_PROXY"] = f.proxyURL
            let command = try #require(recipe.command.first)
            return try runCommand(
                command, arguments: Array(recipe.command.dropFirst()), environment: childEnvironment(environment), currentDirectory: folder,
                timeout: 90)
        }

        let curl = try recipe("curl https://")
        #expect(curl.environment == [CAVariable.curl: readmeCA], "\(curl)")
        let fetched = try run(curl)
        #expect(fetched.status == 0, "\(fetched.output) \(f.proxy.stderr.suffix(2000))")
        #expect(try Echo(Array(fetched.stdout.utf8)).value("Authorization") == "Bearer \(e2eToken)", "\(fetched.output)")
        #expect(try Echo(Array(fetched.stdout.utf8)).path == "/base/user")

        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/node") else {
            Issue.record("no node: run scripts/setup.sh")
            return
        }
        let script = try #require(
            readme.components(separatedBy: "```js\n").dropFirst().first?.components(separatedBy: "```").first, "\(page) has no js block")
        let node = try recipe(try #require(script.split(separator: "\n").first.map(String.init)))
        #expect(node.environment.keys.sorted() == [CAVariable.node, "NODE_PATH"], "\(node)")
        #expect(node.command == ["node", "tool.js"])
        let folder = try TempDir(prefix: "readme-node")
        try folder.write("tool.js", script)
        let answered = try run(node, in: folder.url)
        #expect(answered.status == 0, "\(answered.output) \(f.proxy.stderr.suffix(2000))")
        #expect(try Echo(Array(answered.stdout.utf8)).value("Authorization") == "Bearer \(e2eToken)", "\(answered.output)")
        try f.finish()
    }

    /// An upstream 401 inside the tunnel costs one refresh at the identity provider and one retry.
    @Test func a401InTheTunnelIsRetriedAfterOneRefresh() throws {
        let idp = try OAuthServer.start()
        let upstream = try PythonServer("refusing_upstream")
        let f = try ForwardProxyFixture(
            routes: [
                .init(
                    name: "api", host: Self.host, upstream: upstream.baseURL,
                    credentials: "{type: oauth2_client_credentials, token_url: \"\(idp.tokenURL)\", client_id: app, client_secret_env: TUNNEL_SECRET}")
            ], environment: ["TUNNEL_SECRET": "secret"])
        #expect(try f.curl(["https://\(Self.host)/first"]).status == 200)
        #expect(try idp.stats().count(OAuthGrant.clientCredentials) == 1)
        _ = try curl(["-X", "POST", upstream.baseURL + "/test/refuse?count=1&status=401"])
        let r = try f.curl(["https://\(Self.host)/second"])
        #expect(r.status == 200, "\(r.bodyString)")
        #expect(try idp.stats().count(OAuthGrant.clientCredentials) == 2)
        let seen = try InjectTests.requests(upstream)
        #expect(seen.map(\.status) == [200, 401, 200], "\(seen.map(\.target))")
        #expect(seen.map(\.target) == ["/first", "/second", "/second"])
        let tokens = seen.compactMap { $0.value("Authorization") }
        #expect(tokens.count == 3 && tokens[1] != tokens[2])
        try f.finish()
    }

    /// wss:// through the tunnel with the `websockets` client (it reads HTTPS_PROXY itself); the
    /// handshake reaches the echo server with the token.
    @Test func websocketThroughTheTunnel() throws {
        let server = try PythonServer("ws_echo")
        let f = try ForwardProxyFixture(routes: [.init(name: "ws", host: "ws.example.test", upstream: server.baseURL + "/ws")])
        let run = try runCommand(
            "python3", arguments: [RepositoryPaths.servers.appendingPathComponent("ws_client.py").path, "wss://ws.example.test/chat"],
            environment: childEnvironment(["HTTPS_PROXY": f.proxyURL, "SSL_CERT_FILE": f.caFile, "PYTHONDONTWRITEBYTECODE": "1"]), timeout: 150)
        let result = try #require(try JSONSerialization.jsonObject(with: Data(run.stdout.utf8)) as? [String: Any], "\(run.output)")
        #expect(result["ok"] as? Bool == true, "\(result) \(f.proxy.stderr.suffix(2000))")
        let connections = result["connections"] as? [[String: Any]] ?? []
        #expect(connections.first?["echoed"] as? Int == 3)
        let stats = try #require(try curl([server.baseURL + "/_stats"]).json)
        #expect(stats["upgrades"] as? Int == 1)
        #expect(stats["authorizations"] as? [String] == ["Bearer \(e2eToken)"], "\(stats)")
        try f.finish()
    }
}

/// `other_hosts: tunnel` for real (CONTRACT.md "HTTPS for clients"): a name that no route has, with
/// a TLS server on its port 443. Run in a network namespace of its own (root only), where
/// `real.example.test` is 10.77.0.10: a private address, so `deny_addresses: []` lets it through
/// (EndToEndTests/Sandbox/SandboxEgressTests.swift has the default list refuse it).
@Suite(.enabled(if: NetworkNamespace.isAvailable, "needs root, unshare and nsenter"), .tags(.endToEnd, .root), .timeLimit(.minutes(35)))
struct OtherHostsTunnelTests {
    @Test func anUnknownHostIsTunnelledByteForByteToItsPort443() throws {
        let namespace = try NetworkNamespace(hosts: [("real.example.test", "10.77.0.10")])
        let serverCA = try TestCA(name: "real server CA")
        let pair = try serverCA.issue(["real.example.test"])
        let server = try namespace.pythonServer(
            "echo_upstream.py", ["--host", "10.77.0.10", "--port", "443", "--tls-cert", pair.certificate, "--tls-key", pair.key])
        defer { server.stop(grace: 1) }
        let proxy = try namespace.forwardProxy("  other_hosts: tunnel\n  deny_addresses: []", prefix: "other-hosts-tunnel")

        /// curl inside the namespace, through the proxy, trusting `ca`: its exit status, stdout, stderr.
        func curlInside(_ url: String, trusting ca: String) throws -> CommandResult {
            let command = namespace.command("curl", ["--silent", "--show-error", "--max-time", "30", url])
            return try runCommand(
                command.executable, arguments: command.arguments,
                environment: childEnvironment(["HTTPS_PROXY": proxy.baseURL, "CURL_CA_BUNDLE": ca]), timeout: 60)
        }
        // The client sees the real server's certificate, and the server sees the client's request untouched.
        let through = try curlInside("https://real.example.test/hello", trusting: serverCA.certificate)
        #expect(through.status == 0, "\(through.output) \(proxy.stderr.suffix(2000))")
        let seen = try Echo(Array(through.stdout.utf8))
        #expect(seen.path == "/hello")
        #expect(!seen.has("Authorization") && !seen.has("X-Forwarded-For") && !seen.has("X-Forwarded-Proto"), "\(seen.headers)")
        // So the proxy's own CA is no use there: nothing was intercepted.
        let ca = try ProxyProcess.run(args: ["ca", "--config", proxy.configPath], env: ["E2E_TOKEN": e2eToken])
        let proxyCA = try proxy.directory.write("proxy-ca.pem", ca.stdout)
        #expect(try curlInside("https://real.example.test/again", trusting: proxyCA).status != 0)
        // Only port 443.
        let otherPort = try curlInside("https://real.example.test:8443/", trusting: serverCA.certificate)
        #expect(otherPort.status != 0 && otherPort.stderr.contains("403"), "\(otherPort.output)")
        proxy.terminate(signal: SIGTERM)
        #expect(try proxy.waitForExit(timeout: 15) == 0)
        #expect(!proxy.stderr.contains(e2eToken))
    }
}
