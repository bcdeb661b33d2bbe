/// `type: github_app` (CONTRACT.md "GitHub App installation tokens"): the app that signs, the
/// installation whose token it asks for, and how that token is narrowed. The key file is parsed by
/// Credentials (Credentials/TokenSources/GitHubAppProvider.swift), which `check` runs too.
public struct GitHubAppConfiguration: Sendable, Equatable {
    /// The access a narrowed token keeps to one kind of resource (GitHub's permission levels).
    public enum Access: String, Sendable, Equatable, CaseIterable { case read, write, admin }

    /// One entry of `permissions`, in file order.
    public struct Permission: Sendable, Equatable {
        public var name: String
        public var access: Access
        public init(_ name: String, _ access: Access) {
            self.name = name
            self.access = access
        }
    }

    /// The app's numeric id or its client id: the `iss` of the app JWT.
    public var appID: String
    /// Digits only: it is a path segment of the token call.
    public var installationID: String
    /// The app's RSA key (PEM), resolved against the config file's folder.
    public var privateKeyFile: String
    /// Without a trailing `/`; GitHub Enterprise Server: https://HOST/api/v3.
    public var apiURL: String = GitHubAppConfiguration.defaultAPIURL
    /// nil: every repository the installation can reach.
    public var repositories: [String]? = nil
    /// Empty: every permission the installation has.
    public var permissions: [Permission] = []

    public static let defaultAPIURL = "https://api.github.com"

    public init(appID: String, installationID: String, privateKeyFile: String) {
        self.appID = appID
        self.installationID = installationID
        self.privateKeyFile = privateKeyFile
    }
}

extension Keys {
    static let gitHubApp = ["app_id", "installation_id", "private_key_file", "api_url", "repositories", "permissions"]
}

extension GitHubAppConfiguration {
    /// GitHub takes at most this many repositories in one token request.
    static let mostRepositories = 500

    static func parse(_ s: YAMLSection, errorsBefore: Int, in load: LoadContext) -> GitHubAppConfiguration? {
        let appID = load.found.collect { try checkedAppID(s) }
        let installationID = load.found.collect { try checkedInstallationID(s) }
        // An absent key file is read at the first token request (a secret volume mounted later); one
        // that is there and others may read is refused now, as every private key is.
        let keyFile = load.found.collect { try load.privateKeyFile(s, "private_key_file", mustExist: false) }
        let apiURL = load.found.collect { try checkedAPIURL(s, in: load) }
        let repositories = load.found.collect { try s.stringList("repositories", example: "[tools, infra]") }.flatMap { checkedRepositories($0, s, in: load) }
        let permissions = checkedPermissions(s, in: load)
        guard load.found.errors.count == errorsBefore else { return nil }
        for (key, value) in [("app_id", appID), ("installation_id", installationID), ("private_key_file", keyFile)] where value == nil {
            load.found.record(ConfigurationError.missingCredential(key, for: .gitHubApp))
        }
        guard let appID, let installationID, let keyFile else { return nil }
        var c = GitHubAppConfiguration(appID: appID, installationID: installationID, privateKeyFile: keyFile)
        if let apiURL { c.apiURL = apiURL }
        c.repositories = repositories
        c.permissions = permissions ?? []
        return c
    }

    /// The numeric app id, or the client id GitHub also accepts as `iss` (`Iv1.…`, `Iv23…`).
    private static func checkedAppID(_ s: YAMLSection) throws -> String? {
        guard let value = try s.nonEmptyString("app_id")?.trimmingWhitespace() else { return nil }
        guard value.utf8.count <= 100, value.utf8.allSatisfy({ isNameByte($0) }) else {
            throw ConfigurationError(keyPath: s.path("app_id"), reason: "must be the app's numeric id or its client id (Iv1.…), as its settings page shows")
        }
        return value
    }

