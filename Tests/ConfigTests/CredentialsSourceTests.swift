import Foundation
import Testing

@testable import Config

/// `credentials:` becomes one typed value per source: what each `client_auth` needs travels with it,
/// and the grant of oauth2_jwt_bearer is a file or a key, never neither.
@Suite struct CredentialsSourceTests {
    @Test func aJWTBearerWithoutAnAssertionFileSignsWithTheClientKeyWhichClientAuthSharesAndCheckPrintsOnce() throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        try folder.write("key.pem", "not read at load time")
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: folder.path + "/key.pem")
        let loaded = try parse(
            credentialsConfiguration(
                "type: oauth2_jwt_bearer\ntoken_url: https://idp/t\nclient_id: a\nclient_auth: private_key_jwt\nclient_key_file: ./key.pem\n"
                    + "client_key_id: k1\nassertion_subject: svc\nassertion_lifetime: 2m"),
            base: folder.path)
        let key = SigningKeyFile(path: folder.resolved + "/key.pem", keyID: "k1")
        guard case .oauth2JWTBearer(let bearer) = loaded.configuration.credentials.source else {
            Issue.record("not a jwt-bearer source: \(loaded.configuration.credentials.source)")
            return
        }
        var signed = JWTBearerConfiguration.SignedAssertion(key: key)
        signed.subject = "svc"
        signed.lifetime = 120
        #expect(bearer.assertion == .signed(signed))
        #expect(bearer.client.authentication == .privateKeyJWT(key, audience: nil))
        let printed = loaded.configuration.resolvedDescription().split(separator: "\n")
        #expect(printed.filter { $0.hasPrefix("credentials.client_key_file:") } == ["credentials.client_key_file: \(folder.resolved)/key.pem"])
        #expect(!printed.contains { $0.hasPrefix("credentials.assertion_file:") })
    }

    @Test func clientSecretJWTCarriesTheSecretItSignsWith() throws {
        let loaded = try parse(
            credentialsConfiguration(
                "type: oauth2_client_credentials\ntoken_url: https://idp/t\nclient_id: a\nclient_auth: client_secret_jwt\nclient_secret_env: S"),
            environment: ["S": "shared-secret"])
        let secret = Secret(value: "shared-secret", origin: .env("S"))
        #expect(loaded.configuration.credentials.source.oauth2Client?.authentication == .clientSecretJWT(secret: secret, audience: nil))
        #expect(loaded.configuration.credentials.source.secrets == [secret])
    }

    @Test func aClientKeyThatClientAuthDoesNotUseIsWarnedAboutAndStillPrinted() throws {
        let loaded = try parse(
            credentialsConfiguration("type: oauth2_client_credentials\ntoken_url: https://idp/t\nclient_id: a\nclient_auth: none\nclient_assertion_file: ./t"))
        #expect(loaded.configuration.credentials.source.oauth2Client?.authentication == ClientAuthenticationConfiguration.none)
        #expect(loaded.warnings == ["credentials.client_assertion_file: not used with client_auth: none"])
        #expect(loaded.configuration.resolvedDescription().contains("\ncredentials.client_assertion_file: /etc/tokenproxy/t\n"))
    }

    @Test func onlyTheSourcesWithoutAnIdentityProviderKeepNoSession() throws {
        for type in CredentialsType.allCases {
            #expect(type.keepsSession == ![.static, .file, .exec].contains(type), "\(type)")
            // A person logs in only where the type reads a login flow or a login URL.
            let readsLogin = type.keys.contains("login") || type.keys.contains("login_url")
            #expect(type.sessionNeedsLogin == readsLogin, "\(type)")
        }
    }
}
