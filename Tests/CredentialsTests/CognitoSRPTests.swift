import BigInt
import Foundation
import Testing

@testable import Credentials

/// Known answers for Cognito's SRP-6a steps, computed outside Swift with pycognito 2024.5.1's
/// `AWSSRP` (its own `calculate_a`, `get_password_authentication_key` and `pad_hex`) for a fixed
/// a = 0xa1a1…a1 (64 bytes), a salt whose first digit is 8 or more (so it takes a "00" pad), and a
/// server B = k·v + g^b mod N for b = 0xb2b2…b2 (32 bytes) and the verifier of the password below.
@Suite struct CognitoSRPTests {
    static let a = BigUInt(String(repeating: "a1", count: 64), radix: 16)!
    static let salt = "9f3c" + String(repeating: "11", count: 14)
    static let userID = "5a1b2c3d-user"
    static let password = "Correct horse 1!"
    static let expectedA =
        "23df1c17eaa36cfdbeff857cda3a87bae3cb8829311966fc96d94fcea29d537294644587a9697033562cd2ba65e32506"
        + "167a05deedbdd2cc32b56c246448f92b18d745c00fbb1e1190304304711e9a19fbcc4ccd2f91d9114651e927d786d75d"
        + "bf5c1861fda93fff7c3977be79da117d8ea206850416637cb20ea04b69ac6e02df2f538bdc1c74076193de4623d245b0"
        + "66f2ad4a12009774ee8aa8ebf0d6774e02ae300ce4eed203e9f66075758c43cea6fcb0f8cfbbd68cb114806e559f53ae"
        + "264a9edeb2521f3c2018a4a593b37c68b75fbdf1f9c5fa2cc5a040f7b076c634e2b0fe5632ae1bc2e411c42324871cfb"
        + "ac2516c1dea6ecbc0b4c07b5c718a59e302e0b8710cc80ecb77a5d1ff5371104eb2e92df2cc1a9245abba1e8908da8ce"
        + "b30471698baa53f9ed12a90439c12f5bdc61cdb6e8b08f06c110dcbc26e8bed8590caf27336d5b604a2b5008131509f5"
        + "5efafb23c5092deb54ca9eb12f3a1d13a6334cfee04f06820be7731aaa7a9855d1bf392d2f528ad2f3a30b8746233703"
    static let serverB =
        "e029dd2afbd05ed8aee155213f5a8fa84319ffd126bd23eda2f8d1054bdc6467d2e3572fb9dc3afa3312098a016a47dd"
        + "50e9c9a9142efdd9835ebc317046256ae38cbc285d8b9e7272b6a0d08c33a855de766df1fd152fd0fa056067d034878b"
        + "c91ab170c642edd85c0823daee11bb317bb7916528dfeebd44fa109cb59241b91ab998e8cea9833ccd692f32b9bd3e55"
        + "9349d1eed4f4e1e5f86eea2eceb44beb3bacd01b84477be71991c80b0877f871ef98484f6e61b6d61ba912e372df4f31"
        + "91d24ac97f631cca4c2ef21bd2160cd255b5472d913bdd1aed6e20e50e391a149bafd71b038864bf14f2f34e3bf6137e"
        + "2cfb12b2cf17463e834aed52abf086472222ffc10b67fd0e021919e8dd32312f67ad60fb5a2add8bb47b8a1dbbdde358"
        + "7dd11958e7aba51d905c5baee092695b89892395eb85e33869f4bdb0f2f30ac7e19197acaf0b500023a8e12578e6d7f9"
        + "ba7983d1c5fef6b1e744da1fd21b0a9ec49c896eb216fe3da0d8bf89bd049449b67f40ab31db0aacc755c0b796699759"

    @Test func kIsTheHashOfThePaddedGroup() {
        #expect(String(CognitoSRP.k, radix: 16) == "538282c4354742d7cbbde2359fcf67f9f5b3a6b08791e5011b43b8a5b66d9ee6")
    }

