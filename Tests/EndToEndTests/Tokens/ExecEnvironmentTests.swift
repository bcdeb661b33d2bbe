import Foundation
import TestSupport
import Testing

/// An `exec` token command gets the proxy's environment without the variables that `*_env` keys
/// name: it needs none of those secrets (issue 21).
@Suite(.tags(.endToEnd), .timeLimit(.minutes(35))) struct ExecEnvironmentTests {
    @Test func anExecCommandInheritsNoSecretNamedByAnEnvKey() throws {
        let upstream = try PythonServer("echo_upstream")
        let dir = try TempDir(prefix: "tokenproxy-exec-env")
        let script = try dir.write(
            "get-token.sh", "#!/bin/sh\nprintf 'tok-%s-%s-%s\\n' \"${PROXY_KEY_SECRET:-none}\" \"${UNUSED_SECRET:-none}\" \"${KEPT_VARIABLE:-none}\"\n",
            mode: 0o755)
        let proxy = try ProxyProcess(
            config: """
                listen: 127.0.0.1:0
                upstream: \(upstream.baseURL)
                credentials:
                  type: exec
                  command: [\(script)]
                  client_secret_env: UNUSED_SECRET
                access:
                  require_header: X-Proxy-Key
                  require_value_env: PROXY_KEY_SECRET
                """, directory: dir,
            environment: ["PROXY_KEY_SECRET": "pk-value", "UNUSED_SECRET": "unused-value", "KEPT_VARIABLE": "kept"])
        let answer = try curl(["-H", "X-Proxy-Key: pk-value", proxy.baseURL + "/echo"])
        #expect(answer.status == 200)
        let headers = try #require(answer.json?["headers"] as? [[String]])
        let authorization = headers.first { $0.first?.lowercased() == "authorization" }?.last
        #expect(authorization == "Bearer tok-none-none-kept")
    }
}
