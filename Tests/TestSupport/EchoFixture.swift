import Foundation
import Testing

/// The static token every end-to-end proxy serves with (from the `E2E_TOKEN` environment variable).
/// Random per run, so a leak cannot hide behind a constant.
public let e2eToken = "e2e-static-token-\(UUID().uuidString.lowercased())"

/// An echo upstream and a tokenproxy in front of it.
public final class Fixture: UpstreamFixture, Sendable {
    public let upstream: PythonServer
    public let proxy: ProxyProcess
    public let basePath: String

    /// - Parameters:
    ///   - basePath: the upstream base URL's path.
    ///   - extra: more top-level YAML sections (must not repeat `listen`, `upstream`, `workers`,
    ///     `credentials`, `log`).
    ///   - upstreamURL: replaces the echo server's URL (e.g. an address nobody listens on).
    public init(basePath: String = "/base", extra: String = "", upstreamURL: String? = nil, environment: [String: String] = [:]) throws {
        let upstream = try PythonServer("echo_upstream")
        self.upstream = upstream
        self.basePath = basePath
        let config = staticTokenConfig(
            upstream: upstreamURL ?? upstream.baseURL + basePath, drainTimeout: "2s", logLevel: "debug", more: extra)
        var env = environment
        env["E2E_TOKEN"] = e2eToken
        proxy = try ProxyProcess(config: config, environment: env)
    }
}

/// A tokenproxy with the static token (`e2eToken`) in front of one Python upstream: what `Fixture`
/// and `FramingFixture` share.
public protocol UpstreamFixture {
    var upstream: PythonServer { get }
    var proxy: ProxyProcess { get }
}

extension UpstreamFixture {
    /// `http://127.0.0.1:PORT<path>` on the proxy.
    public func url(_ path: String) -> String { proxy.baseURL + path }

    /// The Host value a well-behaved local client sends.
    public var host: String { proxy.address }

    /// A raw connection to the proxy.
    public func connect(timeout: TimeInterval = 10) throws -> RawHTTPClient {
        try RawHTTPClient(port: proxy.port, timeout: timeout)
    }

    /// Sends `request` on a new connection and reads the answer; the connection stays open for more.
    public func exchange(
        _ request: [UInt8], method: String = "GET", timeout: TimeInterval = 10
    ) throws -> (client: RawHTTPClient, response: HTTPResponse) {
        let client = try connect(timeout: timeout)
        try client.send(request)
        return (client, try client.readResponse(method: method))
    }

    public func exchange(_ request: String, timeout: TimeInterval = 10) throws -> (client: RawHTTPClient, response: HTTPResponse) {
        try exchange(Array(request.utf8), timeout: timeout)
    }

    /// Stops the proxy with SIGTERM, expects exit status 0 and no token in its stderr.
    public func finish(sourceLocation: SourceLocation = #_sourceLocation) throws {
        proxy.terminate(signal: SIGTERM)
        let status = try proxy.waitForExit(timeout: 15)
        #expect(status == 0, "tokenproxy exit status after SIGTERM", sourceLocation: sourceLocation)
        #expect(!proxy.stderr.contains(e2eToken), "the token appeared in tokenproxy's stderr", sourceLocation: sourceLocation)
        upstream.stop()
    }
}

/// What the echo upstream says it received.
public struct Echo: Decodable {
    public let method: String
    public let path: String
    public let headers: [[String]]
    public let body_len: Int
    public let body_sha256: String
    public let body: String?
    /// The CONNECT target and fields when the request came through a tunnel the echo server made.
    public let tunnel: String?
    public let tunnel_headers: [[String]]?

    public init(_ bytes: [UInt8]) throws {
        do {
            self = try JSONDecoder().decode(Echo.self, from: Data(bytes))
        } catch {
            throw HarnessError("not an echo reply: \(String(decoding: bytes.prefix(500), as: UTF8.self))")
        }
    }

    /// Every value of a header the upstream received (case-insensitive name).
    public func values(_ name: String) -> [String] {
        headers.filter { $0.count == 2 && $0[0].caseInsensitiveCompare(name) == .orderedSame }.map { $0[1] }
    }

    public func value(_ name: String) -> String? { values(name).first }

    public func has(_ name: String) -> Bool { !values(name).isEmpty }

    /// The received header names, lowercased, in order.
    public var names: [String] { headers.compactMap { $0.first?.lowercased() } }
}

/// The contract's error body: `{"error": code, "message": ...}` with a JSON content type.
public func expectProxyError(
    _ response: HTTPResponse,
    status: Int,
    code: String,
    sourceLocation: SourceLocation = #_sourceLocation
) {
    #expect(response.status == status, "\(response)", sourceLocation: sourceLocation)
    #expect(response.header("Content-Type")?.lowercased().hasPrefix("application/json") == true, "\(response)", sourceLocation: sourceLocation)
    #expect(response.json?["error"] as? String == code, "\(response)", sourceLocation: sourceLocation)
    #expect(response.json?["message"] is String, "\(response)", sourceLocation: sourceLocation)
}

public func expectProxyError(
    _ response: CurlResult,
    status: Int,
    code: String,
    sourceLocation: SourceLocation = #_sourceLocation
) {
    #expect(response.status == status, "status \(response.status) body \(response.bodyString)", sourceLocation: sourceLocation)
    #expect(response.header("Content-Type")?.lowercased().hasPrefix("application/json") == true, sourceLocation: sourceLocation)
    #expect(response.json?["error"] as? String == code, "body \(response.bodyString)", sourceLocation: sourceLocation)
    #expect(response.json?["message"] is String, sourceLocation: sourceLocation)
}

/// A 200 whose body is the echo server's download pattern (framing_upstream.py's too), `count`
/// bytes of it.
public func expectEchoPattern(_ response: some ReceivedResponse, count: Int, sourceLocation: SourceLocation = #_sourceLocation) {
    #expect(response.status == 200, sourceLocation: sourceLocation)
    #expect(response.body.count == count, sourceLocation: sourceLocation)
    #expect(response.body == echoPattern(count: count), sourceLocation: sourceLocation)
}

/// The echo server's download pattern (must match `PATTERN` in echo_upstream.py).
public func echoPattern(count: Int) -> [UInt8] {
    let pattern = Array("0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ\n".utf8)
    var out: [UInt8] = []
    out.reserveCapacity(count)
    while out.count < count { out += pattern.prefix(count - out.count) }
    return out
}

/// Deterministic pseudo-random bytes (all 256 values occur).
public func testBytes(count: Int, seed: UInt64 = 0x9E37_79B9_7F4A_7C15) -> [UInt8] {
    var state = seed
    var out = [UInt8](repeating: 0, count: count)
    for i in 0..<count {
        state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
        out[i] = UInt8(truncatingIfNeeded: state >> 33)
    }
    return out
}

/// SHA-256 hex digest via the system's sha256sum (the test target has no crypto library).
public func sha256Hex(_ bytes: [UInt8]) throws -> String {
    let dir = try TempDir(prefix: "sha")
    let path = try dir.write("data", Data(bytes))
    let result = try runCommand("sha256sum", arguments: [path])
    guard result.status == 0, let digest = result.stdout.split(separator: " ").first else {
        throw HarnessError("sha256sum failed: \(result.stderr)")
    }
    return String(digest)
}