    @Test func aIsGToTheSecretModN() {
        #expect(CognitoSRP(a: Self.a).srpA == Self.expectedA)
    }

    @Test func thePasswordKeyAndSignatureMatchPycognito() throws {
        let key = try CognitoSRP(a: Self.a).passwordKey(
            poolName: "KnownPool", userID: Self.userID, password: Self.password, srpB: Self.serverB, salt: Self.salt)
        #expect(key.map { String(format: "%02x", $0) }.joined() == "9acfb923dad536e0d874a3eae4ddd93e")
        let signature = CognitoSRP.signature(
            key: key, poolName: "KnownPool", userID: Self.userID, secretBlock: Array(0..<40), timestamp: "Tue Jan 2 03:04:05 UTC 2024")
        #expect(signature == "3CytHHZBuukC9IPQGAwwt7fCXNbWEnywepfpPEWfxwE=")
    }

    @Test func anotherPasswordGivesAnotherKey() throws {
        let srp = CognitoSRP(a: Self.a)
        let right = try srp.passwordKey(poolName: "KnownPool", userID: Self.userID, password: Self.password, srpB: Self.serverB, salt: Self.salt)
        let wrong = try srp.passwordKey(poolName: "KnownPool", userID: Self.userID, password: "wrong", srpB: Self.serverB, salt: Self.salt)
        #expect(right != wrong)
    }

    @Test(arguments: ["0", "00", String(CognitoSRP.N, radix: 16), String(CognitoSRP.N * 2, radix: 16), "", "not hex"])
    func aBThatIsZeroModuloNIsRefused(b: String) {
        #expect(throws: CognitoSRP.Failure.badB) {
            try CognitoSRP(a: Self.a).passwordKey(poolName: "P", userID: "u", password: "p", srpB: b, salt: "01")
        }
    }

    @Test func paddingFollowsTheTopBit() {
        #expect(CognitoSRP.padded(BigUInt(0)) == [0])
        #expect(CognitoSRP.padded(BigUInt(0x7f)) == [0x7f])
        #expect(CognitoSRP.padded(BigUInt(0x80)) == [0, 0x80])
        #expect(CognitoSRP.paddedHex("abc") == "0abc")
        #expect(CognitoSRP.paddedHex("8a") == "008a")
        #expect(CognitoSRP.paddedHex("0a8b") == "0a8b")
    }

    /// The day is not zero-padded (Cognito compares the text); days 1-9 are where that shows.
    @Test(arguments: [
        (1_704_164_645, "Tue Jan 2 03:04:05 UTC 2024"),
        (1_709_251_199, "Thu Feb 29 23:59:59 UTC 2024"),
        (0, "Thu Jan 1 00:00:00 UTC 1970"),
        (1_798_761_600, "Fri Jan 1 00:00:00 UTC 2027"),
        (1_764_979_200, "Sat Dec 6 00:00:00 UTC 2025"),
        (951_868_800, "Wed Mar 1 00:00:00 UTC 2000"),
    ])
    func timestampHasEnglishNamesAndAnUnpaddedDay(seconds: Int, expected: String) {
        #expect(CognitoSRP.timestamp(epochSeconds: seconds) == expected)
    }

    @Test func freshSecretsDiffer() {
        #expect(CognitoSRP.random().srpA != CognitoSRP.random().srpA)
    }

    /// Not an assertion on time: prints how long one login's arithmetic takes (a fresh `a` and A,
    /// then the key), for docs/ and the issue.
    @Test func oneLoginsArithmeticIsTimed() throws {
        let clock = ContinuousClock()
        var key: [UInt8] = []
        let elapsed = try clock.measure {
            let srp = CognitoSRP.random()
            key = try srp.passwordKey(poolName: "KnownPool", userID: Self.userID, password: Self.password, srpB: Self.serverB, salt: Self.salt)
        }
        // The HKDF output that signs the PASSWORD_VERIFIER answer: 16 bytes.
        #expect(key.count == 16)
        print("SRP arithmetic of one login: \(elapsed)")
    }
}
