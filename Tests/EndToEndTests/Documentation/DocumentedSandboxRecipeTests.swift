import Foundation
import TestSupport
import Testing

extension DocumentedRecipeTests {
    /// docs/SANDBOXES.md: curl in a sandbox sends the Anthropic placeholder as `x-api-key` through the
    /// forward proxy (HTTPS_PROXY, the proxy's CA), as the page shows it. The route's upstream is the
    /// echo server, which answers with the fields it received: the real key went upstream, and the
    /// answer that reached the sandbox has it scrubbed to as many `*` (docs/CONTRACT.md, "Programs in
    /// a sandbox"). Neither the key nor the placeholder reaches tokenproxy's log.
    @Test func sandboxCurl() throws {
        let upstream = try PythonServer("echo_upstream")
        defer { upstream.stop() }
        // The shape of `tokenproxy placeholder --shape 'sk-ant-api03-{random:64}'`.
        let placeholder = "sk-ant-api03-" + (UUID().uuidString + UUID().uuidString).replacingOccurrences(of: "-", with: "")
        let f = try ForwardProxyFixture(
            routes: [
                .init(
                    name: "anthropic", host: "api.anthropic.com", upstream: upstream.baseURL,
                    extra: """
                            inject: {header: x-api-key, format: "{token}"}
                            placeholder:
                              value_env: ANTHROPIC_PLACEHOLDER
                        """)
            ], environment: ["ANTHROPIC_PLACEHOLDER": placeholder])
        let work = try TempDir(prefix: "recipe-sandbox")
        let result = try Self.run(
            try Self.recipe("sandbox-curl"), proxy: nil, in: work.path,
            environment: [
                "HTTPS_PROXY": f.proxyURL, "CURL_CA_BUNDLE": f.caFile, "NO_PROXY": "", "no_proxy": "", "ANTHROPIC_API_KEY": placeholder,
            ])
        #expect(result.status == 0, "\(result.output)")
        let seen = try echo(result.stdout)
        #expect(seen.method == "POST" && seen.path == "/v1/messages", "\(result.stdout)")
        #expect(seen.value("anthropic-version") == "2023-06-01")
        #expect(seen.values("x-api-key") == [String(repeating: "*", count: e2eToken.count)], "\(seen.headers)")
        #expect(!result.stdout.contains(e2eToken) && !result.stdout.contains(placeholder), "\(result.stdout)")
        // Without the placeholder the route refuses, and nothing goes upstream.
        let refused = try f.curl(["-X", "POST", "https://api.anthropic.com/v1/messages"])
        #expect(refused.status == 403 && refused.json?["error"] as? String == "placeholder_required", "\(refused.bodyString)")
        try f.finish()
        #expect(!f.proxy.stderr.contains(placeholder), "the placeholder appeared in tokenproxy's stderr")
    }
}
