import Foundation
import Testing

/// A tokenproxy whose listener speaks TLS (CONTRACT.md "HTTPS for clients", a TLS listener) in
/// front of the echo upstream, with a server certificate from a throwaway CA in the proxy's folder
/// (`tls/server.pem`, `tls/server-key.pem`).
public final class TLSListenerFixture: Sendable {
    public let ca: TestCA
    public let upstream: PythonServer
    public let proxy: ProxyProcess
    public let certificate: TestCA.Issued

    /// - Parameters:
    ///   - clientCA: the listener's `client_ca_file` (mTLS), when set.
    ///   - logLevel: `info` where a test counts log lines.
    ///   - more: more top-level YAML (e.g. `audit:`).
    public init(clientCA: String? = nil, logLevel: String = "debug", more: String = "") throws {
        ca = try TestCA()
        upstream = try PythonServer("echo_upstream")
        let directory = try TempDir(prefix: "tls-listener")
        certificate = try ca.issue(file: "tls/server", in: directory)
        proxy = try ProxyProcess(
            config: staticTokenConfig(
                upstream: "\(upstream.baseURL)/base", drainTimeout: "2s", logLevel: logLevel,
                more: "tls:\n  cert_file: ./tls/server.pem\n  key_file: ./tls/server-key.pem" + (clientCA.map { "\n  client_ca_file: \($0)" } ?? "")
                    + (more.isEmpty ? "" : "\n" + more)),
            directory: directory, environment: ["E2E_TOKEN": e2eToken])
    }

    /// `https://127.0.0.1:PORT<path>`
    public func url(_ path: String) -> String { "https://127.0.0.1:\(proxy.port)\(path)" }

    /// curl trusting the test CA.
    public func curl(_ arguments: [String]) throws -> CurlResult {
        try TestSupport.curl(["--cacert", ca.certificate] + arguments)
    }

    /// How many requests the upstream has had for `path` (as it received it).
    public func upstreamCount(_ path: String) throws -> Int {
        try #require(try TestSupport.curl([upstream.baseURL + "/count?path=" + path]).json?["count"] as? Int)
    }

    public func finish(sourceLocation: SourceLocation = #_sourceLocation) throws {
        proxy.terminate(signal: SIGTERM)
        #expect(try proxy.waitForExit(timeout: 15) == 0, "\(proxy.stderr.suffix(2000))", sourceLocation: sourceLocation)
        #expect(!proxy.stderr.contains(e2eToken), "the token appeared in tokenproxy's stderr", sourceLocation: sourceLocation)
        upstream.stop()
    }
}

/// A tokenproxy with `forward_proxy` and `host` routes (CONTRACT.md "HTTPS for clients", a forward
/// proxy), each route's upstream a local plain-HTTP server; the names (`*.example.test`) resolve
/// nowhere, so a client reaches them only through the proxy. The CA the clients trust is what
/// `tokenproxy ca --config` prints.
public final class ForwardProxyFixture: Sendable {
    public let proxy: ProxyProcess
    /// `tokenproxy ca`'s output, written to a file of its own.
    public let caFile: String
    private let caFolder: TempDir
    /// The environment `serve` runs with (the routes' secrets).
    public let environment: [String: String]

    /// One route of the file.
    public struct Route {
        public var name: String
        public var host: String
        public var upstream: String
        /// More lines of the route (each indented by 4 spaces), e.g. `inject`, `access`.
        public var extra: String
        /// The route's credentials (flow YAML).
        public var credentials: String

        public init(
            name: String, host: String, upstream: String, extra: String = "", credentials: String = "{type: static, token_env: E2E_TOKEN}"
        ) {
            self.name = name
            self.host = host
            self.upstream = upstream
            self.extra = extra
            self.credentials = credentials
        }
    }

