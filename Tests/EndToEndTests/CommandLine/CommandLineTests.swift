import Foundation
import TestSupport
import Testing

/// CONTRACT.md, "The command line": `check`, signals, and what reaches the logs.
@Suite(.tags(.endToEnd), .timeLimit(.minutes(35))) struct CommandLineTests {
    @Test func checkAcceptsAValidConfiguration() throws {
        let result = try checkStaticConfig()
        #expect(result.status == 0, "\(result.output)")
        #expect(!result.output.contains(e2eToken))
    }

    @Test(arguments: [("upstream_tiemout: 5s", "upstream_tiemout"), ("limits:\n  max_hedaer_bytes: 1KiB", "max_hedaer_bytes")])
    func checkRejectsAnUnknownKeyAtAnyDepthAndNamesIt(more: String, key: String) throws {
        let result = try checkStaticConfig(more: more)
        #expect(result.status == 2, "\(result.output)")
        #expect(result.output.contains(key), "\(result.output)")
    }

    @Test func checkMasksSecrets() throws {
        let dir = try TempDir()
        let proxyKey = "proxy-key-\(UUID().uuidString)"
        let clientSecret = "client-secret-\(UUID().uuidString)"
        try dir.write("token.txt", e2eToken + "\n", mode: 0o600)
        let staticConfig = try dir.write(
            "static.yaml",
            proxyConfig(
                upstream: "http://127.0.0.1:9/base", credentials: "type: static\ntoken_file: token.txt",
                more: "access:\n  require_header: X-Proxy-Key\n  require_value_env: PROXY_KEY"))
        let result = try ProxyProcess.run(args: ["check", "--config", staticConfig], env: ["PROXY_KEY": proxyKey])
        #expect(result.status == 0, "\(result.output)")
        #expect(!result.output.contains(e2eToken), "\(result.output)")
        #expect(!result.output.contains(proxyKey), "\(result.output)")

        let oauthConfig = try dir.write(
            "oauth.yaml",
            proxyConfig(
                upstream: "http://127.0.0.1:9/base",
                credentials: """
                    type: oauth2_client_credentials
                    token_url: http://127.0.0.1:9/oauth/token
                    client_id: my-client
                    client_secret: \(clientSecret)
                    """))
        let oauth = try ProxyProcess.run(args: ["check", "--config", oauthConfig])
        #expect(oauth.status == 0, "\(oauth.output)")
        #expect(!oauth.output.contains(clientSecret), "\(oauth.output)")
        #expect(oauth.output.contains("my-client"), "check should print what it resolved: \(oauth.output)")
    }

    @Test func checkReadsTheConfigPathFromTheEnvironment() throws {
        let dir = try TempDir()
        let config = try writeStaticConfig(in: dir, more: "bogus_key: 1")
        let result = try ProxyProcess.run(args: ["check"], env: ["TOKENPROXY_CONFIG": config, "E2E_TOKEN": e2eToken])
        #expect(result.status == 2, "\(result.output)")
        #expect(result.output.contains("bogus_key"))
    }

    @Test func badCommandLineExits2() throws {
        let result = try ProxyProcess.run(args: ["serve", "--no-such-flag"])
        #expect(result.status == 2, "\(result.output)")
    }

    @Test func helpWorks() throws {
        let result = try ProxyProcess.run(args: ["--help"])
        #expect(result.status == 0)
        #expect(result.output.contains("serve"))
        #expect(result.output.contains("check"))
    }

    @Test func serveWithABadConfigExits2() throws {
        let dir = try TempDir()
        let config = try dir.write(
            "tokenproxy.yaml", "listen: 127.0.0.1:0\nupstream: http://127.0.0.1:9\nnot_a_key: true\ncredentials:\n  type: static\n  token_env: E2E_TOKEN\n")
        let result = try ProxyProcess.run(args: ["serve", "--config", config], env: ["E2E_TOKEN": e2eToken], timeout: 20)
        #expect(result.status == 2, "\(result.output)")
        #expect(result.output.contains("not_a_key"))
    }

    @Test func sigtermStopsTheServerWithStatus0() throws {
        let f = try Fixture()
        #expect(try curl([f.url("/before")]).status == 200)
        f.proxy.terminate(signal: SIGTERM)
        #expect(try f.proxy.waitForExit(timeout: 15) == 0, "\(f.proxy.stderr)")
    }

    @Test func sigintStopsTheServerWithStatus0() throws {
        let f = try Fixture()
        f.proxy.terminate(signal: SIGINT)
        #expect(try f.proxy.waitForExit(timeout: 15) == 0, "\(f.proxy.stderr)")
    }

    @Test func listeningLineNamesTheRealPort() throws {
        let f = try Fixture()
        #expect(f.proxy.port > 0)
        #expect(f.proxy.address == "127.0.0.1:\(f.proxy.port)")
        try f.finish()
    }

    @Test func adminListenerIsLoggedAndServesHealth() throws {
        let f = try Fixture(extra: "admin:\n  listen: 127.0.0.1:0")
        let adminURL = try #require(f.proxy.adminURL)
        #expect(f.proxy.adminPort != f.proxy.port)
        #expect(try curl([adminURL + "/healthz"]).status == 200)
        #expect(try curl([adminURL + "/readyz"]).status == 200)
        let metrics = try curl([adminURL + "/metrics"])
        #expect(metrics.status == 200)
        #expect(metrics.bodyString.contains("tokenproxy_requests_total"))
        #expect(!metrics.bodyString.contains(e2eToken))
        try f.finish()
    }

    @Test func noTokenEverReachesStderr() throws {
        let f = try Fixture()
        // Exercise the paths that log: ordinary requests, errors, a client credential, a 401.
        _ = try curl([f.url("/a?token=\(e2eToken.prefix(4))")])
        _ = try curl(["-H", "Authorization: Bearer \(e2eToken)", f.url("/b")])
        _ = try curl(["-H", "Host: evil.example", f.url("/c")])
        _ = try curl([f.url("/status/500")])
        _ = try curl([f.url("/auth?token=wrong")])
        _ = try curl([f.url("/garbage")])
        let client = try f.connect()
        try client.send("GET /../x HTTP/1.1\r\nHost: \(f.host)\r\nAuthorization: Bearer \(e2eToken)\r\n\r\n")
        _ = try? client.readResponse()
        f.proxy.terminate(signal: SIGTERM)
        _ = try f.proxy.waitForExit(timeout: 15)
        #expect(!f.proxy.stderr.isEmpty, "tokenproxy logged nothing at debug level")
        #expect(!f.proxy.stderr.contains(e2eToken), "the token appeared in stderr")
        #expect(!f.proxy.stdout.contains(e2eToken), "the token appeared in stdout")
    }
}

