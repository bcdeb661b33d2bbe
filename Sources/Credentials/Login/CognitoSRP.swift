import Basics
import BigInt
import Crypto
import Foundation

/// SRP-6a the way Cognito's USER_SRP_AUTH defines it (CONTRACT.md "Logging in a person"): the
/// 3072-bit group of RFC 3526 §4 with g = 2, SHA-256, and HKDF (RFC 5869) with the info "Caldera
/// Derived Key" for the 16-byte key that signs the PASSWORD_VERIFIER answer. Numbers are hashed
/// big-endian, with one leading zero byte when the top bit is set (`padded`). Pure: the secret `a`
/// is passed in, so the steps have known-answer tests.
struct CognitoSRP {
    enum Failure: Error, Equatable {
        /// B ≡ 0 (mod N): the server would learn nothing from us and could fake the key (SRP-6a).
        case badB
        /// u = 0 would make the key independent of the password.
        case zeroU
        case badSalt
    }

    /// RFC 3526 §4, the 3072-bit MODP group.
    static let N = BigUInt(
        "FFFFFFFFFFFFFFFFC90FDAA22168C234C4C6628B80DC1CD129024E088A67CC74020BBEA63B139B22514A08798E3404DD"
            + "EF9519B3CD3A431B302B0A6DF25F14374FE1356D6D51C245E485B576625E7EC6F44C42E9A637ED6B0BFF5CB6F406B7ED"
            + "EE386BFB5A899FA5AE9F24117C4B1FE649286651ECE45B3DC2007CB8A163BF0598DA48361C55D39A69163FA8FD24CF5F"
            + "83655D23DCA3AD961C62F356208552BB9ED529077096966D670C354E4ABC9804F1746C08CA18217C32905E462E36CE3B"
            + "E39E772C180E86039B2783A2EC07A28FB5C55DF06F4C52C9DE2BCBF6955817183995497CEA956AE515D2261898FA0510"
            + "15728E5A8AAAC42DAD33170D04507A33A85521ABDF1CBA64ECFB850458DBEF0A8AEA71575D060C7DB3970F85A6E1E4C7"
            + "ABF5AE8CDB0933D71E8C94E04A25619DCEE3D2261AD2EE6BF12FFA06D98A0864D87602733EC86A64521F2B18177B200C"
            + "BBE117577A615D6C770988C0BAD946E208E24FA074E5AB3143DB5BFCE0FD108E4B82D120A93AD2CAFFFFFFFFFFFFFFFF",
        radix: 16)!
    static let g = BigUInt(2)
    /// k = H(N | g) (SRP-6a).
    static let k = BigUInt(Data(SHA256.hash(data: padded(N) + padded(g))))

    /// The client's secret exponent; A = g^a mod N.
    let a: BigUInt
    let A: BigUInt

    init(a: BigUInt) {
        self.a = a
        self.A = Self.g.power(a, modulus: Self.N)
    }

    /// A fresh `a` of 128 random bytes (as Amplify and pycognito draw it); A ≢ 0 (mod N) always
    /// holds for g^a with N prime, but is checked as the protocol asks.
    static func random() -> CognitoSRP {
        var generator = SystemRandomNumberGenerator()
        while true {
            let bytes = (0..<128).map { _ in UInt8.random(in: 0...255, using: &generator) }
            let srp = CognitoSRP(a: BigUInt(Data(bytes)) % N)
            if srp.A % N != 0 && srp.a != 0 { return srp }
        }
    }

    /// SRP_A as Cognito takes it: lowercase hex without leading zeros.
    var srpA: String { String(A, radix: 16) }

