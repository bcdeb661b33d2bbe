import Foundation
import TestSupport
import Testing

/// CONTRACT.md "Programs in a sandbox", "Placeholders" and "Scrubbing", with Node as the sandboxed
/// program: `Tests/servers/node_agent_sdk.mjs` calls a model API as an agent SDK does (Node's own
/// fetch), holding only a placeholder, against the echo upstream. With its route's placeholder the
/// upstream receives the real key and echoes it, and Node reads stars in its place; with any other
/// value Node gets 403 `placeholder_required` and nothing reaches the upstream.
@Suite(.tags(.endToEnd), .timeLimit(.minutes(10))) struct NodeAgentTests {
    /// What Node printed: the answer's status and text, or why the call failed.
    struct NodeRun {
        let status: Int
        let body: String
        let stdout: String

        init(style: String, baseURL: String, key: String) throws {
            let script = RepositoryPaths.servers.appendingPathComponent("node_agent_sdk.mjs").path
            let run = try runCommand("node", arguments: [script, style, baseURL], environment: childEnvironment(["AGENT_API_KEY": key]), timeout: 60)
            guard run.status == 0, let printed = try? JSONSerialization.jsonObject(with: Data(run.stdout.utf8)) as? [String: Any] else {
                throw HarnessError("node failed: \(run.output)")
            }
            guard printed["error"] is NSNull else { throw HarnessError("node's call failed: \(run.stdout)") }
            status = printed["status"] as? Int ?? 0
            body = printed["body"] as? String ?? ""
            stdout = run.stdout
        }
    }

    /// `style`: the SDK's way of sending its key (`x-api-key`, or `Authorization: Bearer`); `field`:
    /// the field the upstream receives it in, and `format` how the real key is written there.
    @Test(arguments: [("anthropic", "x-api-key", "{}"), ("openai", "Authorization", "Bearer {}")])
    func aNodeAgentReachesTheAPIOnlyWithItsPlaceholderAndReadsTheKeyScrubbed(style: String, field: String, format: String) throws {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/node") else {
            Issue.record("no node: run scripts/setup.sh")
            return
        }
        let placeholder = try PlaceholderTests.placeholder(style == "anthropic" ? "sk-ant-api03-{random:64}" : "sk-proj-{random:48}")
        let wrong = try PlaceholderTests.placeholder(style == "anthropic" ? "sk-ant-api03-{random:64}" : "sk-proj-{random:48}")
        let upstream = try PythonServer("echo_upstream")
        let inject = style == "anthropic" ? "\n    inject: {header: x-api-key, format: \"{token}\"}" : ""
        // Scrubbing is on by default on a route with a placeholder.
        let proxy = try ProxyProcess(
            config: """
                \(routesProxyTop)
                admin: {listen: 127.0.0.1:0}
                routes:
                  - name: \(style)
                    match: {path_prefix: /\(style)/}
                    upstream: \(upstream.baseURL)/api
                    credentials: {type: static, token_env: E2E_TOKEN}
                    placeholder: {value_env: AGENT_PLACEHOLDER}\(inject)
                """, environment: ["E2E_TOKEN": e2eToken, "AGENT_PLACEHOLDER": placeholder])
        let path = style == "anthropic" ? "/api/v1/messages" : "/api/v1/chat/completions"
        func upstreamCount() throws -> Int? { try curl([upstream.baseURL + "/count?path=\(path)"]).json?["count"] as? Int }

        // A value that is not the route's placeholder: refused, and the upstream never hears of it.
        let refused = try NodeRun(style: style, baseURL: proxy.baseURL + "/\(style)", key: wrong)
        #expect(refused.status == 403, "\(refused.stdout)")
        let error = try JSONSerialization.jsonObject(with: Data(refused.body.utf8)) as? [String: Any]
        #expect(error?["error"] as? String == "placeholder_required", "\(refused.body)")
        #expect(try upstreamCount() == 0, "a refused request reached the upstream")

        // The route's placeholder: the upstream receives the real key and echoes it back, and Node
        // reads as many stars in its place (the scrubber stars only the route's real credential).
        let served = try NodeRun(style: style, baseURL: proxy.baseURL + "/\(style)", key: placeholder)
        #expect(served.status == 200, "\(served.stdout)")
        let echoed = try Echo(Array(served.body.utf8))
        #expect(echoed.method == "POST" && echoed.path == path)
        let stars = String(repeating: "*", count: e2eToken.count)
        #expect(echoed.values(field) == [format.replacingOccurrences(of: "{}", with: stars)], "\(echoed.headers)")
        #expect(try upstreamCount() == 1)
        #expect(try metric(proxy, "tokenproxy_scrubbed_total{route=\"\(style)\"}") == 1)
        for secret in [e2eToken, placeholder, wrong] {
            #expect(!served.stdout.contains(secret) && !refused.stdout.contains(secret), "Node saw a secret or its placeholder")
        }

        try PlaceholderTests.expectNoneLeaked([placeholder, wrong, e2eToken], proxy: proxy)
        try proxy.stopAndExpectCleanExit()
        upstream.stop()
    }
}
