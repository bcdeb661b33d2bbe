import Foundation
import TestSupport

/// The files this target checks, found from the repository root, and the small readers the tests
/// share: a key lister for the example YAML files and a PATH lookup.
enum ShippedFiles {
    static var config: URL { RepositoryPaths.root.appendingPathComponent("config") }
    static var docker: URL { RepositoryPaths.root.appendingPathComponent("Docker") }
    static var dockerfile: URL { docker.appendingPathComponent("Dockerfile") }
    static var healthcheck: URL { docker.appendingPathComponent("healthcheck.sh") }
    static var dockerReadme: URL { docker.appendingPathComponent("README.md") }
    static var systemdUnit: URL { config.appendingPathComponent("tokenproxy.service") }
    /// The reference that README.md points to: command line, keys, limits, errors, metrics.
    static var configurationReference: URL { RepositoryPaths.root.appendingPathComponent("docs/CONFIGURATION.md") }
    static var lintScript: URL { RepositoryPaths.root.appendingPathComponent("scripts/lint-docker.sh") }

    /// The example configurations the shipping issue asks for, one per credential type and the sidecar.
    static let requiredExamples = [
        "oauth2-refresh-password.yaml", "oauth2-refresh-device.yaml", "oauth2-client-credentials.yaml", "cognito.yaml",
        "cognito-with-secret.yaml", "json-refresh.yaml", "static.yaml", "file.yaml", "exec.yaml", "sidecar.yaml",
        "oauth2-refresh-browser.yaml", "cognito-srp.yaml",
    ]

    /// Every `config/*.yaml`, sorted (so a new example is checked without touching the tests).
    static var exampleNames: [String] {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: config.path)) ?? []
        return names.filter { $0.hasSuffix(".yaml") }.sorted()
    }

    static func text(_ url: URL) throws -> String {
        try String(contentsOf: url, encoding: .utf8)
    }

    /// The first executable called `name` on PATH (or in the usual system folders), or nil.
    static func executable(_ name: String) -> URL? {
        let path = ProcessInfo.processInfo.environment["PATH"] ?? ""
        let folders = path.split(separator: ":").map(String.init) + ["/usr/bin", "/bin", "/usr/sbin", "/sbin"]
        for folder in folders where !folder.isEmpty {
            let candidate = URL(fileURLWithPath: folder).appendingPathComponent(name)
            if FileManager.default.isExecutableFile(atPath: candidate.path) { return candidate }
        }
        return nil
    }
}

/// What an example configuration uses, read line by line. The examples are written in the block
/// style the contract shows (top-level keys at column 0, section keys indented two spaces), which
/// is all this reader understands; a key it would miss still meets `tokenproxy check`, which
/// refuses unknown keys.
struct ExampleKeys {
    /// Dotted key paths as `ConfigurationLoader.knownKeys` spells them ("listen", "credentials.token_url").
    var keys: [String] = []
    /// The environment variable names given to `*_env` keys.
    var environmentNames: [String] = []

    /// The keys of a `routes:` entry are read as the top-level ones they stand for (`credentials.type`),
    /// except `match`, which only a route has (docs/SEVERAL-APIS.md).
    init(yaml: String) {
        var section: String?
        var routeSection: String?
        for rawLine in yaml.split(separator: "\n", omittingEmptySubsequences: false) {
            let line = String(rawLine)
            let indent = line.prefix { $0 == " " }.count
            let rest = line.dropFirst(indent)
            guard let first = rest.first, first != "#", first != "-" else { continue }
            guard let colon = rest.firstIndex(of: ":") else { continue }
            let key = String(rest[..<colon])
            guard !key.isEmpty, key.allSatisfy({ $0.isLetter || $0.isNumber || $0 == "_" }) else { continue }
            var value = rest[rest.index(after: colon)...].trimmingCharacters(in: .whitespaces)
            if let hash = value.range(of: " #") { value = value[..<hash.lowerBound].trimmingCharacters(in: .whitespaces) }
            if value.hasPrefix("#") { value = "" }
            if section == "routes", indent >= 4 {
                readRouteKey(key, value: value, depth: indent - 4, section: &routeSection)
                continue
            }
            switch indent {
            case 0:
                section = key
                keys.append(key)
            case 2:
                guard let section else { continue }
                keys.append("\(section).\(key)")
                if key.hasSuffix("_env"), !value.isEmpty {
                    environmentNames.append(value.trimmingCharacters(in: CharacterSet(charactersIn: "\"'")))
                }
            default:
                continue  // inside a nested value (extra_params written as a block mapping)
            }
        }
    }

    private mutating func readRouteKey(_ key: String, value: String, depth: Int, section: inout String?) {
        switch depth {
        case 0:
            section = key
            if key != "match" { keys.append(key) }
        case 2:
            guard let section, section != "match" else { return }
            keys.append("\(section).\(key)")
            if key.hasSuffix("_env"), !value.isEmpty {
                environmentNames.append(value.trimmingCharacters(in: CharacterSet(charactersIn: "\"'")))
            }
        default:
            return
        }
    }
}
