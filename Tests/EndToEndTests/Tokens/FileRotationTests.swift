import Foundation
import TestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// CONTRACT.md "Reload without a restart": files named by `*_file` keys are read again when they
/// change, without a reload, following symlinks the way a Kubernetes Secret volume swaps `..data`.
@Suite("Rotated credential files, end to end", .serialized, .tags(.endToEnd), .timeLimit(.minutes(35)))
struct FileRotationTests {
    /// A Kubernetes-style secret volume: `NAME -> ..data/NAME`, `..data -> ..<version>`; `publish`
    /// writes a new version folder and swaps `..data` to it with one rename, as the kubelet does.
    struct SecretVolume {
        let path: String
        private var version = 0

        init(in dir: TempDir) throws {
            path = dir.file("secrets")
            try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        }

        /// Publishes `files` (name → content) as the volume's new content.
        mutating func publish(_ files: [String: String], links: [String]) throws {
            version += 1
            let folder = "..v\(version)"
            try FileManager.default.createDirectory(atPath: "\(path)/\(folder)", withIntermediateDirectories: true)
            for (name, content) in files {
                try content.write(toFile: "\(path)/\(folder)/\(name)", atomically: false, encoding: .utf8)
            }
            let temporary = "\(path)/..data_tmp"
            unlink(temporary)
            #expect(symlink(folder, temporary) == 0)
            #expect(rename(temporary, "\(path)/..data") == 0)
            for name in links where (try? FileManager.default.destinationOfSymbolicLink(atPath: "\(path)/\(name)")) == nil {
                #expect(symlink("..data/\(name)", "\(path)/\(name)") == 0)
            }
        }
    }

    @Test("a rotated client secret and require_value file take effect without a reload; an empty or vanished file keeps the last good value")
    func rotatedFilesTakeEffect() throws {
        // The identity provider knows only the new secret.
        let life = try Lifecycle(idpArguments: ["--access-ttl", "3600"], type: "oauth2_client_credentials")
        defer { life.stop() }
        var volume = try SecretVolume(in: life.dir)
        let names = ["client-secret", "proxy-key"]
        try volume.publish(["client-secret": "old-secret-value", "proxy-key": "key-one"], links: names)
        let config = """
            listen: 127.0.0.1:0
            upstream: \(life.api.baseURL)
            workers: 2
            drain_timeout: 2s
            credentials:
              type: oauth2_client_credentials
              token_url: \(life.idp.baseURL)/oauth/token
              client_id: app
              client_secret_file: ./secrets/client-secret
            access:
              require_header: X-Proxy-Key
              require_value_file: ./secrets/proxy-key
            limits:
              refresh_wait: 5s
            """
        let proxy = try ProxyProcess(config: config, directory: life.dir)
        func request(key: String) throws -> Int {
            let client = try RawHTTPClient(port: proxy.port, timeout: 30)
            defer { client.close() }
            try client.send(rawRequest("GET", "/data", host: proxy.address, headers: [("X-Proxy-Key", key), ("Connection", "close")]))
            return try client.readResponse(method: "GET").status
        }
        #expect(try request(key: "key-one") == 503, "the provider refuses the old secret")
        #expect(try life.idpCalls("client_credentials") == 0)

        // Both files rotate in one ..data swap: the new secret and the new key are read, no reload.
        try volume.publish(["client-secret": life.clientSecret, "proxy-key": "key-two"], links: names)
        #expect(within(15) { (try? request(key: "key-two")) == 200 }, "\(proxy.stderr)")
        #expect(try request(key: "key-one") == 403)
        #expect(try life.idpCalls("client_credentials") == 1)

        // An empty file, then a vanished one: the last good values stay, with a warning.
        try volume.publish(["client-secret": "", "proxy-key": "key-two"], links: names)
        #expect(proxy.waitForStderr(containing: "keeping the last good value", timeout: 15))
        #expect(try request(key: "key-two") == 200)
        try volume.publish(["proxy-key": "key-two"], links: names)
        #expect(proxy.waitForStderr(containing: "no such file", timeout: 15))
        #expect(try request(key: "key-two") == 200)
        #expect(try life.idpCalls("client_credentials") == 1, "the token in use is kept")
        #expect(!proxy.stderr.contains("configuration reloaded"), "a secret file is not a reload")
        try proxy.stopAndExpectCleanExit()
        #expect(!proxy.stderr.contains(life.clientSecret))
    }

    @Test("watch_config: a ConfigMap-style ..data swap of the configuration file is reloaded; an invalid one is refused and counted")
    func watchedConfigurationFollowsTheSymlinkSwap() throws {
        let upstream = try PythonServer("echo_upstream")
        defer { upstream.stop() }
        let dir = try TempDir(prefix: "tokenproxy-watch")
        var volume = try SecretVolume(in: dir)
        func file(_ routes: String) -> String {
            """
            listen: 127.0.0.1:0
            workers: 1
            drain_timeout: 2s
            watch_config: true
            admin:
              listen: 127.0.0.1:0
            routes:
            \(routes)
            """
        }
        let one = "  - {name: one, match: {path_prefix: /one/}, upstream: \"\(upstream.baseURL)\", credentials: {type: static, token_env: W_TOKEN}}"
        let two = "  - {name: two, match: {path_prefix: /two/}, upstream: \"\(upstream.baseURL)\", credentials: {type: static, token_env: W_TOKEN}}"
        try volume.publish(["tokenproxy.yaml": file(one)], links: ["tokenproxy.yaml"])
        let proxy = try ProxyProcess(
            config: "", directory: dir, environment: ["W_TOKEN": "watch-token"], expectAdmin: true,
            arguments: ["serve", "--config", "\(volume.path)/tokenproxy.yaml"])
        func status(_ path: String) -> Int {
            (try? curl([proxy.baseURL + path]).status) ?? -1
        }
        #expect(status("/one/x") == 200)
        #expect(status("/two/x") == 404)

        try volume.publish(["tokenproxy.yaml": file(one + "\n" + two)], links: ["tokenproxy.yaml"])
        #expect(within(15) { status("/two/x") == 200 }, "\(proxy.stderr)")
        #expect(status("/one/x") == 200)

        try volume.publish(["tokenproxy.yaml": file(one + "\n" + two + "\n  - {name: one}")], links: ["tokenproxy.yaml"])
        #expect(proxy.waitForStderr(containing: "reload refused", timeout: 15))
        #expect(status("/two/x") == 200, "an invalid file changes nothing")
        let metrics = try curl(["http://\(try #require(proxy.adminAddress))/metrics"]).bodyString
        #expect(metrics.contains(#"tokenproxy_config_reloads_total{outcome="failed"} 1"#))
        #expect(metrics.contains(#"tokenproxy_config_reloads_total{outcome="success"} 1"#))
        try proxy.stopAndExpectCleanExit()
    }
}
