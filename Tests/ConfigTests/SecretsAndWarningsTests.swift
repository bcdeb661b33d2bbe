import Foundation
import Testing

@testable import Config

@Suite struct SecretsAndWarningsTests {
    @Test func aLiteralClientSecretIsAcceptedWithAWarning() throws {
        let loaded = try parse(
            """
            upstream: https://a
            credentials: {type: oauth2_client_credentials, token_url: https://i, client_id: c, client_secret: literal-secret-value}
            """)
        #expect(loaded.configuration.credentials.source.oauth2Client?.clientSecret == Secret(value: "literal-secret-value", origin: .literal))
        #expect(
            loaded.warnings == [
                "credentials.client_secret: a literal secret in the config file; prefer client_secret_env or client_secret_file"
            ])
    }

    @Test func aLiteralRequireValueIsAcceptedWithAWarning() throws {
        let loaded = try parse(minimalYAML + "\naccess: {require_header: X-Key, require_value: literal-key-value}")
        #expect(loaded.configuration.access.requireValue == Secret(value: "literal-key-value", origin: .literal))
        #expect(
            loaded.warnings == [
                "access.require_value: a literal secret in the config file; prefer require_value_env or require_value_file"
            ])
    }

    @Test func keysTheTypeDoesNotUseAreWarnedAboutNotRefused() throws {
        let loaded = try parse(minimalYAML + "\n  region: us-east-1\n  command: [x]\n  client_secret_env: NOT_SET_ANYWHERE")
        #expect(
            loaded.warnings == [
                "credentials.region: not used by type static",
                "credentials.command: not used by type static",
                "credentials.client_secret_env: not used by type static",
            ])
        // An unused secret is not read, so an unset variable is no error.
        #expect(loaded.configuration.credentials.source.secrets == [Secret(value: "static-token-value", origin: .env("TOKEN"))])
    }

    @Test func insecureSkipVerifyIsAWarning() throws {
        let loaded = try parse(minimalYAML + "\nupstream_tls: {insecure_skip_verify: true}")
        #expect(loaded.configuration.upstreamTLS.insecureSkipVerify)
        #expect(loaded.warnings == ["upstream_tls.insecure_skip_verify: the upstream's TLS certificate is not verified; use this only for tests"])
    }

    @Test func anUnsetSeedRefreshTokenVariableMeansNoSeed() throws {
        let loaded = try parse(
            "upstream: https://a\ncredentials: {type: oauth2_refresh, token_url: https://i, client_id: c, refresh_token_env: NO_SEED}",
            environment: [:])
        #expect(loaded.configuration.credentials.source.seedRefreshToken == nil)
        #expect(loaded.warnings == [])
    }

    @Test func secretsComeFromFilesWithTheirOrigin() throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        try folder.write("key", "file-key-value\n")
        let loaded = try parse(minimalYAML + "\naccess: {require_header: X-Key, require_value_file: key}", base: folder.path)
        #expect(loaded.configuration.access.requireValue == Secret(value: "file-key-value", origin: .file(folder.resolved + "/key")))
    }

    @Test func theResolvedDescriptionMasksSecretsAndNamesTheirOrigin() throws {
        let loaded = try parse(contractExampleYAML, environment: contractExampleEnvironment)
        let text = loaded.configuration.resolvedDescription()
        let lines = text.split(separator: "\n").map(String.init)
        for expected in [
            "listen: 127.0.0.1:8080",
            "upstream: https://api.example.com/v1",
            "credentials.type: oauth2_refresh",
            "credentials.client_secret: ****** (from env CLIENT_SECRET)",
            "credentials.seed_refresh_token: ****** (from env SEED_REFRESH_TOKEN)",
            "access.require_value: ****** (from env PROXY_KEY)",
            "credentials.refresh_margin: 5m",
            "limits.max_header_bytes: 64KiB",
            "access.unix_mode: \"0660\"",
            "store.path: /etc/tokenproxy/state/tokens.json",
            "admin.listen: 127.0.0.1:9901",
        ] {
            #expect(lines.contains(expected), "missing line: \(expected)")
        }
        for secret in contractExampleEnvironment.values { #expect(!text.contains(secret)) }
        // Keys of other types are left out.
        #expect(!text.contains("credentials.region"))
        #expect(!text.contains("credentials.command"))
    }

    @Test func noErrorWarningOrDescriptionContainsASecretValue() throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        let secrets = ["env-secret-XYZZY", "file-secret-PLUGH", "literal-secret-FROTZ", "seed-secret-GNUSTO", "key-secret-REZROV"]
        try folder.write("secret", secrets[1] + "\n")
        let environment = ["CS": secrets[0], "SEED": secrets[3], "KEY": secrets[4]]
        let valid = """
            upstream: https://api.example.com
            credentials:
              type: oauth2_refresh
              token_url: https://idp/token
              client_id: c
              client_secret_env: CS
              refresh_token_env: SEED
              region: us-east-1
            access: {require_header: X-Key, require_value: \(secrets[2])}
            upstream_tls: {insecure_skip_verify: true}
            """
        let loaded = try parse(valid, base: folder.path, environment: environment)
        var texts = loaded.warnings + [loaded.configuration.resolvedDescription()]
        #expect(loaded.warnings.count == 3)

        let withFile = valid.replacingOccurrences(of: "client_secret_env: CS", with: "client_secret_file: secret")
        texts.append(try parse(withFile, base: folder.path, environment: environment).configuration.resolvedDescription())

        let invalid = [
            valid + "\nlog: {level: loud}",
            valid.replacingOccurrences(of: "client_id: c", with: "client_id: c\n  client_secret_file: secret"),
            valid.replacingOccurrences(of: "require_value: \(secrets[2])", with: "require_value: [\(secrets[2])]"),
            valid.replacingOccurrences(of: "https://api.example.com", with: "https://user:\(secrets[2])@api.example.com"),
            valid.replacingOccurrences(of: "https://api.example.com", with: "ftp://\(secrets[2]):x@h"),
            valid.replacingOccurrences(of: "token_url: https://idp/token", with: "token_url: https://u:\(secrets[2])@idp/token#x"),
            valid.replacingOccurrences(of: "client_id: c", with: "client_id: c\n  \(secrets[2]): 1"),
            valid + "\n  access: [\"\(secrets[2])",
        ]
        for yaml in invalid {
            let error = try #require(parseError(yaml, base: folder.path, environment: environment), "\(yaml)")
            texts.append(error.description)
        }
        for text in texts {
            for secret in secrets where secret != secrets[2] || !text.contains("unknown key") {
                #expect(!text.contains(secret), "\(text)")
            }
        }
    }
}