/// Issue 12 point 8: `check` lists every error of the file; `--version` names tokenproxy's version and libcurl's.
@Suite(.tags(.endToEnd), .timeLimit(.minutes(35))) struct CommandLineListingTests {
    @Test func checkListsEveryErrorOfTheFileWithItsKeyAndReason() throws {
        let result = try checkStaticConfig(more: "upstream_tiemout: 5s\nlimits:\n  max_connections: 0")
        #expect(result.status == 2, "\(result.output)")
        #expect(result.output.contains("upstream_tiemout: unknown key"), "\(result.output)")
        #expect(result.output.contains("limits.max_connections: must be 1 or more"), "\(result.output)")
        #expect(!result.output.contains("configuration ok"), "\(result.output)")
    }

    @Test func versionPrintsTokenproxysVersionAndTheLibcurlItRunsWith() throws {
        let result = try ProxyProcess.run(args: ["--version"])
        #expect(result.status == 0, "\(result.output)")
        let lines = result.stdout.split(separator: "\n").map(String.init)
        let first = try #require(lines.first)
        let version = first.split(separator: " ")
        #expect(version.count == 2 && version[0] == "tokenproxy", "\(first)")
        #expect(version.last.map { $0.split(separator: ".").count == 3 && $0.split(separator: ".").allSatisfy { Int($0) != nil } } == true, "\(first)")
        // The curl command line tool reports the same system libcurl.
        let curlVersion = try runCommand("curl", arguments: ["--version"])
        let libcurl = try #require(curlVersion.stdout.split(separator: " ").first { $0.hasPrefix("libcurl/") })
        #expect(lines.count >= 2 && lines[1].hasPrefix(String(libcurl)), "\(result.stdout)")
    }
}

