import Foundation
import TestSupport
import Testing

/// The client recipes of README.md and docs/*.md (issue 40 point 4), run as the documents show them
/// against the real binary and a real upstream: each ```sh or ```python block that runs a client
/// (curl, git, Python, Node, the AWS CLI, gh, pip, go) is read out of its document at test time, so
/// the page and the test cannot drift. The comment on the line before its fence says what happens:
///
///     <!-- recipe: NAME -->               the test `NAME` below runs it
///     <!-- recipe not run: REASON -->     it cannot run here, and why
///
/// The run changes only addresses: `localhost:8080` and `127.0.0.1:8080` become the proxy's (README's
/// tour, whose `serve` stays in the foreground, runs in its three parts). The one ```js block, in
/// docs/HTTPS-CLIENTS.md, is ForwardProxyTests.theHTTPSClientsRecipesRunAsWritten's.
@Suite(.tags(.endToEnd), .timeLimit(.minutes(25))) struct DocumentedRecipeTests {
    struct Recipe: CustomTestStringConvertible, Sendable {
        var file: String
        var line: Int
        var language: String
        var text: String
        /// The marker comment's text after `recipe` (`: NAME` or ` not run: REASON`), if any.
        var marker: String?
        var testDescription: String { "\(file):\(line)" }

        /// `NAME` of `<!-- recipe: NAME -->`.
        var runName: String? {
            guard let marker, marker.hasPrefix(": ") else { return nil }
            return String(marker.dropFirst(2)).trimmingCharacters(in: .whitespaces)
        }
        /// `REASON` of `<!-- recipe not run: REASON -->`.
        var notRunReason: String? {
            guard let marker, marker.hasPrefix(" not run: ") else { return nil }
            return String(marker.dropFirst(" not run: ".count)).trimmingCharacters(in: .whitespaces)
        }

        /// The programs the block's commands start: each line's first word after `export`, `env` and
        /// `NAME=value` assignments, and what follows `$(`, `|`, `&&` and `;`.
        var programs: Set<String> {
            guard language != "python" else { return ["python3"] }
            var found: Set<String> = []
            for rawLine in text.split(separator: "\n") {
                let line = rawLine.split(separator: "#", maxSplits: 1, omittingEmptySubsequences: false).first ?? ""
                let pieces = line.replacingOccurrences(of: "$(", with: ";").replacingOccurrences(of: "&&", with: ";")
                    .replacingOccurrences(of: "|", with: ";").split(separator: ";")
                for piece in pieces {
                    let words = piece.split(separator: " ").map(String.init).drop { $0 == "export" || $0 == "env" || $0.contains("=") }
                    if let first = words.first { found.insert(first) }
                }
            }
            return found
        }

        var isClientRecipe: Bool { !programs.isDisjoint(with: DocumentedRecipeTests.clients) }
    }

    static let clients: Set<String> = ["curl", "git", "python3", "python", "node", "aws", "gh", "pip", "go"]

    /// The tests below, by the names the documents use.
    static let runNames: Set<String> = [
        "how-do-i-curl", "how-do-i-python", "how-do-i-git", "api-keys-git", "aws-s3", "several-apis-http-proxy", "readme-tour",
        "sandbox-curl",
    ]

    static let documents: [String] = {
        let docs = RepositoryPaths.root.appendingPathComponent("docs")
        let names = ((try? FileManager.default.contentsOfDirectory(atPath: docs.path)) ?? []).filter { $0.hasSuffix(".md") }.sorted()
        return ["README.md"] + names.map { "docs/\($0)" }
    }()

    /// Every ```sh and ```python block of `documents`, with the marker before its fence.
    static let recipes: [Recipe] = documents.flatMap { name -> [Recipe] in
        guard let text = try? String(contentsOf: RepositoryPaths.root.appendingPathComponent(name), encoding: .utf8) else { return [] }
        return fencedBlocks(in: text).filter { $0.language == "sh" || $0.language == "python" }.map { block in
            var marker: String?
            if block.lineBefore.hasPrefix("<!-- recipe"), block.lineBefore.hasSuffix(" -->") {
                marker = String(block.lineBefore.dropFirst("<!-- recipe".count).dropLast(" -->".count))
            }
            return Recipe(file: name, line: block.line, language: block.language, text: block.text, marker: marker)
        }
    }

    @Test func theDocumentsHaveClientRecipes() {
        #expect(Self.recipes.filter(\.isClientRecipe).count >= 10, "\(Self.recipes.map(\.testDescription))")
    }

    /// No client recipe goes unrun without a reason, and every test here finds its block.
    @Test(arguments: recipes.filter(\.isClientRecipe))
    func everyClientRecipeIsRunOrSaysWhyNot(_ recipe: Recipe) {
        if let name = recipe.runName {
            #expect(Self.runNames.contains(name), "\(recipe.file):\(recipe.line) names no test: \(name)")
        } else {
            let reason = recipe.notRunReason ?? ""
            let clients = recipe.programs.intersection(Self.clients).sorted()
            #expect(
                reason.count >= 20,
                "\(recipe.file):\(recipe.line) runs \(clients) but has neither `<!-- recipe: NAME -->` nor `<!-- recipe not run: REASON -->`")
        }
    }

    @Test(arguments: runNames.sorted())
    func everyNamedRecipeIsInADocumentOnce(_ name: String) {
        let marked = Self.recipes.filter { $0.runName == name }
        #expect(marked.count == 1, "`<!-- recipe: \(name) -->` is on \(marked.count) blocks")
    }

    static func recipe(_ name: String) throws -> Recipe {
        try #require(recipes.first { $0.runName == name }, "no block is marked `<!-- recipe: \(name) -->`")
    }

    /// Runs a recipe in `directory` with bash (`-e`: the first failing command fails it) or
    /// python3, the proxy's address in place of the documents' `localhost:8080`, HOME `home`
    /// (default: `directory`).
    /// `text`: a part of the recipe's text instead of all of it.
    static func run(
        _ recipe: Recipe, text part: String? = nil, proxy: ProxyProcess?, in directory: String, home: String? = nil,
        environment: [String: String] = [:]
    ) throws -> CommandResult {
        var text = part ?? recipe.text
        if let proxy {
            text = text.replacingOccurrences(of: "localhost:8080", with: proxy.address).replacingOccurrences(of: "127.0.0.1:8080", with: proxy.address)
        }
        let env = childEnvironment(
            [
                // The binary under test first on PATH, for the recipes' `tokenproxy` commands.
                "PATH": RepositoryPaths.tokenproxyBinary.deletingLastPathComponent().path + ":"
                    + (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"),
                "HOME": home ?? directory, "GIT_TERMINAL_PROMPT": "0", "GIT_CONFIG_NOSYSTEM": "1", "NO_PROXY": "*",
                "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.com",
            ].merging(environment) { _, new in new })
        let arguments = recipe.language == "python" ? ["python3", "-c", text] : ["bash", "-e", "-o", "pipefail", "-c", text]
        return try runCommand(
            "/usr/bin/env", arguments: arguments, environment: env, currentDirectory: URL(fileURLWithPath: directory), timeout: 120)
    }

    static func staticProxy(upstream: String, extra: String = "") throws -> ProxyProcess {
        try ProxyProcess(
            config: """
                listen: 127.0.0.1:0
                upstream: \(upstream)
                credentials:
                  type: static
                  token_env: E2E_TOKEN
                \(extra)
                """, environment: ["E2E_TOKEN": e2eToken])
    }

    /// The recipe `name` run against a proxy with a static token in front of the echo upstream's
    /// base path `/v1`.
    static func runWithEchoUpstream(_ name: String) throws -> CommandResult {
        let upstream = try PythonServer("echo_upstream")
        let proxy = try Self.staticProxy(upstream: upstream.baseURL + "/v1")
        defer {
            proxy.terminate()
            upstream.stop()
        }
        let work = try TempDir(prefix: "recipe")
        return try Self.run(try Self.recipe(name), proxy: proxy, in: work.path)
    }

    /// docs/HOW-DO-I.md: a GET and a JSON POST with curl reach the upstream's base path with the token.
    @Test func howDoICurl() throws {
        let result = try Self.runWithEchoUpstream("how-do-i-curl")
        #expect(result.status == 0, "\(result.stderr)")
        let echoes = result.stdout.components(separatedBy: "}{")
        #expect(echoes.count == 2, "\(result.stdout)")
        #expect(echoes.first?.contains(#""method": "GET""#) == true && echoes.first?.contains(#""path": "/v1/users/me""#) == true)
        #expect(echoes.last?.contains(#""method": "POST""#) == true && echoes.last?.contains(#""path": "/v1/orders""#) == true)
        #expect(echoes.last?.contains(#""body": "{\"name\":\"x\"}""#) == true, "\(result.stdout)")
        #expect(echoes.allSatisfy { $0.contains(#"["Authorization", "Bearer \#(e2eToken)"]"#) }, "\(result.stdout)")
    }

    /// docs/HOW-DO-I.md: requests through the proxy; the script prints the upstream's JSON answer.
    @Test func howDoIPython() throws {
        let result = try Self.runWithEchoUpstream("how-do-i-python")
        #expect(result.status == 0, "\(result.stderr)")
        // print() of the decoded JSON: a Python dict.
        #expect(result.stdout.contains("'path': '/v1/users/me'"), "\(result.stdout)")
        #expect(result.stdout.contains("['Authorization', 'Bearer \(e2eToken)']"), "\(result.stdout)")
    }

    /// docs/HOW-DO-I.md: git clones through the proxy from a server that takes only the Bearer token
    /// (nginx checks it), and the `insteadOf` line sends the server's own URL through the proxy too.
    @Test func howDoIGit() throws {
        let server = try BearerGitServer(token: e2eToken)
        let proxy = try Self.staticProxy(upstream: server.nginx.baseURL)
        defer {
            proxy.terminate()
            withExtendedLifetime(server) {}
        }
        // Without the token the server refuses.
        #expect(try curl([server.nginx.baseURL + "/team/repo.git/info/refs?service=git-upload-pack"]).status == 401)
        let work = try TempDir(prefix: "recipe")
        let result = try Self.run(try Self.recipe("how-do-i-git"), proxy: proxy, in: work.path)
        #expect(result.status == 0, "\(result.stderr)")
        let readme = try String(contentsOfFile: work.file("repo/README"), encoding: .utf8)
        #expect(readme == "hello\n")
        // The recipe's `insteadOf` is in the (temporary) HOME's .gitconfig: git.example.com now
        // means the proxy, which adds the token.
        let remote = try GitHTTPServer.git(["ls-remote", "https://git.example.com/team/repo.git"], environment: ["HOME": work.path])
        #expect(remote.stdout.contains("refs/heads/main"), "\(remote.stdout)\(remote.stderr)")
    }

    /// docs/API-KEYS.md: git clones and pushes through the proxy, which sends the token as the
    /// password of `x-access-token` (nginx's auth_basic checks it). The push is of the folder the
    /// recipe runs in, a clone with one commit more.
    @Test func apiKeysGit() throws {
        let server = try GitHTTPServer(user: "x-access-token", password: e2eToken)
        try BearerGitServer.makeRepository(in: server.root)
        let tokenFile = try TempDir(prefix: "recipe-token")
        let proxy = try ProxyProcess(
            config: """
                listen: 127.0.0.1:0
                upstream: \(server.nginx.baseURL)
                credentials:
                  type: file
                  path: \(try tokenFile.write("github-token", e2eToken + "\n"))
                inject:
                  basic_username: x-access-token
                """)
        defer {
            proxy.terminate()
            withExtendedLifetime(server) {}
        }
        let work = try TempDir(prefix: "recipe")
        try GitHTTPServer.git(["clone", "--quiet", server.root.file("team/repo.git"), work.path + "/local"])
        _ = try work.write("local/NEW", "pushed\n")
        try GitHTTPServer.git(["add", "NEW"], in: work.path + "/local")
        try GitHTTPServer.git(["commit", "--quiet", "-m", "from the recipe"], in: work.path + "/local")
        let result = try Self.run(try Self.recipe("api-keys-git"), proxy: proxy, in: work.file("local"), home: work.path)
        #expect(result.status == 0, "\(result.stderr)")
        #expect(FileManager.default.fileExists(atPath: work.file("local/repo/README")))
        let log = try GitHTTPServer.git(["--git-dir", server.root.file("team/repo.git"), "log", "--format=%s", "main"])
        #expect(log.stdout == "from the recipe\nfirst\n", "\(log.stdout)")
    }

    /// docs/AWS.md: curl and the AWS CLI, neither signing, put, list and get an S3 object through a
    /// proxy that signs with the keys in its environment. moto_server checks no signature here: it
    /// cannot verify the recipe's `prefix=reports/` (it signs the query as werkzeug re-quotes it, `/`
    /// left bare, where SigV4 and the proxy encode it; Tests/servers notes), so the signatures are
    /// AWSSigningTests' part; this is what the reader sees.
    @Test func awsS3() throws {
        let folder = try TempDir(prefix: "recipe-moto")
        let info = folder.file("account.json")
        let moto = try PythonServer("moto_sigv4", arguments: ["--info-file", info, "--no-auth"], startupTimeout: 120)
        let endpoint = try #require(
            (try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: info))) as? [String: Any])?["endpoint"] as? String)
        let proxy = try ProxyProcess(
            config: """
                listen: 127.0.0.1:0
                upstream: \(endpoint)
                credentials:
                  type: aws
                  region: eu-west-1
                  service: s3
                  source: environment
                  payload: unsigned
                """,
            environment: ["AWS_ACCESS_KEY_ID": "AKIARECIPEEXAMPLE", "AWS_SECRET_ACCESS_KEY": "recipe/secret"])
        defer {
            proxy.terminate()
            moto.stop()
        }
        let made = try curl([
            "-X", "PUT", "-H", "Content-Type: application/xml", "--data-binary",
            "<CreateBucketConfiguration xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\"><LocationConstraint>eu-west-1</LocationConstraint></CreateBucketConfiguration>",
            proxy.baseURL + "/my-bucket",
        ])
        #expect(made.status == 200, "\(made.bodyString)")
        let work = try TempDir(prefix: "recipe")
        let report = "day,orders\n2026-12-06,42\n"
        _ = try work.write("report.csv", report)
        // The AWS CLI needs a region even with --endpoint-url; a user has one configured.
        let result = try Self.run(
            try Self.recipe("aws-s3"), proxy: proxy, in: work.path,
            environment: ["AWS_DEFAULT_REGION": "eu-west-1", "AWS_CONFIG_FILE": work.file("none"), "AWS_SHARED_CREDENTIALS_FILE": work.file("none")])
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stdout.contains("<Key>reports/report.csv</Key>"), "\(result.stdout)")
        #expect(result.stdout.hasSuffix(report), "\(result.stdout)")
    }
}