    /// The 16-byte key from the server's B and salt (both hex, as the challenge gives them) and the
    /// person's password, for `userID` (USER_ID_FOR_SRP) in the pool named `poolName` (the part of
    /// the pool id after `_`).
    func passwordKey(poolName: String, userID: String, password: String, srpB: String, salt: String) throws(Failure) -> [UInt8] {
        guard let B = BigUInt(srpB, radix: 16), !srpB.isEmpty else { throw .badB }
        guard B % Self.N != 0 else { throw .badB }
        guard let saltBytes = Self.bytes(hex: Self.paddedHex(salt)) else { throw .badSalt }
        let u = Self.hashNumber(Self.padded(A) + Self.padded(B))
        guard u != 0 else { throw .zeroU }
        // x = H(salt | H(poolName | userID | ":" | password))
        let inner = Array(SHA256.hash(data: Array("\(poolName)\(userID):\(password)".utf8)))
        let x = Self.hashNumber(saltBytes + inner)
        // S = (B - k·g^x)^(a + u·x) mod N, with the base brought into 0..<N.
        let kgx = (Self.k * Self.g.power(x, modulus: Self.N)) % Self.N
        let base = (B % Self.N + Self.N - kgx) % Self.N
        let S = base.power(a + u * x, modulus: Self.N)
        let key = HKDF<SHA256>.deriveKey(
            inputKeyMaterial: SymmetricKey(data: Self.padded(S)), salt: Self.padded(u), info: Array("Caldera Derived Key".utf8),
            outputByteCount: 16)
        return key.withUnsafeBytes { Array($0) }
    }

    /// PASSWORD_CLAIM_SIGNATURE: base64 of HMAC-SHA256(key, poolName | userID | secret block | timestamp).
    static func signature(key: [UInt8], poolName: String, userID: String, secretBlock: [UInt8], timestamp: String) -> String {
        let message = Array(poolName.utf8) + Array(userID.utf8) + secretBlock + Array(timestamp.utf8)
        let mac = HMAC<SHA256>.authenticationCode(for: message, using: SymmetricKey(data: key))
        return Data(mac).base64EncodedString()
    }

    /// TIMESTAMP: `EEE MMM d HH:mm:ss UTC yyyy` in UTC with English names; the day is not
    /// zero-padded ("Tue Jan 2 03:04:05 UTC 2024"), as Cognito compares it.
    static func timestamp(epochSeconds: Int) -> String {
        let time = CivilTime(epochSeconds: epochSeconds)
        let weekdays = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"]  // 1970-01-01 was a Thursday
        let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
        let weekday = weekdays[((time.days % 7) + 7) % 7]
        func two(_ n: Int) -> String { n < 10 ? "0\(n)" : "\(n)" }
        let seconds = time.secondOfDay
        return "\(weekday) \(months[time.month - 1]) \(time.day) \(two(seconds / 3600)):\(two(seconds % 3600 / 60)):\(two(seconds % 60)) UTC \(time.year)"
    }

    // MARK: - Encodings

    /// Big-endian bytes, one leading zero byte when the top bit is set; zero is one zero byte.
    static func padded(_ n: BigUInt) -> [UInt8] {
        let bytes = Array(n.serialize())
        guard let first = bytes.first else { return [0] }
        return first & 0x80 != 0 ? [0] + bytes : bytes
    }

    /// The same rule on a hex string as given (the salt keeps its own leading zeros): odd length
    /// gets a "0", a first digit of 8 or more gets "00".
    static func paddedHex(_ hex: String) -> String {
        if hex.count % 2 == 1 { return "0" + hex }
        if let first = hex.first, "89abcdefABCDEF".contains(first) { return "00" + hex }
        return hex
    }

    static func bytes(hex: String) -> [UInt8]? {
        guard hex.count % 2 == 0 else { return nil }
        var out: [UInt8] = []
        out.reserveCapacity(hex.count / 2)
        var index = hex.startIndex
        while index < hex.endIndex {
            let next = hex.index(index, offsetBy: 2)
            guard let byte = UInt8(hex[index..<next], radix: 16) else { return nil }
            out.append(byte)
            index = next
        }
        return out
    }

    private static func hashNumber(_ bytes: [UInt8]) -> BigUInt {
        BigUInt(Data(SHA256.hash(data: bytes)))
    }
}
