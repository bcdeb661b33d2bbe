import Foundation

/// A tokenproxy with the static token (`e2eToken`) and an admin listener, in front of
/// `credential_echo.py`, the upstream that hands the credential it received back in a field or a
/// body (CONTRACT.md "Programs in a sandbox", "Scrubbing").
public final class ScrubFixture: UpstreamFixture, Sendable {
    public let upstream: PythonServer
    public let proxy: ProxyProcess

    /// `extra`: more top-level YAML (`scrub: true`, an `inject`); `credentials`: the section's lines
    /// in place of the static token's, with `environment` for the proxy.
    public init(extra: String, credentials: String? = nil, environment: [String: String] = [:]) throws {
        let upstream = try PythonServer("credential_echo")
        self.upstream = upstream
        var config = staticTokenConfig(upstream: upstream.baseURL, drainTimeout: "2s", admin: true, logLevel: "debug", more: extra)
        if let credentials {
            config = proxyConfig(upstream: upstream.baseURL, credentials: credentials, more: "admin: {listen: 127.0.0.1:0}\n" + extra)
        }
        proxy = try ProxyProcess(config: config, environment: environment.merging(["E2E_TOKEN": e2eToken]) { own, _ in own })
    }

    /// `tokenproxy_scrubbed_total{route="default"}` (nil: no such series).
    public func scrubbedTotal() throws -> Double? {
        try metric(proxy, "tokenproxy_scrubbed_total{route=\"default\"}")
    }
}
