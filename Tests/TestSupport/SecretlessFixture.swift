import Foundation
import Testing

/// The world of the secretless-credentials tests: Authlib's authorization server with its RFC 7523
/// classes (`secretless_idp.py`, which is also the protected API at `/api/`), keys made by the
/// `openssl` command, a folder for the configuration, and the real `tokenproxy` binary.
public final class SecretlessWorld: Sendable {
    public let idp: PythonServer
    public let dir: TempDir

    public init(clients: [String], keys: [String: String] = [:], dir: TempDir? = nil) throws {
        self.dir = try dir ?? TempDir(prefix: "tokenproxy-secretless")
        idp = try PythonServer("secretless_idp", arguments: clients.flatMap { ["--client", $0] })
    }

    public var tokenURL: String { idp.baseURL + "/oauth/token" }

    /// A new private key in PEM, made by openssl: "rsa" (2048 bits) or "ec" (P-256).
    public static func makeKey(_ kind: String, in dir: TempDir, name: String) throws -> String {
        let path = dir.file(name)
        let arguments =
            kind == "rsa"
            ? ["genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048", "-out", path]
            : ["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", path]
        let result = try runCommand("/usr/bin/openssl", arguments: arguments)
        guard result.status == 0 else { throw HarnessError("openssl genpkey failed: \(result.stderr)") }
        return path
    }

    /// A JWT of the IdP's "cluster" issuer, as a projected service-account token.
    public func mint(sub: String = "system:serviceaccount:default:app", aud: String? = nil, ttl: Int = 600) throws -> String {
        var url = idp.baseURL + "/test/mint?sub=\(sub)&ttl=\(ttl)"
        if let aud { url += "&aud=\(aud)" }
        let result = try curl(["-X", "POST", url])
        guard result.status == 200 else { throw HarnessError("mint answered \(result.status)") }
        return result.bodyString
    }

    /// Writes `content` the way the kubelet updates a projected volume: a new timestamped folder,
    /// a `..data` symlink swapped atomically by rename, and `name` a symlink through `..data`.
    public func project(_ name: String, _ content: String, folder: String = "projected") throws -> String {
        let root = dir.file(folder)
        let fm = FileManager.default
        try fm.createDirectory(atPath: root, withIntermediateDirectories: true)
        let version = "..\(UUID().uuidString)"
        try fm.createDirectory(atPath: root + "/" + version, withIntermediateDirectories: true)
        try Data(content.utf8).write(to: URL(fileURLWithPath: root + "/" + version + "/" + name))
        let temporary = root + "/..data_tmp"
        try? fm.removeItem(atPath: temporary)
        try fm.createSymbolicLink(atPath: temporary, withDestinationPath: version)
        guard rename(temporary, root + "/..data") == 0 else { throw HarnessError("rename ..data failed") }
        let link = root + "/" + name
        if (try? fm.destinationOfSymbolicLink(atPath: link)) == nil {
            try fm.createSymbolicLink(atPath: link, withDestinationPath: "..data/" + name)
        }
        return link
    }

    public func stats() throws -> [String: Any] {
        let result = try curl([idp.baseURL + "/test/stats"])
        return try #require(result.json)
    }

    public func calls(_ grant: String, _ outcome: String = "ok") throws -> Int {
        ((try stats()["calls"] as? [String: Any])?[grant] as? [String: Any])?[outcome] as? Int ?? 0
    }

    public func count(_ table: String, _ key: String) throws -> Int {
        (try stats()[table] as? [String: Any])?[key] as? Int ?? 0
    }

    /// `tokenproxy serve` with a grant of `type` at this IdP (for `clientID`, when set) and `more`
    /// credentials lines (client authentication, keys, the grant's own).
    public func serve(
        _ type: String, clientID: String? = nil, directory: TempDir? = nil, environment: [String: String] = [:], _ more: String
    ) throws -> ProxyProcess {
        let head = "type: \(type)\ntoken_url: \(tokenURL)\n" + (clientID.map { "client_id: \($0)\n" } ?? "")
        return try ProxyProcess(config: config(credentials: head + more), directory: directory, environment: environment)
    }

    /// The proxy's configuration: `credentials` lines indented by two spaces.
    public func config(credentials: String, upstream: String? = nil) -> String {
        credentialsConfig(upstream: upstream ?? idp.baseURL + "/api", credentials: credentials)
    }
}

/// The configuration of the credential types' tests: an admin listener, debug logs, `workers`, and
/// `credentials` (its lines, indented here).
public func credentialsConfig(upstream: String, workers: Int = 1, credentials: String) -> String {
    """
    listen: 127.0.0.1:0
    upstream: \(upstream)
    workers: \(workers)
    drain_timeout: 1s
    admin:
      listen: 127.0.0.1:0
    credentials:
    \(credentials.split(separator: "\n").map { "  " + $0 }.joined(separator: "\n"))
    log:
      level: debug
    """
}

/// Polls `condition` until it holds or `timeout` passes (waiting for an event another process
/// causes, such as a refresh the admin listener started); returns whether it held. `within`, with
/// the secretless tests' default.
public func eventually(timeout: TimeInterval = 15, _ condition: () throws -> Bool) rethrows -> Bool {
    try within(timeout, condition)
}

/// Writes `tokenproxy.yaml` in `dir` with `type: oauth2_client_credentials` for `clientID` (and
/// `credentials` lines more, indented here; `top`: more top-level lines) and runs `tokenproxy check`
/// on it: the file's path and what `check` said.
public func checkClientCredentials(
    in dir: TempDir, tokenURL: String = "http://127.0.0.1:9/token", clientID: String, _ credentials: String, top: String = ""
) throws -> (path: String, result: CommandResult) {
    let lines = credentials.split(separator: "\n").map { "  " + $0 }.joined(separator: "\n")
    let path = try dir.write(
        "tokenproxy.yaml",
        """
        upstream: http://127.0.0.1:9
        credentials:
          type: oauth2_client_credentials
          token_url: \(tokenURL)
          client_id: \(clientID)
        \(lines)
        \(top)
        """)
    return (path, try ProxyProcess.run(args: ["check", "--config", path]))
}
