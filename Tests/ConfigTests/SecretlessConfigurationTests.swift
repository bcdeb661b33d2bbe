import Foundation
import Testing

@testable import Config

/// The `credentials:` keys of CONTRACT.md "Secretless credentials".
@Suite struct SecretlessConfigurationTests {
    func credentials(_ lines: String) -> String {
        "upstream: https://api.example.com\ncredentials:\n" + lines.split(separator: "\n").map { "  " + $0 }.joined(separator: "\n")
    }

    @Test func privateKeyJWTNeedsAKeyFileThatExists() throws {
        let missing = parseError(credentials("type: oauth2_client_credentials\ntoken_url: https://idp/t\nclient_id: a\nclient_auth: private_key_jwt"))
        #expect(missing?.keyPath == "credentials.client_key_file")
        let absent = parseError(
            credentials("type: oauth2_client_credentials\ntoken_url: https://idp/t\nclient_id: a\nclient_auth: private_key_jwt\nclient_key_file: ./no.pem"))
        #expect(absent?.keyPath == "credentials.client_key_file")
        #expect(absent?.reason.contains("no such file") == true)
    }

    /// A private key that group or others may read is refused, naming the file and its mode; a
    /// certificate beside it may be read by anyone (issue 29).
    @Test(arguments: [0o644, 0o640, 0o604])
    func aPrivateKeyReadableByOthersIsRefused(mode: Int) throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        try folder.write("key.pem", "not read at check time")
        try folder.write("cert.pem", "a certificate")
        try FileManager.default.setAttributes([.posixPermissions: mode], ofItemAtPath: folder.path + "/key.pem")
        try FileManager.default.setAttributes([.posixPermissions: 0o644], ofItemAtPath: folder.path + "/cert.pem")
        let octal = "0" + String(mode, radix: 8)
        for (yaml, key) in [
            (
                credentials(
                    "type: oauth2_client_credentials\ntoken_url: https://idp/t\nclient_id: a\nclient_auth: private_key_jwt\nclient_key_file: ./key.pem"),
                "credentials.client_key_file"
            ),
            (
                credentials("type: oauth2_client_credentials\ntoken_url: https://idp/t\nclient_id: a\nclient_secret_env: S\ndpop: {key_file: ./key.pem}"),
                "credentials.dpop.key_file"
            ),
            (minimalYAML + "\nupstream_tls: {client_cert_file: ./cert.pem, client_key_file: ./key.pem}", "upstream_tls.client_key_file"),
        ] {
            let error = try #require(parseError(yaml, base: folder.path, environment: ["S": "s", "TOKEN": "t"]), "\(key)")
            let found = error.all.first { $0.keyPath == key }
            #expect(found?.reason.contains("readable by group or others (mode \(octal))") == true, "\(error)")
            #expect(found?.reason.contains("key.pem") == true)
        }
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: folder.path + "/key.pem")
        #expect(parseError(minimalYAML + "\nupstream_tls: {client_cert_file: ./cert.pem, client_key_file: ./key.pem}", base: folder.path) == nil)
    }

    @Test func anUnknownAlgorithmIsNamed() {
        let error = parseError(credentials("type: oauth2_client_credentials\ntoken_url: https://idp/t\nclient_id: a\nclient_key_alg: HS512"))
        #expect(error?.keyPath == "credentials.client_key_alg")
    }

    @Test func anActorTokenNeedsItsType() {
        let error = parseError(
            credentials("type: oauth2_token_exchange\ntoken_url: https://idp/t\nsubject_token_file: ./s\nactor_token_file: ./a"))
        #expect(error?.keyPath == "credentials.actor_token_type")
    }

    @Test func tokenExchangeNeedsASubjectTokenAndJWTBearerAnAssertion() {
        #expect(parseError(credentials("type: oauth2_token_exchange\ntoken_url: https://idp/t"))?.keyPath == "credentials.subject_token_file")
        #expect(parseError(credentials("type: oauth2_jwt_bearer\ntoken_url: https://idp/t"))?.keyPath == "credentials.assertion_file")
    }

    @Test func azureTakesResourceOrScopeNotBoth() {
        #expect(parseError(credentials("type: azure_managed_identity"))?.keyPath == "credentials.resource")
        #expect(parseError(credentials("type: azure_managed_identity\nresource: r\nscope: s"))?.keyPath == "credentials.scope")
    }

    @Test func dpopIsAMappingOfKnownKeys() throws {
        let error = parseError(credentials("type: oauth2_client_credentials\ntoken_url: https://idp/t\nclient_id: a\nclient_auth: none\ndpop: {keyfile: x}"))
        #expect(error?.keyPath == "credentials.dpop.keyfile")
        let loaded = try parse(credentials("type: oauth2_client_credentials\ntoken_url: https://idp/t\nclient_id: a\nclient_auth: none\ndpop: {}"))
        #expect(loaded.configuration.credentials.source.oauth2Client?.dpop == DPoPConfiguration())
    }

    @Test func aKeyOfAnotherClientAuthIsAWarning() throws {
        let loaded = try parse(
            credentials("type: oauth2_client_credentials\ntoken_url: https://idp/t\nclient_id: a\nclient_auth: none\nclient_assertion_file: ./t"))
        #expect(loaded.warnings.contains("credentials.client_assertion_file: not used with client_auth: none"))
    }

    @Test func theSecretlessTypesLoadWithTheirDefaults() throws {
        let gce = try parse(credentials("type: gce_metadata")).configuration.credentials
        #expect(gce.asGCE?.serviceAccount == "default")
        let exchange = try parse(credentials("type: oauth2_token_exchange\ntoken_url: https://idp/t\nsubject_token_file: ./s"))
        #expect(exchange.configuration.credentials.asTokenExchange?.subjectTokenType == "urn:ietf:params:oauth:token-type:jwt")
        #expect(exchange.configuration.credentials.asTokenExchange?.subjectTokenFile == "/etc/tokenproxy/s")
        let bearer = try parse(credentials("type: oauth2_jwt_bearer\ntoken_url: https://idp/t\nassertion_file: ./a"))
        #expect(bearer.configuration.credentials.asJWTBearer?.assertion == .file("/etc/tokenproxy/a"))
    }
}