extension DocumentedRecipeTests {
    /// docs/SEVERAL-APIS.md: curl, git and pip, told only `http_proxy` (or git's `http.proxy`), reach
    /// three host routes by their names (the proxy resolves nothing of them: each route's upstream is
    /// a local server). The git server and the package index take only the route's Bearer token.
    @Test func severalAPIsHTTPProxy() throws {
        let api = try PythonServer("echo_upstream")
        let git = try BearerGitServer(token: e2eToken)
        let index = try PackageIndex(token: e2eToken)
        let proxy = try ProxyProcess(
            config: """
                listen: 127.0.0.1:0
                routes:
                  - name: github
                    match: {host: api.github.com}
                    upstream: \(api.baseURL)
                    credentials: {type: static, token_env: E2E_TOKEN}
                  - name: git
                    match: {host: git.example.com}
                    upstream: \(git.nginx.baseURL)
                    credentials: {type: static, token_env: E2E_TOKEN}
                  - name: pypi
                    match: {host: pypi.internal.example.com}
                    upstream: \(index.nginx.baseURL)
                    credentials: {type: static, token_env: E2E_TOKEN}
                """, environment: ["E2E_TOKEN": e2eToken])
        defer {
            proxy.terminate()
            api.stop()
            withExtendedLifetime((git, index)) {}
        }
        // Without the token the index refuses.
        #expect(try curl([index.nginx.baseURL + "/simple/mypackage/"]).status == 401)
        let work = try TempDir(prefix: "recipe")
        // pip installs into the test's folder, not into this machine's Python.
        let result = try Self.run(
            try Self.recipe("several-apis-http-proxy"), proxy: proxy, in: work.path,
            environment: [
                "no_proxy": "", "NO_PROXY": "", "PIP_TARGET": work.file("site"), "PIP_NO_CACHE_DIR": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1",
                "PIP_CONFIG_FILE": "/dev/null", "PIP_NO_INPUT": "1",
            ])
        #expect(result.status == 0, "\(result.output)")
        #expect(result.stdout.contains(#""path": "/user""#), "\(result.stdout)")
        #expect(result.stdout.contains(#"["Authorization", "Bearer \#(e2eToken)"]"#), "\(result.stdout)")
        #expect(try String(contentsOfFile: work.file("repo/README"), encoding: .utf8) == "hello\n")
        #expect(try String(contentsOfFile: work.file("site/mypackage/__init__.py"), encoding: .utf8) == "ANSWER = 42\n")
    }
}