    private static func checkedInstallationID(_ s: YAMLSection) throws -> String? {
        guard let value = try s.nonEmptyString("installation_id")?.trimmingWhitespace() else { return nil }
        guard value.utf8.count <= 20, value.utf8.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }), value.contains(where: { $0 != "0" })
        else {
            throw ConfigurationError(
                keyPath: s.path("installation_id"),
                reason: "must be the installation's numeric id (the number at the end of its settings address, …/installations/7890123)")
        }
        return value
    }

    /// The token call is `{api_url}/app/installations/…`: a base URL without a query.
    private static func checkedAPIURL(_ s: YAMLSection, in load: LoadContext) throws -> String? {
        guard var value = try load.checkURL(s, "api_url") else { return nil }
        guard !value.contains("?") else {
            throw ConfigurationError(keyPath: s.path("api_url"), reason: "must not have a query: it is the base the token call's path is appended to")
        }
        while value.hasSuffix("/") { value.removeLast() }
        return value
    }

    /// Repository names without their owner (the installation's account owns them), each named
    /// by its index when wrong.
    private static func checkedRepositories(_ names: [String], _ s: YAMLSection, in load: LoadContext) -> [String]? {
        let key = s.path("repositories")
        guard !names.isEmpty else {
            load.found.record(
                ConfigurationError(keyPath: key, reason: "an empty list narrows the token to nothing; leave repositories out for every repository"))
            return nil
        }
        guard names.count <= mostRepositories else {
            load.found.record(ConfigurationError(keyPath: key, reason: "GitHub takes at most \(mostRepositories) repositories in one token"))
            return nil
        }
        var ok = true
        var seen = Set<String>()
        for (index, raw) in names.enumerated() {
            let name = raw.trimmingWhitespace()
            let reason: String?
            if name.contains("/") {
                reason = "a repository name without its owner (tools, not my-org/tools): the installation's account owns it"
            } else if name.isEmpty || name.utf8.count > 100 || !name.utf8.allSatisfy({ isNameByte($0) }) {
                reason = "not a repository name (letters, digits, -, _ and .)"
            } else if !seen.insert(name.lowercased()).inserted {
                reason = "named twice"
            } else {
                reason = nil
            }
            if let reason {
                load.found.record(ConfigurationError(keyPath: "\(key)[\(index)]", reason: reason))
                ok = false
            }
        }
        return ok ? names.map { $0.trimmingWhitespace() } : nil
    }

    /// `{name: read | write | admin}`, each entry named by its key when wrong.
    private static func checkedPermissions(_ s: YAMLSection, in load: LoadContext) -> [Permission]? {
        guard let section = load.found.collect({ try s.section("permissions") }) else { return nil }
        guard !section.entries.isEmpty else {
            load.found.record(
                ConfigurationError(keyPath: section.keyPath, reason: "an empty mapping; leave permissions out for every permission of the installation"))
            return nil
        }
        var permissions: [Permission] = []
        var ok = true
        let levels = Access.allCases.map(\.rawValue).joined(separator: " | ")
        for (name, _) in section.entries {
            let keyPath = section.path(name)
            guard !name.isEmpty, name.utf8.count <= 100,
                name.utf8.allSatisfy({ ($0 >= UInt8(ascii: "a") && $0 <= UInt8(ascii: "z")) || $0 == UInt8(ascii: "_") })
            else {
                load.found.record(ConfigurationError(keyPath: keyPath, reason: "not a permission name (lower-case words joined by _: contents, pull_requests)"))
                ok = false
                continue
            }
            guard let text = load.found.collect({ try section.string(name) }) else {
                if section.node(name) == nil {
                    load.found.record(ConfigurationError(keyPath: keyPath, reason: "needs a level: one of \(levels)"))
                }
                ok = false
                continue
            }
            guard let access = Access(rawValue: text.trimmingWhitespace()) else {
                load.found.record(ConfigurationError(keyPath: keyPath, reason: "\"\(text)\" is not one of \(levels)"))
                ok = false
                continue
            }
            permissions.append(Permission(name, access))
        }
        return ok ? permissions : nil
    }

    /// The characters of GitHub's repository names and client ids.
    private static func isNameByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
            UInt8(ascii: "-"), UInt8(ascii: "_"), UInt8(ascii: "."):
            return true
        default:
            return false
        }
    }
}

extension GitHubAppConfiguration {
    func describe(_ line: (String, String?) -> Void) {
        line("app_id", quoted(appID))
        line("installation_id", quoted(installationID))
        line("private_key_file", Paths.kind(of: privateKeyFile) == nil ? "\(privateKeyFile) (not there yet: read at the first token request)" : privateKeyFile)
        line("api_url", apiURL)
        line("repositories", repositories.map { "[\($0.map(quoted).joined(separator: ", "))]" })
        line("permissions", permissions.isEmpty ? nil : "{\(permissions.map { "\($0.name): \($0.access.rawValue)" }.joined(separator: ", "))}")
    }
}
