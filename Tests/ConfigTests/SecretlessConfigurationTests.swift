import Foundation
import TestSupport
import Testing

@testable import Config

/// The `credentials:` keys of CONTRACT.md "Secretless credentials".
@Suite struct SecretlessConfigurationTests {
    @Test func privateKeyJWTNeedsAKeyFileThatExists() throws {
        let missing = parseError(
            credentialsConfiguration("type: oauth2_client_credentials\ntoken_url: https://idp/t\nclient_id: a\nclient_auth: private_key_jwt"))
        #expect(missing?.keyPath == "credentials.client_key_file")
        let absent = parseError(
            credentialsConfiguration(
                "type: oauth2_client_credentials\ntoken_url: https://idp/t\nclient_id: a\nclient_auth: private_key_jwt\nclient_key_file: ./no.pem"))
        #expect(absent?.keyPath == "credentials.client_key_file")
        #expect(absent?.reason.contains("no such file") == true)
    }

    /// Every private key file the configuration names, each with the key that names it (issue 39
    /// points 6 and 21: the one rule of `KeyFilePermissions` holds for each).
    static let everyPrivateKey: [(yaml: String, key: String)] = {
        let client = "type: oauth2_client_credentials\ntoken_url: https://idp/t\nclient_id: a\n"
        return [
            (credentialsConfiguration(client + "client_auth: private_key_jwt\nclient_key_file: ./key.pem"), "credentials.client_key_file"),
            (
                credentialsConfiguration(client + "client_auth: tls_client_auth\nclient_cert_file: ./cert.pem\nclient_key_file: ./key.pem"),
                "credentials.client_key_file"
            ),
            (credentialsConfiguration(client + "client_secret_env: S\ndpop: {key_file: ./key.pem}"), "credentials.dpop.key_file"),
            (credentialsConfiguration("type: github_app\napp_id: \"1\"\ninstallation_id: \"2\"\nprivate_key_file: ./key.pem"), "credentials.private_key_file"),
            (minimalYAML + "\nupstream_tls: {client_cert_file: ./cert.pem, client_key_file: ./key.pem}", "upstream_tls.client_key_file"),
            (minimalYAML + "\ntls: {cert_file: ./cert.pem, key_file: ./key.pem}", "tls.key_file"),
            (minimalYAML + "\nforward_proxy: {ca_cert_file: ./cert.pem, ca_key_file: ./key.pem}", "forward_proxy.ca_key_file"),
            (
                minimalYAML + "\nstore: {backend: redis, url: \"rediss://h\", client_cert_file: ./cert.pem, client_key_file: ./key.pem}",
                "store.client_key_file"
            ),
            (minimalYAML + "\nstore: {encryption_key_file: ./key.pem}", "store.encryption_key_file"),
            (minimalYAML + "\nstore: {encryption_key_env: K, encryption_previous_keys_file: ./key.pem}", "store.encryption_previous_keys_file"),
        ]
    }()

    /// A folder with `key.pem` (a store key's 32 bytes of base64: the loader reads only that kind)
    /// at `mode`, and a certificate anyone may read.
    func keyFolder(mode: Int) throws -> TemporaryFolder {
        let folder = try TemporaryFolder()
        try folder.write("key.pem", Data(repeating: 7, count: 32).base64EncodedString() + "\n")
        try folder.write("cert.pem", "a certificate")
        try FileManager.default.setAttributes([.posixPermissions: mode], ofItemAtPath: folder.path + "/key.pem")
        try FileManager.default.setAttributes([.posixPermissions: 0o644], ofItemAtPath: folder.path + "/cert.pem")
        return folder
    }

    static let environment = ["S": "s", "TOKEN": "t", "K": Data(repeating: 9, count: 32).base64EncodedString()]

