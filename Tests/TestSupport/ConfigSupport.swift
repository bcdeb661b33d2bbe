import Foundation

/// The configuration most tests start from (docs/CONFIGURATION.md): `listen` (a free port unless
/// told), one `upstream`, `workers` (none: the default), the static token from the environment
/// variable `tokenEnv` (`e2eToken` under `E2E_TOKEN` for the end-to-end tests).
/// - Parameters:
///   - drainTimeout: `drain_timeout`, when set.
///   - admin: an admin listener on a free port.
///   - logLevel: a `log:` section at that level with the access log on, when set.
///   - more: more top-level YAML, as written.
public func staticTokenConfig(
    listen: String = "127.0.0.1:0", upstream: String, workers: Int? = 1, drainTimeout: String? = nil, admin: Bool = false,
    tokenEnv: String = "E2E_TOKEN", logLevel: String? = nil, more: String = ""
) -> String {
    var lines = ["listen: \(listen)", "upstream: \(upstream)"]
    if let workers { lines.append("workers: \(workers)") }
    if let drainTimeout { lines.append("drain_timeout: \(drainTimeout)") }
    if admin { lines += ["admin:", "  listen: 127.0.0.1:0"] }
    lines += ["credentials:", "  type: static", "  token_env: \(tokenEnv)"]
    if let logLevel { lines += ["log:", "  level: \(logLevel)", "  access_log: true"] }
    if !more.isEmpty { lines.append(more) }
    return lines.joined(separator: "\n") + "\n"
}

/// `listen` on a free port, one `upstream`, one worker, `credentials` (its lines, indented here) and
/// `more` top-level lines, as written.
public func proxyConfig(upstream: String, credentials: String, more: String = "") -> String {
    let credentialLines = credentials.split(separator: "\n").map { "  " + $0 }
    let lines = ["listen: 127.0.0.1:0", "upstream: \(upstream)", "workers: 1", "credentials:"] + credentialLines + (more.isEmpty ? [] : [more])
    return lines.joined(separator: "\n") + "\n"
}

/// The top-level lines of a configuration whose routes say the rest: `listen` on a free port, one
/// worker, `drain_timeout: 2s`, debug logs with the access log.
public let routesProxyTop = "listen: 127.0.0.1:0\nworkers: 1\ndrain_timeout: 2s\nlog: {level: debug, access_log: true}"