extension DocumentedRecipeTests {
    /// README.md's tour: `login` with the password on stdin, `serve` (in the foreground, so the test
    /// starts that one line itself and runs the lines "in another terminal" beside it), then curl,
    /// `status`, `status --json`, `token` and `logout`, against Tests/servers/oauth_server.py and an
    /// upstream that shows what it received.
    @Test func readmeTour() throws {
        let idp = try PythonServer("oauth_server", arguments: ["--client", "reporting-cli:tour-secret", "--user", "alice:tour-password"])
        let api = try PythonServer("echo_upstream")
        let recipe = try Self.recipe("readme-tour")
        let lines = recipe.text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        let serveLine = try #require(lines.firstIndex { $0.hasPrefix("tokenproxy serve") }, "the tour has no `tokenproxy serve` line")
        #expect(lines[serveLine] == "tokenproxy serve --config tokenproxy.yaml")
        let before = lines[..<serveLine].joined(separator: "\n")
        let after = lines[(serveLine + 1)...].joined(separator: "\n")
        #expect(after.contains("# In another terminal:"))

        let work = try TempDir(prefix: "recipe-tour")
        let config = """
            listen: 127.0.0.1:0
            upstream: \(api.baseURL)/v1
            admin:
              listen: 127.0.0.1:0
            credentials:
              type: oauth2_refresh
              token_url: \(idp.baseURL)/oauth/token
              client_id: reporting-cli
              client_secret_env: OAUTH_CLIENT_SECRET
              login: password
            store:
              path: ./state/tokens.json
            """
        _ = try work.write("tokenproxy.yaml", config)
        let environment = ["OAUTH_CLIENT_SECRET": "tour-secret", "PASSWORD": "tour-password"]
        defer {
            idp.stop()
            api.stop()
        }
        let login = try Self.run(recipe, text: before, proxy: nil, in: work.path, environment: environment)
        #expect(login.status == 0, "\(login.output)")
        #expect(FileManager.default.fileExists(atPath: work.file("state/tokens.json")))
        let proxy = try ProxyProcess(
            config: config, directory: work, environment: environment, arguments: ["serve", "--config", "tokenproxy.yaml"])
        defer { proxy.terminate() }
        let rest = try Self.run(recipe, text: after, proxy: proxy, in: work.path, environment: environment)
        #expect(rest.status == 0, "\(rest.output)")
        #expect(rest.stdout.contains(#""path": "/v1/orders""#), "\(rest.stdout)")
        // `token` prints the access token the upstream received.
        let token = try #require(
            rest.stdout.split(separator: "\n").first { !$0.isEmpty && !$0.contains(" ") && !$0.hasPrefix("{") && !$0.hasPrefix("}") },
            "\(rest.stdout)")
        #expect(rest.stdout.contains(#"["Authorization", "Bearer \#(token)"]"#), "\(rest.stdout)")
        #expect(rest.stdout.contains("oauth2_refresh"), "status names the kind: \(rest.stdout)")
        // logout deleted the stored tokens.
        #expect(!FileManager.default.fileExists(atPath: work.file("state/tokens.json")), "\(rest.output)")
    }
}

