import Foundation
import Testing

@testable import Config

/// A configuration that is valid with `minimalEnvironment`; tests append or replace lines.
let minimalYAML = """
    upstream: https://api.example.com
    credentials:
      type: static
      token_env: TOKEN
    """
let minimalEnvironment = ["TOKEN": "static-token-value"]

/// A configuration of one `upstream` whose `credentials:` section holds `lines` (indented here).
func credentialsConfiguration(_ lines: String, upstream: String = "https://api.example.com") -> String {
    "upstream: \(upstream)\ncredentials:\n" + lines.split(separator: "\n").map { "  " + $0 }.joined(separator: "\n")
}

func parse(_ yaml: String, base: String = "/etc/tokenproxy", environment: [String: String] = minimalEnvironment) throws -> LoadedConfiguration {
    try ConfigurationLoader.parse(yaml: yaml, baseDirectory: base, environment: environment)
}

/// The error `parse` throws, or nil when it succeeds.
func parseError(_ yaml: String, base: String = "/etc/tokenproxy", environment: [String: String] = minimalEnvironment) -> ConfigurationError? {
    do {
        _ = try parse(yaml, base: base, environment: environment)
        return nil
    } catch let error as ConfigurationError {
        return error
    } catch {
        Issue.record("expected a ConfigurationError, got \(error)")
        return nil
    }
}

/// A fresh folder under the temporary directory, removed by `remove()`.
struct TemporaryFolder {
    let path: String

    init() throws {
        path = NSTemporaryDirectory() + "/configtests-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    }

    func write(_ name: String, _ contents: String) throws {
        let url = URL(fileURLWithPath: path + "/" + name)
        try FileManager.default.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
        try contents.write(to: url, atomically: true, encoding: .utf8)
    }

    func remove() { try? FileManager.default.removeItem(atPath: path) }

    /// The folder's path as the loader reports it (no `//`, no `.`).
    var resolved: String { URL(fileURLWithPath: path).standardizedFileURL.path }
}

/// The configuration of one source, or nil when the credentials are of another type.
extension CredentialsConfiguration {
    var asStatic: StaticTokenConfiguration? { if case .static(let c) = source { c } else { nil } }
    var asFile: FileTokenConfiguration? { if case .file(let c) = source { c } else { nil } }
    var asExec: ExecConfiguration? { if case .exec(let c) = source { c } else { nil } }
    var asCognito: CognitoConfiguration? { if case .cognito(let c) = source { c } else { nil } }
    var asGCE: GCEMetadataConfiguration? { if case .gceMetadata(let c) = source { c } else { nil } }
    var asTokenExchange: TokenExchangeConfiguration? { if case .oauth2TokenExchange(let c) = source { c } else { nil } }
    var asOAuth2Refresh: OAuth2RefreshConfiguration? { if case .oauth2Refresh(let c) = source { c } else { nil } }
    var asJSONRefresh: JSONRefreshConfiguration? { if case .jsonRefresh(let c) = source { c } else { nil } }
    var asJWTBearer: JWTBearerConfiguration? { if case .oauth2JWTBearer(let c) = source { c } else { nil } }
}

/// A folder for the `tls:` and `forward_proxy:` keys (CONTRACT.md "HTTPS for clients"): a
/// certificate, a key (mode `keyMode`) and a client CA under `tls/`, a CA pair under `ca/` (key mode
/// `caKeyMode`). The loader does not read their contents.
func tlsFolder(keyMode: Int = 0o600, caKeyMode: Int = 0o600) throws -> TemporaryFolder {
    let folder = try TemporaryFolder()
    for name in ["tls/server.pem", "tls/server-key.pem", "tls/clients.pem", "ca/ca.pem", "ca/ca-key.pem"] {
        try folder.write(name, "contents of \(name)\n")
    }
    try FileManager.default.setAttributes([.posixPermissions: keyMode], ofItemAtPath: folder.path + "/tls/server-key.pem")
    try FileManager.default.setAttributes([.posixPermissions: caKeyMode], ofItemAtPath: folder.path + "/ca/ca-key.pem")
    return folder
}

/// Every error of `yaml` read from the folder `base`; none when it loads.
func errors(_ yaml: String, base: String) -> [ConfigurationError] { parseError(yaml, base: base)?.all ?? [] }

/// `routes:` with the route `billing` and then `route` (its lines, as written); `top` before them.
func billingRoutes(_ route: String, top: String = "") -> String {
    """
    \(top)
    routes:
      - name: billing
        upstream: https://billing.example.com
        credentials: {type: static, token_env: TOKEN}
    \(route)
    """
}
