import Foundation
import Synchronization
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// The token life cycle's world: the Authlib authorization server (`oauth_server.py`, HS256 JWT
/// access tokens), the protected API that checks them (`protected_api.py`, same key), a folder
/// with the configuration and the store, and the real `tokenproxy` binary for `serve` and the
/// commands. Every secret it sees is collected, and `assertNoLeaks` greps every log and command
/// output for all of them.
public final class Lifecycle: Sendable {
    public let idp: PythonServer
    public let api: PythonServer
    public let dir: TempDir
    public let clientSecret = "client-secret-\(UUID().uuidString.lowercased())"
    public let password = "pw-\(UUID().uuidString.lowercased())"
    public let jwtKey = "jwt-key-\(UUID().uuidString.lowercased())"
    public let type: String
    private let outputs = Mutex<[(String, String)]>([])
    private let secrets = Mutex<Set<String>>([])

    /// - Parameters:
    ///   - idpArguments: more `oauth_server.py` flags (`--access-ttl`, `--token-delay-ms`, ...).
    ///   - type: `oauth2_refresh` or `oauth2_client_credentials`.
    public init(idpArguments: [String] = [], type: String = "oauth2_refresh") throws {
        self.type = type
        dir = try TempDir(prefix: "tokenproxy-life")
        idp = try PythonServer(
            "oauth_server",
            arguments: ["--jwt", "--jwt-key", jwtKey, "--client", "app:\(clientSecret)", "--user", "alice:\(password)"] + idpArguments)
        api = try PythonServer("protected_api", arguments: ["--jwt-key", jwtKey])
        secrets.withLock { $0.formUnion([clientSecret, password, jwtKey]) }
    }

    /// The YAML of a configuration in `dir` (store at `./state/tokens.json`).
    public func config(margin: String = "5s", extra: String = "", admin: Bool = true) -> String {
        """
        listen: 127.0.0.1:0
        upstream: \(api.baseURL)
        workers: 2
        drain_timeout: 2s
        \(admin ? "admin:\n  listen: 127.0.0.1:0" : "")
        credentials:
          type: \(type)
          token_url: \(idp.baseURL)/oauth/token
          revocation_url: \(idp.baseURL)/oauth/revoke
          client_id: app
          client_secret_env: LIFE_CLIENT_SECRET
          refresh_margin: \(margin)
        limits:
          refresh_wait: 10s
        log:
          level: debug
        \(extra)
        """
    }

    public var environment: [String: String] { ["LIFE_CLIENT_SECRET": clientSecret] }

    /// Starts `tokenproxy serve` with the configuration file `name` in `dir`.
    public func serve(margin: String = "5s", extra: String = "") throws -> ProxyProcess {
        let proxy = try ProxyProcess(config: config(margin: margin, extra: extra), directory: dir, environment: environment)
        return proxy
    }

    /// Runs a command (`login`, `token`, `status`, `logout`) against `file` (default: the
    /// configuration `serve` wrote; written here when it is not there yet).
    public func command(_ arguments: [String], stdin: String? = nil, config file: String = "tokenproxy.yaml", margin: String = "5s") throws -> CommandResult {
        let path = dir.file(file)
        if !FileManager.default.fileExists(atPath: path) { _ = try dir.write(file, config(margin: margin)) }
        let result = try ProxyProcess.run(args: [arguments[0], "--config", path] + arguments.dropFirst(), env: environment, stdin: stdin)
        record("tokenproxy \(arguments[0]) stderr", result.stderr)
        if arguments[0] == "token" {
            let token = result.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
            if !token.isEmpty { secrets.withLock { _ = $0.insert(token) } }
        } else {
            record("tokenproxy \(arguments[0]) stdout", result.stdout)
        }
        collectStoreSecrets()
        return result
    }

    /// `tokenproxy login --username alice --password-stdin`.
    @discardableResult
    public func login(config file: String = "tokenproxy.yaml") throws -> CommandResult {
        try command(["login", "--username", "alice", "--password-stdin"], stdin: password + "\n", config: file)
    }

    public var storePath: String { dir.file("state/tokens.json") }

    /// The stored session as JSON.
    public func store() -> [String: Any]? {
        guard let data = FileManager.default.contents(atPath: storePath) else { return nil }
        return (try? JSONSerialization.jsonObject(with: data)) as? [String: Any]
    }

    public func collectStoreSecrets() {
        guard let store = store() else { return }
        for key in ["access_token", "refresh_token"] {
            if let value = store[key] as? String { secrets.withLock { _ = $0.insert(value) } }
        }
    }

    /// A secret seen elsewhere (a Redis store's tokens), for `assertNoLeaks`.
    public func addSecret(_ secret: String) {
        secrets.withLock { _ = $0.insert(secret) }
    }

