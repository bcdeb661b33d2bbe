import Foundation
import Testing

@testable import Config

/// `type: aws` (CONTRACT.md "AWS credentials and SigV4 signing"): the keys and their checks.
@Suite struct AWSConfigurationTests {
    func aws(_ loaded: LoadedConfiguration) -> AWSConfiguration? {
        if case .aws(let c) = loaded.configuration.credentials.source { c } else { nil }
    }

    @Test func theContractsExampleLoads() throws {
        let loaded = try parse(
            credentialsConfiguration(
                """
                type: aws
                region: eu-west-1
                service: execute-api
                source: web_identity
                role_arn: arn:aws:iam::123456789012:role/reader
                role_session_name: tokenproxy
                sts_endpoint: https://sts.eu-west-1.amazonaws.com
                web_identity_token_file: ./token
                payload: unsigned
                """))
        let c = try #require(aws(loaded))
        #expect(c.region == "eu-west-1" && c.service == "execute-api")
        #expect(c.source == .webIdentity && c.payload == .unsigned)
        #expect(c.roleARN == "arn:aws:iam::123456789012:role/reader" && c.roleSessionName == "tokenproxy")
        #expect(c.stsEndpoint == "https://sts.eu-west-1.amazonaws.com")
        #expect(c.webIdentityTokenFile == "/etc/tokenproxy/token")
        #expect(loaded.configuration.credentials.type == .aws)
    }

    @Test func defaultsAndEnvironmentKeys() throws {
        let c = try #require(
            aws(try parse(credentialsConfiguration("type: aws\nregion: us-east-1\nservice: s3\naccess_key_id_env: MY_KEY\nsecret_access_key_file: ./secret"))))
        #expect(c.source == .default && c.payload == .signed)
        #expect(c.accessKeyID == .env("MY_KEY"))
        #expect(c.secretAccessKey == .file("/etc/tokenproxy/secret"))
        #expect(c.sessionToken == nil)
    }

    @Test func badCombinationsAreNamed() {
        #expect(parseError(credentialsConfiguration("type: aws\nservice: s3"))?.keyPath == "credentials.region")
        #expect(parseError(credentialsConfiguration("type: aws\nregion: us-east-1"))?.keyPath == "credentials.service")
        #expect(parseError(credentialsConfiguration("type: aws\nregion: r\nservice: s3\nsource: profile"))?.keyPath == "credentials.source")
        #expect(parseError(credentialsConfiguration("type: aws\nregion: r\nservice: s3\npayload: maybe"))?.keyPath == "credentials.payload")
        #expect(parseError(credentialsConfiguration("type: aws\nregion: r\nservice: s3\naccess_key_id_env: K"))?.keyPath == "credentials.access_key_id_env")
        #expect(
            parseError(credentialsConfiguration("type: aws\nregion: r\nservice: s3\naccess_key_id_env: K\naccess_key_id_file: ./k\nsecret_access_key_env: S"))?
                .keyPath == "credentials.access_key_id_file")
        #expect(parseError(credentialsConfiguration("type: aws\nregion: r\nservice: s3\nimds_endpoint: not a url"))?.keyPath == "credentials.imds_endpoint")
    }
}
