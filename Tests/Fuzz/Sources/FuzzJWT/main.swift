import Foundation
import FuzzSupport
import Logs

@testable import Credentials

// libFuzzer target: reading a token's claims (RFC 7519 `exp`, `iat`, `sub`, `username`; RFC 7515 §7.1
// compact form, RFC 4648 §5 base64url) and turning them into an expiry (CONTRACT.md point 2).
//
// Input: byte 0 picks the mode. Even: the rest is the token as an identity provider sent it. Odd:
// the rest is a claims payload, wrapped into a well-formed token so that every run reaches the
// JSON decoding. Nothing may trap; an `exp` that is read must be finite.

func base64URL(_ bytes: ArraySlice<UInt8>) -> String {
    Data(bytes).base64EncodedString()
        .replacingOccurrences(of: "+", with: "-")
        .replacingOccurrences(of: "/", with: "_")
        .replacingOccurrences(of: "=", with: "")
}

@_cdecl("LLVMFuzzerTestOneInput")
func fuzzOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    guard let data, size >= 1 else { return 0 }
    let input = Array(UnsafeBufferPointer(start: data, count: size))
    let token: String
    if input[0] & 1 == 0 {
        token = String(decoding: input[1...], as: UTF8.self)
    } else {
        token = "eyJhbGciOiJSUzI1NiJ9." + base64URL(input[1...]) + ".c2ln"
    }
    let claims = JWT.claims(of: token)
    if let exp = claims?.expiresAt { precondition(exp.isFinite, "a non-finite exp was read") }
    precondition(JWT.expiry(of: token) == claims?.expiresAt, "expiry(of:) and claims(of:) disagree")
    _ = CognitoProvider.poolUsername(in: token)
    let issued = IssuedToken(accessToken: token, refreshToken: nil, serverDate: 1_800_000_000)
    _ = TokenExpiry.resolve(issued, now: 1_800_000_003, defaultLifetime: 3600)
    _ = BearerToken.isUsable(token)
    SecretRegistry.shared.removeAll()
    return 0
}

runFuzzer(fuzzOneInput)