    public func record(_ name: String, _ text: String) {
        outputs.withLock { $0.append((name, text)) }
    }

    /// No log and no command output (other than `token`'s stdout) holds any secret seen.
    public func assertNoLeaks(_ proxies: [ProxyProcess], sourceLocation: SourceLocation = #_sourceLocation) {
        collectStoreSecrets()
        for (index, proxy) in proxies.enumerated() {
            record("serve #\(index) stderr", proxy.stderr)
            record("serve #\(index) stdout", proxy.stdout)
        }
        let all = outputs.withLock { $0 }
        let secrets = self.secrets.withLock { $0 }
        #expect(secrets.count >= 4, "secrets collected", sourceLocation: sourceLocation)
        for (name, text) in all {
            for secret in secrets where text.contains(secret) {
                Issue.record("\(name) contains a secret (\(secret.prefix(8))…)", sourceLocation: sourceLocation)
            }
        }
    }

    // MARK: - The servers' counters

    public func idpStats() throws -> [String: Any] {
        try curl([idp.baseURL + "/test/stats"]).json ?? [:]
    }

    /// Token-endpoint calls of `grant` that ended with `outcome`.
    public func idpCalls(_ grant: String, _ outcome: String = "ok") throws -> Int {
        let calls = try idpStats()["calls"] as? [String: [String: Int]]
        return calls?[grant]?[outcome] ?? 0
    }

    public func apiStats() throws -> [String: Any] {
        try curl([api.baseURL + "/test/stats"]).json ?? [:]
    }

    public func idp(_ control: String) throws {
        _ = try curl(["-X", "POST", idp.baseURL + control])
    }

    public func api(_ control: String) throws {
        _ = try curl(["-X", "POST", api.baseURL + control])
    }

    public func stop() {
        idp.stop()
        api.stop()
    }
}

/// One request through the proxy on its own connection.
public func send(
    _ proxy: ProxyProcess, _ method: String = "GET", _ path: String = "/data", body: [UInt8] = [], timeout: TimeInterval = 20
) throws -> HTTPResponse {
    let client = try RawHTTPClient(port: proxy.port, timeout: timeout)
    defer { client.close() }
    try client.send(rawRequest(method, path, host: proxy.address, headers: [("Connection", "close")], body: body))
    return try client.readResponse(method: method)
}

/// `count` requests at once, each on its own connection and thread, released together.
public func concurrently<T: Sendable>(_ count: Int, _ body: @escaping @Sendable (Int) throws -> T) -> [Result<T, Error>] {
    let results = Mutex<[Int: Result<T, Error>]>([:])
    let gate = DispatchGroup()
    gate.enter()
    let group = DispatchGroup()
    for index in 0..<count {
        group.enter()
        let thread = Thread {
            gate.wait()
            let result = Result { try body(index) }
            results.withLock { $0[index] = result }
            group.leave()
        }
        thread.stackSize = 1 << 20
        thread.start()
    }
    gate.leave()
    group.wait()
    return results.withLock { dict in (0..<count).map { dict[$0]! } }
}

/// `concurrently` on a thread of its own, so that the test goes on while the requests wait; `wait()`
/// gives their results once all are answered.
public final class BackgroundRequests<T: Sendable>: Sendable {
    private let results = Mutex<[Result<T, Error>]>([])
    private let done = DispatchGroup()

    public init(_ count: Int, _ body: @escaping @Sendable (Int) throws -> T) {
        done.enter()
        Thread.detachNewThread { [self] in
            results.withLock { $0 = concurrently(count, body) }
            done.leave()
        }
    }

    public func wait() -> [Result<T, Error>] {
        done.wait()
        return results.withLock { $0 }
    }
}

/// Polls `condition` until it holds or the deadline passes.
public func within(_ seconds: Double, _ condition: () throws -> Bool) rethrows -> Bool {
    let deadline = Date().addingTimeInterval(seconds)
    while Date() < deadline {
        if try condition() { return true }
        usleep(20_000)
    }
    return try condition()
}

/// A metric's value from the admin listener's Prometheus text.
public func metric(_ proxy: ProxyProcess, _ name: String) throws -> Double? {
    guard let admin = proxy.adminURL else { return nil }
    let text = try curl([admin + "/metrics"]).bodyString
    for line in text.split(separator: "\n") where line.hasPrefix(name + " ") || line.hasPrefix(name + "{") {
        if let value = line.split(separator: " ").last.flatMap({ Double($0) }) { return value }
    }
    return nil
}

extension HTTPResponse {
    public var jsonObject: [String: Any] { json ?? [:] }
}
