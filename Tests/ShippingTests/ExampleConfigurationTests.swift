import Config
import Foundation
import TestSupport
import Testing

/// `config/*.yaml`: each example is valid for the real binary, uses only contract keys, takes its
/// secrets from the environment, and never prints them.
@Suite struct ExampleConfigurationTests {
    /// A distinctive fake secret per variable, so a leak names the variable it came from.
    static func dummySecrets(for names: [String]) -> [String: String] {
        var env: [String: String] = [:]
        for name in names { env[name] = "dummy-\(name.lowercased())-\(UUID().uuidString.lowercased())" }
        return env
    }

    @Test func everyRequiredExampleExists() {
        let present = Set(ShippedFiles.exampleNames)
        for name in ShippedFiles.requiredExamples {
            #expect(present.contains(name), "config/\(name) is missing")
        }
    }

    @Test(arguments: ShippedFiles.exampleNames)
    func exampleIsValidForCheckAndPrintsNoSecret(_ name: String) throws {
        let path = ShippedFiles.config.appendingPathComponent(name).path
        let keys = ExampleKeys(yaml: try ShippedFiles.text(URL(fileURLWithPath: path)))
        let secrets = Self.dummySecrets(for: keys.environmentNames)
        let result = try ProxyProcess.run(args: ["check", "--config", path], env: secrets)
        #expect(result.status == 0, "tokenproxy check --config config/\(name):\n\(result.output)")
        #expect(result.stdout.contains("configuration ok"), "\(result.output)")
        // An example that draws a warning (an unused key, a literal secret) teaches the wrong thing.
        #expect(!result.stderr.contains("warning"), "config/\(name) draws warnings:\n\(result.stderr)")
        for (variable, secret) in secrets {
            #expect(!result.output.contains(secret), "the value of \(variable) appeared in check's output")
        }
    }

    @Test(arguments: ShippedFiles.exampleNames)
    func exampleUsesOnlyKnownKeys(_ name: String) throws {
        let keys = ExampleKeys(yaml: try ShippedFiles.text(ShippedFiles.config.appendingPathComponent(name)))
        #expect(keys.keys.contains("credentials.type"), "config/\(name) has no credentials.type")
        let known = Set(ConfigurationLoader.knownKeys)
        for key in keys.keys {
            let isKnown = known.contains(key)  // a Bool, so a failure does not print the whole key list
            #expect(isKnown, "config/\(name) uses \(key), which is not in ConfigurationLoader.knownKeys")
        }
    }

    @Test(arguments: ShippedFiles.exampleNames)
    func exampleTakesNoLiteralSecret(_ name: String) throws {
        let keys = ExampleKeys(yaml: try ShippedFiles.text(ShippedFiles.config.appendingPathComponent(name)))
        for literal in ["credentials.client_secret", "access.require_value"] {
            #expect(!keys.keys.contains(literal), "config/\(name) sets \(literal) literally; use \(literal)_env or _file")
        }
    }

    /// The file name says which credential type it shows; loading it in-process says which it is.
    @Test func everyCredentialTypeHasAnExampleOfItsOwn() throws {
        let expected: [String: CredentialsType] = [
            "oauth2-refresh-password.yaml": .oauth2Refresh, "oauth2-refresh-device.yaml": .oauth2Refresh,
            "oauth2-client-credentials.yaml": .oauth2ClientCredentials, "cognito.yaml": .cognito,
            "cognito-with-secret.yaml": .cognito, "json-refresh.yaml": .jsonRefresh, "static.yaml": .static,
            "file.yaml": .file, "exec.yaml": .exec, "oauth2-refresh-browser.yaml": .oauth2Refresh, "cognito-srp.yaml": .cognito,
            "oauth2-client-assertion.yaml": .oauth2ClientCredentials, "oauth2-jwt-bearer.yaml": .oauth2JWTBearer,
            "oauth2-token-exchange.yaml": .oauth2TokenExchange, "gce-metadata.yaml": .gceMetadata,
            "azure-managed-identity.yaml": .azureManagedIdentity, "aws.yaml": .aws, "aws-s3.yaml": .aws,
            "github-app.yaml": .gitHubApp, "cognito-identity-pool.yaml": .cognito,
        ]
        var covered = Set<CredentialsType>()
        for (name, type) in expected.sorted(by: { $0.key < $1.key }) {
            let url = ShippedFiles.config.appendingPathComponent(name)
            let keys = ExampleKeys(yaml: try ShippedFiles.text(url))
            let loaded = try ConfigurationLoader.load(path: url.path, environment: Self.dummySecrets(for: keys.environmentNames))
            #expect(loaded.configuration.credentials.type == type, "config/\(name)")
            covered.insert(loaded.configuration.credentials.type)
            let source = loaded.configuration.credentials.source
            var cognitoSecret: Secret? = nil
            if case .cognito(let cognito) = source { cognitoSecret = cognito.clientSecret }
            switch name {
            case "oauth2-refresh-password.yaml": #expect(source.login == .password)
            case "oauth2-refresh-device.yaml": #expect(source.login == .device)
            case "oauth2-refresh-browser.yaml": #expect(source.login == .browser)
            case "cognito-srp.yaml": #expect(source.login == .srp)
            case "oauth2-client-credentials.yaml": #expect(source.oauth2Client?.issuerURL != nil)
            case "cognito.yaml": #expect(source.type == .cognito && cognitoSecret == nil)
            case "cognito-with-secret.yaml": #expect(cognitoSecret != nil)
            case "cognito-identity-pool.yaml": #expect(source.awsSigning?.service == "execute-api")
            default: break
            }
        }
        #expect(covered == Set(CredentialsType.allCases))
    }

    /// The unit's StateDirectory= and the image's volume are /var/lib/tokenproxy; the default store
    /// (next to the config file, in /etc/tokenproxy) is read-only in both.
    @Test(arguments: ShippedFiles.requiredExamples.filter { !["static.yaml", "file.yaml", "exec.yaml"].contains($0) })
    func examplesThatKeepASessionStoreItUnderVarLib(_ name: String) throws {
        let url = ShippedFiles.config.appendingPathComponent(name)
        let keys = ExampleKeys(yaml: try ShippedFiles.text(url))
        let loaded = try ConfigurationLoader.load(path: url.path, environment: Self.dummySecrets(for: keys.environmentNames))
        #expect(loaded.configuration.store.path.hasPrefix("/var/lib/tokenproxy/"), "config/\(name): \(loaded.configuration.store.path)")
    }

    /// The sidecar needs a remotely reachable admin listener, and must not lose the Host check by it.
    @Test func sidecarKeepsTheProxyOnLoopbackAndTheHostCheckOn() throws {
        let url = ShippedFiles.config.appendingPathComponent("sidecar.yaml")
        let keys = ExampleKeys(yaml: try ShippedFiles.text(url))
        let c = try ConfigurationLoader.load(path: url.path, environment: Self.dummySecrets(for: keys.environmentNames)).configuration
        #expect(c.listen == .tcp(host: "127.0.0.1", port: 8080))
        #expect(c.allowRemote)
        #expect(c.admin?.listen == .tcp(host: "0.0.0.0", port: 9901))
        #expect(c.access.allowHosts != nil, "allow_remote without allow_hosts accepts any Host")
    }
}