    /// A private key that others may read, or its group while root does not own it, is refused,
    /// naming the file, its mode and its owner; a certificate beside it may be read by anyone.
    @Test(arguments: [0o644, 0o640, 0o604, 0o440])
    func aPrivateKeyReadableByOthersIsRefused(mode: Int) throws {
        let folder = try keyFolder(mode: mode)
        defer { folder.remove() }
        try giveToNonRootOwner(folder.path + "/key.pem")
        let owner = try #require(try FileManager.default.attributesOfItem(atPath: folder.path + "/key.pem")[.ownerAccountID] as? NSNumber)
        for (yaml, key) in Self.everyPrivateKey {
            let error = try #require(parseError(yaml, base: folder.path, environment: Self.environment), "\(key)")
            let found = error.all.first { $0.keyPath == key }
            #expect(found?.reason.contains("key.pem (mode 0\(String(mode, radix: 8)), owner uid \(owner)): ") == true, "\(key): \(error)")
        }
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: folder.path + "/key.pem")
        for (yaml, key) in Self.everyPrivateKey {
            #expect(parseError(yaml, base: folder.path, environment: Self.environment) == nil, "\(key)")
        }
    }

    /// A key root owns may be group-readable: a Kubernetes Secret mounted with `fsGroup` is 0440,
    /// root's, the pod's group (issue 39 point 6). Only a root test run can make such a file.
    @Test(arguments: [0o440, 0o640])
    func aRootOwnedGroupReadableKeyIsAccepted(mode: Int) throws {
        guard geteuid() == 0 else { return }
        let folder = try keyFolder(mode: mode)
        defer { folder.remove() }
        for (yaml, key) in Self.everyPrivateKey {
            #expect(parseError(yaml, base: folder.path, environment: Self.environment) == nil, "\(key)")
        }
    }

    @Test func anUnknownAlgorithmIsNamed() {
        let error = parseError(credentialsConfiguration("type: oauth2_client_credentials\ntoken_url: https://idp/t\nclient_id: a\nclient_key_alg: HS512"))
        #expect(error?.keyPath == "credentials.client_key_alg")
    }

    @Test func anActorTokenNeedsItsType() {
        let error = parseError(
            credentialsConfiguration("type: oauth2_token_exchange\ntoken_url: https://idp/t\nsubject_token_file: ./s\nactor_token_file: ./a"))
        #expect(error?.keyPath == "credentials.actor_token_type")
    }

    @Test func tokenExchangeNeedsASubjectTokenAndJWTBearerAnAssertion() {
        #expect(parseError(credentialsConfiguration("type: oauth2_token_exchange\ntoken_url: https://idp/t"))?.keyPath == "credentials.subject_token_file")
        #expect(parseError(credentialsConfiguration("type: oauth2_jwt_bearer\ntoken_url: https://idp/t"))?.keyPath == "credentials.assertion_file")
    }

    @Test func azureTakesResourceOrScopeNotBoth() {
        #expect(parseError(credentialsConfiguration("type: azure_managed_identity"))?.keyPath == "credentials.resource")
        #expect(parseError(credentialsConfiguration("type: azure_managed_identity\nresource: r\nscope: s"))?.keyPath == "credentials.scope")
    }

    @Test func dpopIsAMappingOfKnownKeys() throws {
        let error = parseError(
            credentialsConfiguration("type: oauth2_client_credentials\ntoken_url: https://idp/t\nclient_id: a\nclient_auth: none\ndpop: {keyfile: x}"))
        #expect(error?.keyPath == "credentials.dpop.keyfile")
        let loaded = try parse(credentialsConfiguration("type: oauth2_client_credentials\ntoken_url: https://idp/t\nclient_id: a\nclient_auth: none\ndpop: {}"))
        #expect(loaded.configuration.credentials.source.oauth2Client?.dpop == DPoPConfiguration())
    }

    @Test func aKeyOfAnotherClientAuthIsAWarning() throws {
        let loaded = try parse(
            credentialsConfiguration("type: oauth2_client_credentials\ntoken_url: https://idp/t\nclient_id: a\nclient_auth: none\nclient_assertion_file: ./t"))
        #expect(loaded.warnings.contains("credentials.client_assertion_file: not used with client_auth: none"))
    }

    @Test func theSecretlessTypesLoadWithTheirDefaults() throws {
        let gce = try parse(credentialsConfiguration("type: gce_metadata")).configuration.credentials
        #expect(gce.asGCE?.serviceAccount == "default")
        let exchange = try parse(credentialsConfiguration("type: oauth2_token_exchange\ntoken_url: https://idp/t\nsubject_token_file: ./s"))
        #expect(exchange.configuration.credentials.asTokenExchange?.subjectTokenType == "urn:ietf:params:oauth:token-type:jwt")
        #expect(exchange.configuration.credentials.asTokenExchange?.subjectTokenFile == "/etc/tokenproxy/s")
        let bearer = try parse(credentialsConfiguration("type: oauth2_jwt_bearer\ntoken_url: https://idp/t\nassertion_file: ./a"))
        #expect(bearer.configuration.credentials.asJWTBearer?.assertion == .file("/etc/tokenproxy/a"))
    }
}
