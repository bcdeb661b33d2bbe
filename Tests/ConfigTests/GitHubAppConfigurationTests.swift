import Foundation
import Testing

@testable import Config

/// `type: github_app` (CONTRACT.md "GitHub App installation tokens"): the keys and their checks.
@Suite struct GitHubAppConfigurationTests {
    func credentials(_ lines: String) -> String {
        credentialsConfiguration(lines, upstream: "https://api.github.com")
    }

    func app(_ loaded: LoadedConfiguration) -> GitHubAppConfiguration? {
        if case .gitHubApp(let c) = loaded.configuration.credentials.source { c } else { nil }
    }

    /// The required keys; `extra` lines are added after them.
    func minimal(_ extra: String = "") -> String {
        credentials("type: github_app\napp_id: \"123456\"\ninstallation_id: \"7890123\"\nprivate_key_file: ./app.pem\n" + extra)
    }

    /// Every error of a load, as "key: reason".
    func errors(_ yaml: String) -> [ConfigurationError] {
        parseError(yaml)?.all ?? []
    }

    @Test func theContractsExampleLoads() throws {
        let loaded = try parse(
            credentials(
                """
                type: github_app
                app_id: "123456"
                installation_id: "7890123"
                private_key_file: ./app.private-key.pem
                api_url: https://github.example.com/api/v3/
                repositories: [tools, infra]
                permissions: {contents: read, pull_requests: write, administration: admin}
                """))
        let c = try #require(app(loaded))
        #expect(loaded.configuration.credentials.type == .gitHubApp)
        #expect(c.appID == "123456" && c.installationID == "7890123")
        #expect(c.privateKeyFile == "/etc/tokenproxy/app.private-key.pem")
        #expect(c.apiURL == "https://github.example.com/api/v3", "the trailing / is dropped: the token call's path is appended")
        #expect(c.repositories == ["tools", "infra"])
        #expect(c.permissions == [.init("contents", .read), .init("pull_requests", .write), .init("administration", .admin)])
        #expect(loaded.warnings.isEmpty, "\(loaded.warnings)")
    }

    @Test func defaultsAndNumbersWrittenUnquoted() throws {
        let c = try #require(app(try parse(credentials("type: github_app\napp_id: 123456\ninstallation_id: 7890123\nprivate_key_file: /keys/app.pem"))))
        #expect(c.appID == "123456" && c.installationID == "7890123")
        #expect(c.apiURL == "https://api.github.com")
        #expect(c.repositories == nil && c.permissions.isEmpty)
        // GitHub also takes the app's client id as the JWT's issuer.
        let byClientID = try #require(app(try parse(minimal().replacingOccurrences(of: "\"123456\"", with: "Iv23liABCdef.0-_"))))
        #expect(byClientID.appID == "Iv23liABCdef.0-_")
    }

    @Test func missingKeysAreNamedTogether() {
        let found = errors(credentials("type: github_app"))
        #expect(found.map(\.keyPath) == ["credentials.app_id", "credentials.installation_id", "credentials.private_key_file"])
        #expect(found.allSatisfy { $0.reason.contains("required for type github_app") })
    }

    @Test func everyBadValueIsNamedByKeyAndReason() {
        let found = errors(
            credentials(
                """
                type: github_app
                app_id: "12 34"
                installation_id: "78x"
                private_key_file: ./app.pem
                api_url: ftp://github.example.com
                repositories: [tools, my-org/infra, "bad name", tools]
                permissions: {contents: writ, Pull-Requests: read, issues: {x: y}, checks: }
                """))
        let byKey = Dictionary(found.map { ($0.keyPath, $0.reason) }, uniquingKeysWith: { $0 + " / " + $1 })
        #expect(byKey["credentials.app_id"]?.contains("numeric id or its client id") == true, "\(byKey)")
        #expect(byKey["credentials.installation_id"]?.contains("numeric id") == true)
        #expect(byKey["credentials.api_url"]?.contains("scheme") == true)
        #expect(byKey["credentials.repositories[1]"]?.contains("without its owner") == true)
        #expect(byKey["credentials.repositories[2]"]?.contains("not a repository name") == true)
        #expect(byKey["credentials.repositories[3]"]?.contains("named twice") == true)
        #expect(byKey["credentials.permissions.contents"]?.contains("\"writ\" is not one of read | write | admin") == true)
        #expect(byKey["credentials.permissions.Pull-Requests"]?.contains("not a permission name") == true)
        #expect(byKey["credentials.permissions.issues"]?.contains("expected a string") == true)
        #expect(byKey["credentials.permissions.checks"]?.contains("needs a level") == true)
        #expect(found.count == 10, "\(found)")
    }

    @Test func narrowingToNothingAndOtherShapesAreRefused() {
        #expect(parseError(minimal("repositories: []"))?.keyPath == "credentials.repositories")
        #expect(parseError(minimal("repositories: tools"))?.reason.contains("expected a list") == true)
        #expect(parseError(minimal("permissions: {}"))?.keyPath == "credentials.permissions")
        #expect(parseError(minimal("permissions: [contents]"))?.keyPath == "credentials.permissions")
        #expect(parseError(minimal("api_url: https://api.github.com?x=1"))?.reason.contains("query") == true)
        #expect(parseError(minimal("repositories: [" + (0...500).map { "r\($0)" }.joined(separator: ", ") + "]"))?.reason.contains("500") == true)
        #expect(
            parseError(credentials("type: github_app\napp_id: \"1\"\ninstallation_id: \"000\"\nprivate_key_file: ./k"))?.keyPath
                == "credentials.installation_id")
    }

    @Test func keysOfOtherTypesAreWarnedAbout() throws {
        let loaded = try parse(minimal("token_url: https://idp.example.com/token"))
        #expect(loaded.warnings.contains("credentials.token_url: not used by type github_app"), "\(loaded.warnings)")
        // …and the github_app keys under another type.
        let other = try parse(minimalYAML + "\n  app_id: \"1\"")
        #expect(other.warnings.contains("credentials.app_id: not used by type static"), "\(other.warnings)")
    }

    /// The key file: an absent one is read at the first token request; one that group or others
    /// may read is refused now, like every private key.
    @Test func keyFileModeIsCheckedWhenItIsThere() throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        let yaml = minimal()
        #expect(app(try parse(yaml, base: folder.path))?.privateKeyFile == folder.resolved + "/app.pem")
        try folder.write("app.pem", "-----BEGIN PRIVATE KEY-----\n")
        chmod(folder.path + "/app.pem", 0o644)
        let error = try #require(parseError(yaml, base: folder.path))
        #expect(error.keyPath == "credentials.private_key_file")
        #expect(error.reason.contains("(mode 0644, owner uid ") && error.reason.contains("others may read it"), "\(error.reason)")
        chmod(folder.path + "/app.pem", 0o600)
        #expect(parseError(yaml, base: folder.path) == nil)
    }

    @Test func checkPrintsWhatItResolved() throws {
        let text = try parse(minimal("repositories: [tools]\npermissions: {contents: read, metadata: read}")).configuration.resolvedDescription()
        for line in [
            "type: github_app", "app_id: 123456", "installation_id: 7890123", "private_key_file: /etc/tokenproxy/app.pem",
            "api_url: https://api.github.com", "repositories: [tools]", "permissions: {contents: read, metadata: read}",
        ] {
            #expect(text.contains(line), "missing \(line) in:\n\(text)")
        }
    }
}
