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
