import Config
import Testing

@testable import Credentials

/// SECRET_HASH through the provider's own `secretHash(for:)`, against values computed outside Swift.
@Suite struct SecretHashTests {
    private func provider(secret: String?) throws -> CognitoProvider {
        var credentials = CognitoConfiguration(clientID: "client-1", region: "us-east-1")
        credentials.clientSecret = secret.map { Secret(value: $0, origin: .literal) }
        return try CognitoProvider(credentials)
    }

    /// Expected values from Python, the way the AWS documentation computes SECRET_HASH:
    /// `base64.b64encode(hmac.new(secret, (username + client_id).encode(), hashlib.sha256).digest())`.
    /// The second case has a secret longer than SHA-256's 64-byte block (HMAC hashes such a key
    /// first) and a non-ASCII user name (UTF-8 bytes).
    @Test(arguments: [
        ("s3cr3t", "alice@example.com", "9LaJGNXxyaOuG/r7TYyy7RcBikM7nKyTHp0rlSstPN4="),
        (String(repeating: "x", count: 70), "zoë", "AxU8DDN5Zope0Lov2BxeGe81dxDs0hwLiXPS5RFvKO0="),
    ])
    func secretHashIsBase64OfTheHMACOfUsernameAndClientID(secret: String, username: String, expected: String) throws {
        #expect(try provider(secret: secret).secretHash(for: username) == expected)
    }

    @Test func aClientWithoutASecretSendsNoSecretHash() throws {
        #expect(try provider(secret: nil).secretHash(for: "alice@example.com") == nil)
    }
}