    /// - Parameters:
    ///   - forwardProxy: the lines of the `forward_proxy:` section (indented by 2).
    ///   - top: more top-level YAML (e.g. `access:`).
    ///   - drainTimeout: `drain_timeout`, how long a SIGTERM lets requests in flight finish.
    public init(
        routes: [Route], forwardProxy: String = "  other_hosts: refuse", top: String = "", drainTimeout: String = "2s",
        environment: [String: String] = [:]
    ) throws {
        let routeLines = routes.map { route in
            """
              - name: \(route.name)
                match: {host: \(route.host)}
                upstream: \(route.upstream)
                credentials: \(route.credentials)
            """ + (route.extra.isEmpty ? "" : "\n" + route.extra)
        }
        var env = environment
        env["E2E_TOKEN"] = e2eToken
        proxy = try ProxyProcess(
            config: """
                listen: 127.0.0.1:0
                workers: 1
                drain_timeout: \(drainTimeout)
                log:
                  level: debug
                  access_log: true
                forward_proxy:
                \(forwardProxy)
                \(top)
                routes:
                \(routeLines.joined(separator: "\n"))
                """, environment: env)
        // `ca` reads the whole file, so it needs the environment `serve` had.
        let printed = try ProxyProcess.run(args: ["ca", "--config", proxy.configPath], env: env)
        self.environment = env
        guard printed.status == 0, printed.stdout.contains("-----BEGIN CERTIFICATE-----") else {
            throw HarnessError("tokenproxy ca: status \(printed.status): \(printed.output)")
        }
        #expect(!printed.stdout.contains("PRIVATE KEY"), "tokenproxy ca printed a key")
        caFolder = try TempDir(prefix: "forward-proxy-ca")
        caFile = try caFolder.write("ca.pem", printed.stdout)
    }

    /// `http://127.0.0.1:PORT`, for `HTTPS_PROXY`.
    public var proxyURL: String { proxy.baseURL }

    /// curl with `HTTPS_PROXY` and `CURL_CA_BUNDLE`, as a user's shell would run it.
    public func curl(_ arguments: [String], timeout: TimeInterval = 30) throws -> CurlResult {
        try TestSupport.curl(arguments, environment: ["HTTPS_PROXY": proxyURL, "CURL_CA_BUNDLE": caFile], timeout: timeout)
    }

    /// One connection through a CONNECT to `target` (default port 443), with the SNI of its host.
    /// `verify: false`: the client accepts any certificate, so only the proxy can fail the handshake.
    public func tunnel(
        _ target: String, serverName: String? = nil, verify: Bool = true, connectHeaders: [String] = [], requests: [TLSClient.Request]
    ) throws -> TLSClient.Outcome {
        try TLSClient.exchange(
            port: proxy.port, connect: target, connectHeaders: connectHeaders, serverName: serverName, caFile: verify ? caFile : nil,
            verify: verify, requests: requests)
    }

    /// A CONNECT alone: its answer (and body when refused).
    public func connect(_ target: String, headers: [String] = []) throws -> TLSClient.Outcome {
        try TLSClient.exchange(port: proxy.port, connect: target, connectHeaders: headers, plain: true)
    }

    public func finish(sourceLocation: SourceLocation = #_sourceLocation) throws {
        proxy.terminate(signal: SIGTERM)
        #expect(try proxy.waitForExit(timeout: 15) == 0, "\(proxy.stderr.suffix(2000))", sourceLocation: sourceLocation)
        #expect(!proxy.stderr.contains(e2eToken), "the token appeared in tokenproxy's stderr", sourceLocation: sourceLocation)
        #expect(!proxy.stderr.contains("PRIVATE KEY"), "a key appeared in tokenproxy's stderr", sourceLocation: sourceLocation)
    }
}

/// A JSON answer of the echo upstream that came back through a tunnel.
public func echo(_ body: String) throws -> Echo { try Echo(Array(body.utf8)) }

/// The contract's error body on a response read by tls_client.py.
public func expectProxyError(
    _ response: TLSClient.Response?, status: Int, code: String, sourceLocation: SourceLocation = #_sourceLocation
) {
    #expect(response?.status == status, "\(String(describing: response))", sourceLocation: sourceLocation)
    #expect(response?.header("Content-Type")?.lowercased().hasPrefix("application/json") == true, sourceLocation: sourceLocation)
    #expect(response?.json?["error"] as? String == code, "\(String(describing: response?.body))", sourceLocation: sourceLocation)
}

/// The contract's error body on a refused CONNECT.
public func expectRefusedConnect(
    _ outcome: TLSClient.Outcome, status: Int, code: String, sourceLocation: SourceLocation = #_sourceLocation
) {
    #expect(outcome.connectStatus == status, "\(outcome)", sourceLocation: sourceLocation)
    #expect(outcome.connectJSON?["error"] as? String == code, "\(outcome)", sourceLocation: sourceLocation)
    #expect(outcome.connectJSON?["message"] is String, "\(outcome)", sourceLocation: sourceLocation)
}