/// A PEP 503 package index on nginx with one wheel, `mypackage` 1.0, answering only requests with
/// `Authorization: Bearer TOKEN`.
final class PackageIndex {
    let root: TempDir
    let nginx: Nginx

    init(token: String) throws {
        root = try TempDir(prefix: "package-index")
        let wheel = "mypackage-1.0-py3-none-any.whl"
        try FileManager.default.createDirectory(atPath: root.file("files"), withIntermediateDirectories: true)
        let made = try runCommand(
            "python3",
            arguments: [
                "-c",
                """
                import base64, hashlib, sys, zipfile
                files = {"mypackage/__init__.py": b"ANSWER = 42\\n",
                         "mypackage-1.0.dist-info/METADATA": b"Metadata-Version: 2.1\\nName: mypackage\\nVersion: 1.0\\n",
                         "mypackage-1.0.dist-info/WHEEL": b"Wheel-Version: 1.0\\nGenerator: test\\nRoot-Is-Purelib: true\\nTag: py3-none-any\\n"}
                record = "".join("%s,sha256=%s,%d\\n" % (n, base64.urlsafe_b64encode(hashlib.sha256(b).digest()).rstrip(b"=").decode(), len(b))
                                 for n, b in files.items()) + "mypackage-1.0.dist-info/RECORD,,\\n"
                with zipfile.ZipFile(sys.argv[1], "w") as z:
                    for n, b in files.items():
                        z.writestr(n, b)
                    z.writestr("mypackage-1.0.dist-info/RECORD", record)
                """,
                root.file("files/\(wheel)"),
            ])
        guard made.status == 0 else { throw HarnessError("making the wheel: \(made.stderr)") }
        _ = try root.write("simple/mypackage/index.html", "<!DOCTYPE html><html><body><a href=\"/files/\(wheel)\">\(wheel)</a></body></html>\n")
        nginx = try Nginx(
            server: """
                location / {
                    if ($http_authorization != "Bearer \(token)") { return 401; }
                    root \(root.path);
                    index index.html;
                }
                """)
    }
}

/// nginx in front of `git http-backend` that serves only requests with `Authorization: Bearer TOKEN`,
/// with one repository, `team/repo.git`, holding one commit (a README).
final class BearerGitServer {
    let root: TempDir
    let nginx: Nginx
    private let fcgi: ChildProcess

    init(token: String) throws {
        root = try TempDir(prefix: "git-bearer")
        try Self.makeRepository(in: root)
        (fcgi, nginx) = try GitHTTPServer.serve(root, access: "if ($http_authorization != \"Bearer \(token)\") { return 401; }")
    }

    /// `team/repo.git` in `root`, bare, pushable over HTTP, with a first commit on main.
    static func makeRepository(in root: TempDir) throws {
        let bare = root.file("team/repo.git")
        try GitHTTPServer.git(["init", "--quiet", "--bare", "--initial-branch=main", bare])
        try GitHTTPServer.git(["-C", bare, "config", "http.receivepack", "true"])
        let seed = try GitHTTPServer.repository("seed", in: root, readme: "hello\n")
        try GitHTTPServer.git(["push", "--quiet", bare, "HEAD:refs/heads/main"], in: seed)
    }

    deinit {
        nginx.stop()
        fcgi.stop(grace: 2)
    }
}
