import Foundation
import TestSupport
import Testing

/// CONTRACT.md "Programs in a sandbox", "Placeholders", through the real binary with real clients:
/// curl and Python requests against the echo upstream, git through nginx, botocore against moto
/// (which checks the proxy's SigV4), another route's placeholder refused, a `callers_file` line
/// removed while serving, and no placeholder or secret in any log line or metric of the run.
@Suite(.tags(.endToEnd), .timeLimit(.minutes(35))) struct PlaceholderTests {
    /// A fresh placeholder for one run, made by `tokenproxy placeholder` itself.
    static func placeholder(_ shape: String) throws -> String {
        let made = try runCommand(RepositoryPaths.tokenproxyBinary.path, arguments: ["placeholder", "--shape", shape], timeout: 30)
        guard made.status == 0 else { throw HarnessError("tokenproxy placeholder: \(made.stderr)") }
        return made.stdout.trimmingCharacters(in: .newlines)
    }

    /// Every secret and placeholder of a run searched for in the proxy's stderr (log and access
    /// log) and its metrics.
    static func expectNoneLeaked(_ values: [String], proxy: ProxyProcess, sourceLocation: SourceLocation = #_sourceLocation) throws {
        let metrics = try proxy.adminURL.map { try curl([$0 + "/metrics"]).bodyString } ?? ""
        #expect(!proxy.stderr.isEmpty, sourceLocation: sourceLocation)
        for value in values {
            #expect(!proxy.stderr.contains(value), "a secret or placeholder reached the log", sourceLocation: sourceLocation)
            #expect(!metrics.contains(value), "a secret or placeholder reached the metrics", sourceLocation: sourceLocation)
        }
    }

    @Test func curlAndRequestsGetTheRealCredentialOnlyWithTheirRoutesPlaceholder() throws {
        let anthropic = try Self.placeholder("sk-ant-api03-{random:64}")
        let openai = try Self.placeholder("sk-proj-{random:48}")
        let query = try Self.placeholder("key-{random:32}")
        let upstream = try PythonServer("echo_upstream")
        // `scrub: false`: the echo shows what the upstream received (with scrubbing, the default with
        // a placeholder, the answer would show stars; ScrubTests cover that).
        let config = """
            \(routesProxyTop)
            admin: {listen: 127.0.0.1:0}
            scrub: false
            routes:
              - name: anthropic
                match: {path_prefix: /anthropic/}
                upstream: \(upstream.baseURL)/a
                credentials: {type: static, token_env: E2E_TOKEN}
                inject: {header: x-api-key, format: "{token}"}
                placeholder: {value_env: ANTHROPIC_PLACEHOLDER}
              - name: openai
                match: {path_prefix: /openai/}
                upstream: \(upstream.baseURL)/o
                credentials: {type: static, token_env: E2E_TOKEN}
                placeholder: {value_env: OPENAI_PLACEHOLDER}
              - name: maps
                match: {path_prefix: /maps/}
                upstream: \(upstream.baseURL)/m
                credentials: {type: static, token_env: E2E_TOKEN}
                inject: {query: key}
                placeholder: {value_env: MAPS_PLACEHOLDER}
            """
        let proxy = try ProxyProcess(
            config: config,
            environment: ["E2E_TOKEN": e2eToken, "ANTHROPIC_PLACEHOLDER": anthropic, "OPENAI_PLACEHOLDER": openai, "MAPS_PLACEHOLDER": query])

        let messages = try curl(["-H", "x-api-key: \(anthropic)", "-H", "anthropic-version: 2023-06-01", proxy.baseURL + "/anthropic/v1/messages"])
        #expect(messages.status == 200, "\(messages.bodyString)")
        let echoed = try Echo(messages.body)
        #expect(echoed.path == "/a/v1/messages")
        #expect(echoed.values("x-api-key") == [e2eToken])
        #expect(!messages.bodyString.contains(anthropic))

        let chat = try Echo(try curl(["-H", "Authorization: Bearer \(openai)", proxy.baseURL + "/openai/v1/chat/completions"]).body)
        #expect(chat.values("Authorization") == ["Bearer \(e2eToken)"])

        let maps = try Echo(try curl([proxy.baseURL + "/maps/geocode?address=x&key=\(query)"]).body)
        #expect(maps.path == "/m/geocode?address=x&key=\(e2eToken)")

        // Another route's placeholder, a real-looking key, the placeholder in another spot, none at all:
        // 403 placeholder_required, and nothing reaches the upstream.
        let refused: [[String]] = [
            ["-H", "x-api-key: \(openai)", proxy.baseURL + "/anthropic/refused"],
            ["-H", "x-api-key: \(e2eToken)", proxy.baseURL + "/anthropic/refused"],
            ["-H", "Authorization: Bearer \(anthropic)", proxy.baseURL + "/anthropic/refused"],
            [proxy.baseURL + "/anthropic/refused"],
            ["-H", "Authorization: Bearer \(anthropic)", proxy.baseURL + "/openai/refused"],
            ["-H", "x-api-key: \(openai)", proxy.baseURL + "/openai/refused"],
            [proxy.baseURL + "/maps/refused?key=\(openai)"],
        ]
        for arguments in refused {
            let r = try curl(arguments)
            expectProxyError(r, status: 403, code: "placeholder_required")
            for value in [anthropic, openai, query, e2eToken] { #expect(!r.bodyString.contains(value)) }
        }
        for path in ["/a/refused", "/o/refused", "/m/refused"] {
            #expect(try curl([upstream.baseURL + "/count?path=\(path)"]).json?["count"] as? Int == 0, "\(path) reached the upstream")
        }

        // Python requests, as an SDK sends its key.
        let script = """
            import requests, sys
            answer = requests.post(sys.argv[1], headers={"x-api-key": sys.argv[2]}, json={"model": "m"}, timeout=30)
            print(answer.status_code)
            print(answer.json()["headers"] and [v for k, v in answer.json()["headers"] if k.lower() == "x-api-key"][0] == sys.argv[3])
            """
        let python = try runCommand(
            ProcessInfo.processInfo.environment["PYTHON"] ?? "python3",
            arguments: ["-c", script, proxy.baseURL + "/anthropic/v1/messages", anthropic, e2eToken], timeout: 60)
        #expect(python.status == 0, "\(python.output)")
        #expect(python.stdout == "200\nTrue\n")

        #expect(proxy.waitForStderr(containing: "placeholder_required"))
        try Self.expectNoneLeaked([anthropic, openai, query, e2eToken], proxy: proxy)
        try proxy.stopAndExpectCleanExit()
        upstream.stop()
    }

    /// The sandbox's usual way out: `HTTPS_PROXY` to the forward proxy, the SDK's own https URL
    /// (`scrub: false`, so the echo shows what the upstream received).
    @Test func throughTheForwardProxyAPlaceholderOpensOnlyItsOwnHost() throws {
        let anthropic = try Self.placeholder("sk-ant-api03-{random:64}")
        let openai = try Self.placeholder("sk-proj-{random:48}")
        let upstream = try PythonServer("echo_upstream")
        let f = try ForwardProxyFixture(
            routes: [
                .init(
                    name: "anthropic", host: "api.anthropic.test", upstream: upstream.baseURL + "/a",
                    extra: "    inject: {header: x-api-key, format: \"{token}\"}\n    placeholder: {value_env: ANTHROPIC_PLACEHOLDER}\n    scrub: false"),
                .init(
                    name: "openai", host: "api.openai.test", upstream: upstream.baseURL + "/o",
                    extra: "    placeholder: {value_env: OPENAI_PLACEHOLDER}\n    scrub: false"),
            ], environment: ["ANTHROPIC_PLACEHOLDER": anthropic, "OPENAI_PLACEHOLDER": openai])
        let script = """
            import requests, sys
            answer = requests.post("https://api.anthropic.test/v1/messages", headers={"x-api-key": sys.argv[1]}, json={}, timeout=30)
            print(answer.status_code, [v for k, v in answer.json().get("headers", []) if k.lower() == "x-api-key"] == [sys.argv[2]])
            answer = requests.post("https://api.anthropic.test/v1/messages", headers={"x-api-key": sys.argv[3]}, json={}, timeout=30)
            print(answer.status_code, answer.json()["error"])
            """
        let python = try runCommand(
            ProcessInfo.processInfo.environment["PYTHON"] ?? "python3", arguments: ["-c", script, anthropic, e2eToken, openai],
            environment: childEnvironment(["HTTPS_PROXY": f.proxyURL, "REQUESTS_CA_BUNDLE": f.caFile]), timeout: 60)
        #expect(python.status == 0, "\(python.output)")
        #expect(python.stdout == "200 True\n403 placeholder_required\n", "\(python.output)")
        let chat = try f.curl(["-H", "Authorization: Bearer \(openai)", "https://api.openai.test/v1/chat/completions"])
        #expect(try Echo(chat.body).values("Authorization") == ["Bearer \(e2eToken)"])
        expectProxyError(
            try f.curl(["-H", "Authorization: Bearer \(anthropic)", "https://api.openai.test/v1/chat/completions"]), status: 403,
            code: "placeholder_required")
        #expect(try curl([upstream.baseURL + "/count?path=/o/v1/chat/completions"]).json?["count"] as? Int == 1)
        try Self.expectNoneLeaked([anthropic, openai, e2eToken], proxy: f.proxy)
        try f.finish()
        upstream.stop()
    }

    @Test func aCallersFileLineRemovedWhileServingRevokesThatCaller() throws {
        let first = try Self.placeholder("ph-agent-one-{random:40}")
        let second = try Self.placeholder("ph-agent-two-{random:40}")
        let upstream = try PythonServer("echo_upstream")
        let folder = try TempDir(prefix: "callers")
        let callers = try folder.write("callers.txt", "# one line per sandbox\nagent-1 \(first)\nagent-2 \(second)\n")
        let proxy = try ProxyProcess(
            config: staticTokenConfig(
                upstream: upstream.baseURL, admin: true, logLevel: "debug",
                more: "inject: {header: x-api-key, format: \"{token}\"}\nplaceholder: {callers_file: \(callers)}"),
            environment: ["E2E_TOKEN": e2eToken])
        func status(_ placeholder: String) throws -> Int { try curl(["-H", "x-api-key: \(placeholder)", proxy.baseURL + "/v1/x"]).status }
        #expect(try status(first) == 200)
        #expect(try status(second) == 200)

        // Rewritten as an operator does (a new file moved over the old one), without agent-2's line.
        _ = try folder.write("callers.new", "agent-1 \(first)\n")
        try FileManager.default.removeItem(atPath: callers)
        try FileManager.default.moveItem(atPath: folder.file("callers.new"), toPath: callers)
        // Waited for, never timed: the contract's second is a promise the test does not measure.
        var revoked = false
        let deadline = Date().addingTimeInterval(20)
        while Date() < deadline {
            if try status(second) == 403 {
                revoked = true
                break
            }
            usleep(50_000)
        }
        #expect(revoked, "agent-2's placeholder still opens the route")
        #expect(try status(first) == 200)
        expectProxyError(try curl(["-H", "x-api-key: \(second)", proxy.baseURL + "/v1/x"]), status: 403, code: "placeholder_required")

        // A new caller's line is taken the same way.
        let third = try Self.placeholder("ph-agent-three-{random:40}")
        _ = try folder.write("callers.new", "agent-1 \(first)\nagent-3 \(third)\n")
        try FileManager.default.removeItem(atPath: callers)
        try FileManager.default.moveItem(atPath: folder.file("callers.new"), toPath: callers)
        var admitted = false
        let later = Date().addingTimeInterval(20)
        while Date() < later && !admitted {
            admitted = try status(third) == 200
            if !admitted { usleep(50_000) }
        }
        #expect(admitted, "agent-3's placeholder is not taken")
        #expect(proxy.waitForStderr(containing: "read again"))
        try Self.expectNoneLeaked([first, second, third, e2eToken], proxy: proxy)
        try proxy.stopAndExpectCleanExit()
        upstream.stop()
    }

    /// git sends Basic credentials only when challenged: the proxy's 401 asks for them, the
    /// placeholder comes as the password, and nginx sees the real token.
    @Test func gitClonesAndPushesThroughNginxWithAPlaceholderAsThePassword() throws {
        let server = try GitHTTPServer(user: "x-access-token", password: e2eToken)
        let placeholder = try Self.placeholder("ghp_{random:36}")
        let proxy = try ProxyProcess(
            config: staticTokenConfig(
                upstream: "http://localhost:\(server.nginx.port)", admin: true, logLevel: "debug",
                more: "inject: {basic_username: x-access-token}\nplaceholder: {value_env: GIT_PLACEHOLDER}"),
            environment: ["E2E_TOKEN": e2eToken, "GIT_PLACEHOLDER": placeholder])
        let refs = "/repo.git/info/refs?service=git-upload-pack"

        let challenged = try curl([proxy.baseURL + refs])
        expectProxyError(challenged, status: 401, code: "placeholder_required")
        #expect(challenged.header("WWW-Authenticate") == "Basic realm=\"tokenproxy\"")
        expectProxyError(try curl(["-u", "x-access-token:\(e2eToken)", proxy.baseURL + refs]), status: 403, code: "placeholder_required")
        #expect(try curl(["-u", "x-access-token:\(placeholder)", proxy.baseURL + refs]).status == 200)
        // curl --anyauth sends the credentials after the challenge only, as git does.
        #expect(try curl(["--anyauth", "-u", "x-access-token:\(placeholder)", proxy.baseURL + refs]).status == 200)

        let withPlaceholder = proxy.baseURL.replacingOccurrences(of: "http://", with: "http://x-access-token:\(placeholder)@") + "/repo.git"
        let work = try TempDir(prefix: "git-work")
        let source = try GitHTTPServer.repository("source", in: work, readme: "from the sandbox\n")
        try GitHTTPServer.git(["push", "--quiet", withPlaceholder, "HEAD:refs/heads/main"], in: source)
        let clone = work.file("clone")
        try GitHTTPServer.git(["clone", "--quiet", withPlaceholder, clone])
        #expect(try String(contentsOfFile: clone + "/README", encoding: .utf8) == "from the sandbox\n")
        // Without the placeholder git gets nothing.
        #expect(throws: HarnessError.self) { try GitHTTPServer.git(["clone", "--quiet", proxy.baseURL + "/repo.git", work.file("refused")]) }

        let basic = Data("x-access-token:\(e2eToken)".utf8).base64EncodedString()
        let basicPlaceholder = Data("x-access-token:\(placeholder)".utf8).base64EncodedString()
        try Self.expectNoneLeaked([placeholder, e2eToken, basic, basicPlaceholder], proxy: proxy)
        try proxy.stopAndExpectCleanExit()
    }

    /// botocore signs with placeholder keys; the proxy takes the access key id, signs again with the
    /// real keys, and moto checks that signature.
    @Test func botocoreWithPlaceholderKeysIsSignedAgainWithTheRealOnes() throws {
        let moto = try MotoSigV4Server(prefix: "placeholder-moto")
        let keyID = try Self.placeholder("AKIA{random:24}")
        let fakeSecret = "sandbox-secret-that-signs-nothing-0123456789"
        let proxy = try ProxyProcess(
            config: """
                listen: 127.0.0.1:0
                upstream: \(moto.account.endpoint)
                workers: 1
                drain_timeout: 1s
                admin: {listen: 127.0.0.1:0}
                credentials: {type: aws, region: us-east-1, service: s3, source: environment}
                placeholder: {value_env: AWS_PLACEHOLDER}
                log: {level: debug, access_log: true}
                """,
            environment: [
                "AWS_ACCESS_KEY_ID": moto.account.access_key_id, "AWS_SECRET_ACCESS_KEY": moto.account.secret_access_key, "AWS_PLACEHOLDER": keyID,
            ])
        let bucket = "tp-placeholder-\(UInt32.random(in: 0...UInt32.max))"
        let script = """
            import boto3, botocore.exceptions, sys
            def client(key):
                return boto3.client("s3", region_name="us-east-1", endpoint_url=sys.argv[1], aws_access_key_id=key,
                                    aws_secret_access_key=sys.argv[4])
            s3 = client(sys.argv[2])
            s3.create_bucket(Bucket=sys.argv[3])
            s3.put_object(Bucket=sys.argv[3], Key="from-sandbox", Body=b"placeholder keys")
            print(s3.get_object(Bucket=sys.argv[3], Key="from-sandbox")["Body"].read().decode())
            try:
                client("AKIANOTTHEPLACEHOLDER0123456789").list_objects_v2(Bucket=sys.argv[3])
                print("other key: taken")
            except botocore.exceptions.ClientError as error:
                print("other key:", error.response["ResponseMetadata"]["HTTPStatusCode"])
            """
        let environment = childEnvironment(["AWS_CONFIG_FILE": "/nonexistent", "AWS_SHARED_CREDENTIALS_FILE": "/nonexistent"])
        let boto = try runCommand(
            ProcessInfo.processInfo.environment["PYTHON"] ?? "python3", arguments: ["-c", script, proxy.baseURL, keyID, bucket, fakeSecret],
            environment: environment, timeout: 120)
        #expect(boto.status == 0, "\(boto.output)")
        #expect(boto.stdout == "placeholder keys\nother key: 403\n", "\(boto.output)")
        // Unsigned: no placeholder at all.
        expectProxyError(try curl([proxy.baseURL + "/\(bucket)/from-sandbox"]), status: 403, code: "placeholder_required")
        try Self.expectNoneLeaked([keyID, fakeSecret, moto.account.access_key_id, moto.account.secret_access_key], proxy: proxy)
        try proxy.stopAndExpectCleanExit()
    }

    @Test func thePlaceholderCommandPrintsAFreshValueOrRefusesTheShape() throws {
        let binary = RepositoryPaths.tokenproxyBinary.path
        let made = try runCommand(binary, arguments: ["placeholder", "--shape", "sk-ant-api03-{random:64}AA"], timeout: 30)
        #expect(made.status == 0, "\(made.output)")
        let value = made.stdout.trimmingCharacters(in: .newlines)
        #expect(value.hasPrefix("sk-ant-api03-") && value.hasSuffix("AA") && value.count == 13 + 64 + 2)
        #expect(try Self.placeholder("x{random:22}") != Self.placeholder("x{random:22}"))
        for shape in ["sk-ant-api03-", "sk-{random:21}", "sk {random:30}", "a{random:30}b{random:30}"] {
            let refused = try runCommand(binary, arguments: ["placeholder", "--shape", shape], timeout: 30)
            #expect(refused.status == 2, "\(shape)")
            #expect(refused.stdout.isEmpty, "\(shape)")
            #expect(!refused.stderr.isEmpty, "\(shape)")
        }
    }

    @Test func checkRefusesAShortPlaceholderOneEqualToTheTokenAndAnUnsetVariable() throws {
        let folder = try TempDir(prefix: "placeholder-check")
        let config = try folder.write(
            "tokenproxy.yaml",
            staticTokenConfig(upstream: "http://127.0.0.1:9", more: "placeholder: {value_env: SANDBOX_PLACEHOLDER}"))
        func check(_ environment: [String: String]) throws -> CommandResult {
            try runCommand(
                RepositoryPaths.tokenproxyBinary.path, arguments: ["check", "--config", config], environment: childEnvironment(environment), timeout: 30)
        }
        let short = try check(["E2E_TOKEN": e2eToken, "SANDBOX_PLACEHOLDER": "sk-short"])
        #expect(short.status == 2)
        #expect(short.stderr.contains("placeholder.value_env") && short.stderr.contains("at least 22"))
        let same = try check(["E2E_TOKEN": e2eToken, "SANDBOX_PLACEHOLDER": e2eToken])
        #expect(same.status == 2)
        #expect(same.stderr.contains("real credential") && !same.stderr.contains(e2eToken))
        let unset = try check(["E2E_TOKEN": e2eToken])
        #expect(unset.status == 2)
        #expect(unset.stderr.contains("SANDBOX_PLACEHOLDER is not set"))
        let good = try Self.placeholder("sk-{random:40}")
        let fine = try check(["E2E_TOKEN": e2eToken, "SANDBOX_PLACEHOLDER": good])
        #expect(fine.status == 0, "\(fine.output)")
        #expect(fine.stdout.contains("placeholder: ****** (from env SANDBOX_PLACEHOLDER)"))
        #expect(!fine.output.contains(good))
    }
}
