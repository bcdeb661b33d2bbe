import Foundation
import Testing

@testable import Config

/// `type: cognito` with `identity_pool_id` (CONTRACT.md "Amazon Cognito identity pools"): the keys,
/// what they default to, and the bad combinations `check` names by key.
@Suite struct CognitoIdentityPoolConfigurationTests {
    let pool = "eu-west-1:0a1b2c3d-4e5f-6a7b-8c9d-0e1f2a3b4c5d"

    func credentials(_ lines: String) -> String {
        "upstream: https://api.example.com\ncredentials:\n  type: cognito\n  client_id: abc123\n"
            + lines.split(separator: "\n").map { "  " + $0 }.joined(separator: "\n")
    }

    @Test func theIdentityPoolLoadsAndSignsForTheCognitoRegion() throws {
        let loaded = try parse(credentials("user_pool_id: eu-west-1_Ab12Cd34E\nidentity_pool_id: \(pool)\naws: {service: execute-api}"))
        let c = try #require(loaded.configuration.credentials.asCognito)
        let identity = try #require(c.identityPool)
        #expect(identity.identityPoolID == pool)
        #expect(identity.region == "eu-west-1")
        #expect(identity.loginsProvider == "cognito-idp.eu-west-1.amazonaws.com/eu-west-1_Ab12Cd34E")
        #expect(identity.endpoint == "https://cognito-identity.eu-west-1.amazonaws.com/")
        #expect(identity.payload == .signed)
        // The Logins token is the ID token.
        #expect(c.useToken == .id)
        let scope = try #require(loaded.configuration.credentials.source.awsSigning)
        #expect(scope == AWSSigningScope(region: "eu-west-1", service: "execute-api", payload: .signed))
    }

    @Test func theEndpointAndPayloadCanBeSet() throws {
        let loaded = try parse(
            credentials(
                "region: us-east-2\nuser_pool_id: us-east-2_Xy\nidentity_pool_id: \(pool)\nidentity_endpoint: http://127.0.0.1:9000\n"
                    + "aws:\n  service: s3\n  payload: unsigned"))
        let identity = try #require(loaded.configuration.credentials.asCognito?.identityPool)
        #expect(identity.endpoint == "http://127.0.0.1:9000")
        #expect(identity.region == "us-east-2")
        #expect(identity.loginsProvider == "cognito-idp.us-east-2.amazonaws.com/us-east-2_Xy")
        #expect(identity.payload == .unsigned)
    }

    @Test func withoutAnIdentityPoolNothingSigns() throws {
        let loaded = try parse(credentials("region: us-east-1"))
        #expect(loaded.configuration.credentials.asCognito?.identityPool == nil)
        #expect(loaded.configuration.credentials.source.awsSigning == nil)
        #expect(loaded.configuration.credentials.asCognito?.useToken == .access)
    }

    @Test func badCombinationsAreNamedByKey() {
        #expect(parseError(credentials("region: us-east-1\nidentity_pool_id: \(pool)\naws: {service: s3}"))?.keyPath == "credentials.user_pool_id")
        #expect(parseError(credentials("user_pool_id: us-east-1_Ab\nidentity_pool_id: \(pool)"))?.keyPath == "credentials.aws.service")
        #expect(parseError(credentials("user_pool_id: us-east-1_Ab\nidentity_pool_id: \(pool)\naws: {payload: signed}"))?.keyPath == "credentials.aws.service")
        for bad in [
            "0a1b2c3d-4e5f-6a7b-8c9d-0e1f2a3b4c5d", "us-east-1:not-a-uuid", "us-east-1:0a1b2c3d-4e5f-6a7b-8c9d-0e1f2a3b4c5",
            "US:0a1b2c3d-4e5f-6a7b-8c9d-0e1f2a3b4c5d",
        ] {
            #expect(
                parseError(credentials("user_pool_id: us-east-1_Ab\nidentity_pool_id: \"\(bad)\"\naws: {service: s3}"))?.keyPath
                    == "credentials.identity_pool_id", "\(bad)")
        }
        #expect(
            parseError(credentials("user_pool_id: us-east-1_Ab\nidentity_pool_id: \(pool)\naws: {service: s3, region: x}"))?.keyPath
                == "credentials.aws.region")
        #expect(
            parseError(credentials("user_pool_id: us-east-1_Ab\nidentity_pool_id: \(pool)\naws: {service: s3}\nuse_token: access"))?.keyPath
                == "credentials.use_token")
        #expect(parseError(credentials("region: us-east-1\naws: {service: s3}"))?.keyPath == "credentials.aws")
        #expect(parseError(credentials("region: us-east-1\nidentity_endpoint: http://127.0.0.1:1"))?.keyPath == "credentials.identity_endpoint")
        #expect(
            parseError(credentials("user_pool_id: us-east-1_Ab\nidentity_pool_id: \(pool)\naws: {service: s3}\nidentity_endpoint: nope"))?.keyPath
                == "credentials.identity_endpoint")
    }

    @Test func identityPoolIDShape() {
        #expect(CognitoIdentityPoolConfiguration.isIdentityPoolID("us-east-1:0A1B2C3D-4e5f-6a7b-8c9d-0e1f2a3b4c5d"))
        #expect(!CognitoIdentityPoolConfiguration.isIdentityPoolID(":0a1b2c3d-4e5f-6a7b-8c9d-0e1f2a3b4c5d"))
        #expect(!CognitoIdentityPoolConfiguration.isIdentityPoolID("us-east-1:0a1b2c3d-4e5f-6a7b-8c9d-0e1f2a3b4c5d:x"))
        #expect(!CognitoIdentityPoolConfiguration.isIdentityPoolID("us-east-1:0a1b2c3d-4e5f-6a7b-8c9d-0e1f2a3b4c5g"))
    }
}