/// Issue 39 point 13: `status` of a route with a fixed credential exits 0 and says `session: not
/// needed`; `session: none` (which docs/HOW-DO-I.md's 401 guide reads as "log in") is said only of a route
/// that needs a login.
@Suite(.tags(.endToEnd), .timeLimit(.minutes(35))) struct StatusCommandTests {
    func json(_ text: String) -> [String: Any]? {
        try? JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any]
    }

    @Test func aStaticTokenNeedsNoSession() throws {
        let dir = try TempDir()
        let config = try writeStaticConfig(in: dir)
        let text = try ProxyProcess.run(args: ["status", "--config", config], env: ["E2E_TOKEN": e2eToken])
        #expect(text.status == 0, "\(text.output)")
        #expect(text.stdout.contains("session: not needed"), "\(text.output)")
        let object = try ProxyProcess.run(args: ["status", "--config", config, "--json"], env: ["E2E_TOKEN": e2eToken])
        #expect(object.status == 0, "\(object.output)")
        let fields = try #require(json(object.stdout), "\(object.output)")
        #expect(fields["kind"] as? String == "static")
        #expect(fields["session"] as? String == "not needed")
        #expect(!text.output.contains(e2eToken) && !object.output.contains(e2eToken))
    }

    @Test func onlyARouteThatNeedsALoginSaysNone() throws {
        let dir = try TempDir()
        let config = try dir.write(
            "tokenproxy.yaml",
            """
            listen: 127.0.0.1:0
            store:
              path: ./state/tokens.json
            routes:
              - name: fixed
                match: {path_prefix: /fixed/}
                upstream: http://127.0.0.1:9
                credentials: {type: static, token_env: E2E_TOKEN}
              - name: keys
                match: {path_prefix: /keys/}
                upstream: http://127.0.0.1:9
                credentials: {type: aws, region: us-east-1, service: execute-api, source: environment}
              - name: machine
                match: {path_prefix: /machine/}
                upstream: http://127.0.0.1:9
                credentials: {type: oauth2_client_credentials, token_url: "http://127.0.0.1:9/token", client_id: app, client_secret_env: APP_SECRET}
              - name: person
                match: {path_prefix: /person/}
                upstream: http://127.0.0.1:9
                credentials: {type: oauth2_refresh, token_url: "http://127.0.0.1:9/token", client_id: app, client_secret_env: APP_SECRET}
            """)
        let env = [
            "E2E_TOKEN": e2eToken, "APP_SECRET": "app-secret", "AWS_ACCESS_KEY_ID": "AKIDSTATUS", "AWS_SECRET_ACCESS_KEY": "status/secret",
        ]
        func status(_ arguments: [String]) throws -> CommandResult {
            try ProxyProcess.run(args: ["status", "--config", config] + arguments, env: env)
        }
        // Every route: the one that needs a login has none, so the exit status is 1.
        let all = try status(["--json"])
        #expect(all.status == 1, "\(all.output)")
        let routes = try #require(json(all.stdout), "\(all.output)")
        for name in ["fixed", "keys", "machine"] {
            #expect((routes[name] as? [String: Any])?["session"] as? String == "not needed", "\(name): \(all.stdout)")
        }
        #expect((routes["person"] as? [String: Any])?["session"] as? String == "none", "\(all.stdout)")
        let text = try status([])
        #expect(text.status == 1, "\(text.output)")
        #expect(text.stdout.contains("route fixed:\n  kind: static\n  session: not needed\n"), "\(text.stdout)")
        #expect(text.stdout.contains("route person:\n  kind: oauth2_refresh\n  session: none\n"), "\(text.stdout)")
        // One route at a time: a route that needs no login is usable as it is.
        for name in ["fixed", "keys", "machine"] {
            let one = try status(["--route", name])
            #expect(one.status == 0, "\(name): \(one.output)")
            #expect(one.stdout.contains("session: not needed"), "\(name): \(one.stdout)")
        }
        let person = try status(["--route", "person"])
        #expect(person.status == 1, "\(person.output)")
        #expect(person.stdout.contains("session: none"), "\(person.stdout)")
        for result in [all, text, person] { #expect(!result.output.contains(e2eToken) && !result.output.contains("status/secret")) }
    }
}

/// `tokenproxy.yaml` in `dir`: the static token configuration (`staticTokenConfig`) towards a closed
/// port, with `more` top-level lines after it; its path.
private func writeStaticConfig(in dir: TempDir, more: String = "") throws -> String {
    try dir.write("tokenproxy.yaml", staticTokenConfig(upstream: "http://127.0.0.1:9/base", workers: nil, more: more))
}

/// `tokenproxy check` of that configuration.
private func checkStaticConfig(more: String = "") throws -> CommandResult {
    let dir = try TempDir()
    let config = try writeStaticConfig(in: dir, more: more)
    return try ProxyProcess.run(args: ["check", "--config", config], env: ["E2E_TOKEN": e2eToken])
}
