import Foundation
import TestSupport
import Testing

/// CONTRACT.md "Where the credential goes", through the real binary with curl: each placement as the
/// upstream received it, the three `client_authorization` modes, a route's own `inject`, the one
/// refresh and retry after a refusal, a token that cannot be sent, and no injected value in a log
/// line or an error body.
@Suite(.tags(.endToEnd), .timeLimit(.minutes(35))) struct InjectTests {
    /// `user:token` as Basic carries it (RFC 7617 §2).
    static func basic(_ user: String, _ token: String) -> String {
        "Basic " + Data("\(user):\(token)".utf8).base64EncodedString()
    }

    @Test(
        "the token goes in the named field with its format, and the client's own copy of that field does not",
        arguments: [
            ("X-API-Key", "{token}", "\(e2eToken)"), ("Authorization", "token {token}", "token \(e2eToken)"),
            ("Proxy-Authorization", "Bearer {token}", "Bearer \(e2eToken)"),
        ])
    func aFieldWithItsFormat(field: String, format: String, expected: String) throws {
        let f = try Fixture(extra: "inject: {header: \(field), format: \"\(format)\"}")
        let r = try curl(["-H", "\(field): client-own-value", f.url("/items")])
        #expect(r.status == 200, "\(r.bodyString)")
        let echo = try Echo(r.body)
        #expect(echo.values(field) == [expected])
        #expect(!r.bodyString.contains("client-own-value"))
        if field.lowercased() != "authorization" { #expect(!echo.has("Authorization")) }
        try f.finish()
    }

    @Test func xServerlessAuthorizationLeavesTheClientsAuthorizationAsItCame() throws {
        let f = try Fixture(extra: "inject: {header: X-Serverless-Authorization}")
        let echo = try f.echo(["-H", "Authorization: Bearer the-users-own-id-token", f.url("/run")])
        #expect(echo.values("X-Serverless-Authorization") == ["Bearer \(e2eToken)"])
        #expect(echo.values("Authorization") == ["Bearer the-users-own-id-token"])
        try f.finish()
    }

    @Test func basicUsernameSendsTheTokenAsTheBasicPassword() throws {
        let f = try Fixture(extra: "inject: {basic_username: x-access-token}")
        let echo = try f.echo(["-u", "someone:else", f.url("/repo.git/info/refs")])
        #expect(echo.values("Authorization") == [Self.basic("x-access-token", e2eToken)])
        #expect(!f.proxy.stderr.contains(Self.basic("x-access-token", e2eToken).dropFirst(6)))
        try f.finish()
    }

    @Test func theQueryParameterIsReplacedWhereItStandsOrAppendedAndTheRestKeepTheirBytes() throws {
        let f = try Fixture(extra: "inject: {query: api_key}")
        let replaced = try Echo(try curl([f.url("/q?a=1&api_key=client-own&b=%2F+x")]).body)
        #expect(replaced.path == "/base/q?a=1&api_key=\(e2eToken)&b=%2F+x")
        let appended = try Echo(try curl([f.url("/q?z=%7E&a=")]).body)
        #expect(appended.path == "/base/q?z=%7E&a=&api_key=\(e2eToken)")
        let alone = try Echo(try curl(["-H", "Authorization: Bearer own", f.url("/q")]).body)
        #expect(alone.path == "/base/q?api_key=\(e2eToken)")
        #expect(alone.values("Authorization") == ["Bearer own"])
        // The access log's path has no query, so no token.
        #expect(f.proxy.waitForStderr(containing: "GET /q "))
        #expect(!f.proxy.stderr.contains("api_key="))
        try f.finish()
    }

    /// Issue 39 point 19: the token in the query never comes back to the client. A redirect the
    /// proxy rewrites loses the parameter; any other field that carries the token has it scrubbed
    /// (the same number of `*`).
    @Test func theTokenInTheQueryDoesNotComeBackInTheAnswersFields() throws {
        let f = try Fixture(extra: "inject: {query: api_key}")
        let stars = String(repeating: "*", count: e2eToken.count)
        let relative = try curl([f.url("/dir/redirect-slash?x=1&y=%2F")])
        #expect(relative.status == 301, "\(relative.bodyString)")
        #expect(relative.header("Location") == "/dir/redirect-slash/?x=1&y=%2F")
        let absolute = try curl([f.url("/dir/redirect-slash?absolute=1")])
        #expect(absolute.status == 301, "\(absolute.bodyString)")
        #expect(absolute.header("Location") == f.url("/dir/redirect-slash/?absolute=1"))
        let alone = try curl([f.url("/dir/redirect-slash")])
        #expect(alone.header("Location") == "/dir/redirect-slash/", "no query left, no ?")
        let echoed = try curl([f.url("/target-header?x=1")])
        #expect(echoed.status == 200)
        #expect(echoed.header("X-Request-Target") == "/base/target-header?x=1&api_key=\(stars)")
        for answer in [relative, absolute, alone, echoed] {
            for field in answer.headers { #expect(!field.value.contains(e2eToken), "\(field.name) carries the token") }
        }
        try f.finish()
    }

    /// Issue 39 point 19: a client's own parameter of the injected name is found after a `;` too
    /// (some upstream frameworks split pairs on both).
    @Test func aParameterAfterASemicolonIsTheClientsOwnToo() throws {
        let replace = try Fixture(extra: "inject: {query: api_key}")
        let replaced = try Echo(try curl([replace.url("/q?x=1;api_key=client-own&b=2")]).body)
        #expect(replaced.path == "/base/q?x=1;api_key=\(e2eToken)&b=2")
        try replace.finish()
        let reject = try Fixture(extra: "inject: {query: api_key}\nforward: {client_authorization: reject}")
        expectProxyError(try curl([reject.url("/q?x=1;api_key=client-own")]), status: 400, code: "client_authorization_rejected")
        try reject.finish()
    }

    @Test func keepSendsTheClientsOwnCredentialAndInjectsNothing() throws {
        let query = try Fixture(extra: "inject: {query: api_key}\nforward: {client_authorization: keep}")
        let kept = try Echo(try curl([query.url("/q?api_key=client-own&b=1")]).body)
        #expect(kept.path == "/base/q?api_key=client-own&b=1")
        #expect(try Echo(try curl([query.url("/q?b=1")]).body).path == "/base/q?b=1&api_key=\(e2eToken)")
        try query.finish()
        let header = try Fixture(extra: "inject: {header: X-API-Key, format: \"{token}\"}\nforward: {client_authorization: keep}")
        let own = try Echo(try curl(["-H", "X-API-Key: client-own", header.url("/h")]).body)
        #expect(own.values("X-API-Key") == ["client-own"])
        #expect(!own.headers.description.contains(e2eToken))
        try header.finish()
    }

    @Test func rejectRefusesTheClientsOwnFieldOrParameter() throws {
        let query = try Fixture(extra: "inject: {query: api_key}\nforward: {client_authorization: reject}")
        let refused = try curl([query.url("/q?x=1&api_key=client-own")])
        expectProxyError(refused, status: 400, code: "client_authorization_rejected")
        #expect(!refused.bodyString.contains(e2eToken))
        #expect(try curl([query.url("/q?x=1")]).status == 200)
        try query.finish()
        let header = try Fixture(extra: "inject: {header: X-API-Key}\nforward: {client_authorization: reject}")
        expectProxyError(try curl(["-H", "X-API-Key: client-own", header.url("/h")]), status: 400, code: "client_authorization_rejected")
        // Another field than the injected one is the client's own business.
        #expect(try curl(["-H", "Authorization: Bearer x", header.url("/h")]).status == 200)
        try header.finish()
    }

    @Test func aRoutesInjectReplacesTheTopLevelOne() throws {
        let upstream = try PythonServer("echo_upstream")
        let proxy = try ProxyProcess(
            config: """
                listen: 127.0.0.1:0
                workers: 1
                inject: {header: X-API-Key, format: "{token}"}
                routes:
                  - name: keyed
                    match: {path_prefix: /keyed/}
                    upstream: \(upstream.baseURL)/k
                    credentials: {type: static, token_env: E2E_TOKEN}
                  - name: queried
                    match: {path_prefix: /queried/}
                    upstream: \(upstream.baseURL)/q
                    credentials: {type: static, token_env: E2E_TOKEN}
                    inject: {query: key}
                """, environment: ["E2E_TOKEN": e2eToken])
        let keyed = try Echo(try curl([proxy.baseURL + "/keyed/a?x=1"]).body)
        #expect(keyed.values("X-API-Key") == [e2eToken])
        #expect(keyed.path == "/k/a?x=1")
        let queried = try Echo(try curl([proxy.baseURL + "/queried/a?x=1"]).body)
        #expect(!queried.has("X-API-Key"))
        #expect(!queried.has("Authorization"))
        #expect(queried.path == "/q/a?x=1&key=\(e2eToken)")
        proxy.terminate()
        #expect(try proxy.waitForExit(timeout: 15) == 0)
        #expect(!proxy.stderr.contains(e2eToken))
    }

    /// A token with a line break is never sent: the source's answer is refused, and with no token the
    /// request gets 503 token_unavailable; neither the log nor the body shows it.
    @Test func aTokenWithALineBreakIsNeverSent() throws {
        let upstream = try PythonServer("refusing_upstream")
        let dir = try TempDir(prefix: "tokenproxy-inject")
        let script = try dir.write("token.sh", "#!/bin/sh\nprintf '{\"token\":\"smuggled\\\\r\\\\nX-Evil: header-value\"}'\n", mode: 0o755)
        let proxy = try ProxyProcess(
            config: proxyConfig(
                upstream: upstream.baseURL, credentials: "type: exec\ncommand: [\(script)]",
                more: """
                    inject: {header: X-API-Key, format: "key={token}"}
                    limits: {refresh_wait: 2s}
                    log: {level: debug, access_log: true}
                    """), directory: dir)
        let r = try curl([proxy.baseURL + "/x"])
        expectProxyError(r, status: 503, code: "token_unavailable")
        #expect(!r.bodyString.contains("smuggled") && !r.bodyString.contains("X-Evil"))
        let seen = try curl([upstream.baseURL + "/test/requests"])
        #expect((seen.json?["requests"] as? [Any])?.isEmpty == true, "\(seen.bodyString)")
        #expect(!proxy.stderr.contains("smuggled"))
        #expect(!proxy.stderr.contains("header-value"))
        proxy.terminate()
        _ = try proxy.waitForExit(timeout: 15)
    }

    // MARK: a refused token: one refresh, one retry

    struct Seen {
        var target: String
        var headers: [[String]]
        var status: Int

        func value(_ name: String) -> String? {
            headers.first { $0.count == 2 && $0[0].caseInsensitiveCompare(name) == .orderedSame }?[1]
        }

        /// The query parameter `name`'s value as sent.
        func parameter(_ name: String) -> String? {
            guard let query = target.split(separator: "?", maxSplits: 1).dropFirst().first else { return nil }
            for pair in query.split(separator: "&") where pair.hasPrefix(name + "=") { return String(pair.dropFirst(name.count + 1)) }
            return nil
        }
    }

    static func requests(_ upstream: PythonServer) throws -> [Seen] {
        let answer = try curl([upstream.baseURL + "/test/requests"])
        let list = answer.json?["requests"] as? [[String: Any]] ?? []
        return list.map { Seen(target: $0["target"] as? String ?? "", headers: $0["headers"] as? [[String]] ?? [], status: $0["status"] as? Int ?? 0) }
    }

    /// An identity provider that counts its token calls, an upstream that refuses on demand, and
    /// the proxy between them with `inject`.
    static func refreshWorld(inject: String) throws -> (idp: OAuthServer, upstream: PythonServer, proxy: ProxyProcess) {
        let idp = try OAuthServer.start()
        let upstream = try PythonServer("refusing_upstream")
        let proxy = try ProxyProcess(
            config: """
                listen: 127.0.0.1:0
                upstream: \(upstream.baseURL)
                workers: 1
                credentials:
                  type: oauth2_client_credentials
                  token_url: \(idp.tokenURL)
                  client_id: app
                  client_secret_env: INJECT_CLIENT_SECRET
                inject: \(inject)
                log: {level: debug, access_log: true}
                """, environment: ["INJECT_CLIENT_SECRET": "secret"])
        return (idp, upstream, proxy)
    }

    @Test(
        "a refused token is refreshed once and the request sent once more with the new one: a 401 for a field, a 401 or 403 for a query",
        arguments: [("{header: X-API-Key, format: \"{token}\"}", 401), ("{query: api_key}", 401), ("{query: api_key}", 403)])
    func oneRefreshAndOneRetry(inject: String, status: Int) throws {
        let (idp, upstream, proxy) = try Self.refreshWorld(inject: inject)
        let credential: (Seen) -> String? = { inject.contains("query") ? $0.parameter("api_key") : $0.value("X-API-Key") }
        #expect(try curl([proxy.baseURL + "/first"]).status == 200)
        #expect(try idp.stats().count(OAuthGrant.clientCredentials) == 1)
        _ = try curl(["-X", "POST", upstream.baseURL + "/test/refuse?count=1&status=\(status)"])
        let r = try curl([proxy.baseURL + "/second?x=1"])
        #expect(r.status == 200, "\(r.bodyString)")
        #expect(try idp.stats().count(OAuthGrant.clientCredentials) == 2)
        let seen = try Self.requests(upstream)
        try #require(seen.count == 3, "\(seen.map(\.target))")
        #expect(seen.map(\.status) == [200, status, 200])
        let tokens = seen.map(credential)
        #expect(tokens.allSatisfy { $0 != nil }, "\(seen.map(\.target))")
        #expect(tokens[0] == tokens[1])
        #expect(tokens[1] != tokens[2])
        #expect(seen[2].target.hasPrefix("/second?x=1"))
        for token in tokens.compactMap({ $0 }) { #expect(!proxy.stderr.contains(token)) }
        proxy.terminate()
        _ = try proxy.waitForExit(timeout: 15)
    }

    @Test func a403ToATokenInAFieldGoesBackAsItCame() throws {
        let (idp, upstream, proxy) = try Self.refreshWorld(inject: "{header: X-API-Key}")
        _ = try curl(["-X", "POST", upstream.baseURL + "/test/refuse?count=1&status=403"])
        #expect(try curl([proxy.baseURL + "/x"]).status == 403)
        #expect(try Self.requests(upstream).count == 1)
        #expect(try idp.stats().count(OAuthGrant.clientCredentials) == 1)
        proxy.terminate()
        _ = try proxy.waitForExit(timeout: 15)
    }
}

extension Fixture {
    /// curl with `arguments`, answered 200 by the echo upstream: what it saw.
    fileprivate func echo(_ arguments: [String], sourceLocation: SourceLocation = #_sourceLocation) throws -> Echo {
        let r = try curl(arguments)
        #expect(r.status == 200, sourceLocation: sourceLocation)
        return try Echo(r.body)
    }
}

/// nginx in front of `git http-backend`, refusing any request without the Basic credentials of its
/// one user (`auth_basic`, whose password file holds the token's hash). nginx runs no CGI program
/// itself: fcgiwrap runs git http-backend for it over FastCGI, as on a Debian git server.
final class GitHTTPServer {
    let root: TempDir
    let nginx: Nginx
    private let fcgi: ChildProcess

    /// `tls`: nginx serves https with this certificate (issue 32's TLS git server).
    init(user: String, password: String, tls: TestCA.Issued? = nil) throws {
        root = try TempDir(prefix: "git-server")
        try GitHTTPServer.git(["init", "--quiet", "--bare", "--initial-branch=main", root.file("repo.git")])
        try GitHTTPServer.git(["-C", root.file("repo.git"), "config", "http.receivepack", "true"])
        let hash = try runCommand("openssl", arguments: ["passwd", "-apr1", "-stdin"], stdin: Data(password.utf8))
        guard hash.status == 0 else { throw HarnessError("openssl passwd: \(hash.stderr)") }
        let passwords = try root.write("htpasswd", "\(user):\(hash.stdout.trimmingCharacters(in: .whitespacesAndNewlines))\n")
        (fcgi, nginx) = try Self.serve(
            root,
            access: """
                auth_basic "git";
                auth_basic_user_file \(passwords);
                """,
            parameters: "fastcgi_param REMOTE_USER $remote_user;", tls: tls)
    }

    /// fcgiwrap on a socket in `root`, and nginx in front of it that runs git http-backend for the
    /// repositories under `root` for each request its `access` lines let through; `parameters`: more
    /// FastCGI parameters.
    static func serve(_ root: TempDir, access: String, parameters: String = "", tls: TestCA.Issued? = nil) throws -> (ChildProcess, Nginx) {
        guard FileManager.default.isExecutableFile(atPath: "/usr/sbin/fcgiwrap") else { throw HarnessError("no fcgiwrap: run scripts/setup.sh") }
        let socket = root.file("fcgi.sock")
        let fcgi = try ChildProcess("/usr/sbin/fcgiwrap", arguments: ["-s", "unix:\(socket)"], environment: childEnvironment([:]))
        let deadline = Date().addingTimeInterval(15)
        while !FileManager.default.fileExists(atPath: socket) && Date() < deadline { usleep(20_000) }
        let nginx = try Nginx(
            server: """
                location / {
                    \(access)
                    client_max_body_size 0;
                    include /etc/nginx/fastcgi_params;
                    fastcgi_param SCRIPT_FILENAME /usr/lib/git-core/git-http-backend;
                    fastcgi_param GIT_PROJECT_ROOT \(root.path);
                    fastcgi_param GIT_HTTP_EXPORT_ALL "";
                    fastcgi_param PATH_INFO $uri;
                    \(parameters)
                    fastcgi_pass unix:\(socket);
                }
                """, tls: tls)
        return (fcgi, nginx)
    }

    /// A new repository `name` in `folder` whose one commit, "first", adds README with `readme`; its path.
    static func repository(_ name: String, in folder: TempDir, readme: String) throws -> String {
        let path = folder.file(name)
        try git(["init", "--quiet", path])
        _ = try folder.write(name + "/README", readme)
        try git(["add", "README"], in: path)
        try git(["commit", "--quiet", "-m", "first"], in: path)
        return path
    }

    deinit {
        nginx.stop()
        fcgi.stop(grace: 2)
    }

    /// git with no prompt, no credential helper and no user configuration.
    @discardableResult
    /// `environment`: more variables (`HTTPS_PROXY`, `GIT_SSL_CAINFO`).
    static func git(_ arguments: [String], in directory: String? = nil, environment: [String: String] = [:]) throws -> CommandResult {
        let home = NSTemporaryDirectory()
        let env = childEnvironment(
            [
                "GIT_TERMINAL_PROMPT": "0", "HOME": home, "GIT_CONFIG_NOSYSTEM": "1", "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com",
                "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.com",
            ].merging(environment) { _, new in new })
        let result = try runCommand(
            "git", arguments: ["-c", "credential.helper=", "-c", "init.defaultBranch=main"] + arguments, environment: env,
            currentDirectory: directory.map { URL(fileURLWithPath: $0) }, timeout: 120)
        guard result.status == 0 else { throw HarnessError("git \(arguments.joined(separator: " ")): \(result.stderr)") }
        return result
    }
}

@Suite(.tags(.endToEnd), .timeLimit(.minutes(35))) struct GitThroughTheProxyTests {
    /// `inject: {basic_username: x-access-token}` is what git over HTTPS to GitHub needs; here nginx
    /// checks it for real and refuses anything else, so the push and the clone pass only if the
    /// proxy injected the token as Basic.
    @Test func gitPushesAndClonesThroughTheProxyWithTheTokenAsBasic() throws {
        let server = try GitHTTPServer(user: "x-access-token", password: e2eToken)
        // Without the credentials nginx refuses, with them it serves.
        let refs = "/repo.git/info/refs?service=git-upload-pack"
        #expect(try curl([server.nginx.baseURL + refs]).status == 401)
        #expect(try curl(["-u", "x-access-token:wrong", server.nginx.baseURL + refs]).status == 401)
        #expect(try curl(["-u", "x-access-token:\(e2eToken)", server.nginx.baseURL + refs]).status == 200)

        let upstream = "http://localhost:\(server.nginx.port)"
        let proxy = try ProxyProcess(
            config: staticTokenConfig(upstream: upstream, logLevel: "debug", more: "inject: {basic_username: x-access-token}"),
            environment: ["E2E_TOKEN": e2eToken])
        let work = try TempDir(prefix: "git-work")
        let source = try GitHTTPServer.repository("source", in: work, readme: "first line\n")
        try GitHTTPServer.git(["push", "--quiet", proxy.baseURL + "/repo.git", "HEAD:refs/heads/main"], in: source)

        let clone = work.file("clone")
        try GitHTTPServer.git(["clone", "--quiet", proxy.baseURL + "/repo.git", clone])
        #expect(try String(contentsOfFile: clone + "/README", encoding: .utf8) == "first line\n")
        _ = try work.write("clone/README", "first line\nsecond line\n")
        try GitHTTPServer.git(["commit", "--quiet", "-am", "second"], in: clone)
        try GitHTTPServer.git(["push", "--quiet", "origin", "main"], in: clone)
        let log = try GitHTTPServer.git(["--git-dir", server.root.file("repo.git"), "log", "--format=%s", "main"])
        #expect(log.stdout == "second\nfirst\n")

        // The same through a proxy that sends the token as Bearer: nginx refuses it.
        let bearer = try ProxyProcess(config: staticTokenConfig(upstream: upstream), environment: ["E2E_TOKEN": e2eToken])
        #expect(try curl([bearer.baseURL + refs]).status == 401)

        for p in [proxy, bearer] {
            p.terminate()
            #expect(try p.waitForExit(timeout: 15) == 0)
            #expect(!p.stderr.contains(e2eToken))
            #expect(!p.stderr.contains(InjectTests.basic("x-access-token", e2eToken).dropFirst(6)))
        }
    }
}
