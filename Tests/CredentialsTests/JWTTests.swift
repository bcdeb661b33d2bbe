import Foundation
import Testing

@testable import Credentials

@Suite("JWT")
struct JWTTests {
    @Test("the exp claim of a JWT is read")
    func readsExp() {
        let token = makeJWT(payload: #"{"sub":"user-1","exp":1893456000,"iat":1893452400}"#)
        let claims = JWT.claims(of: token)
        #expect(claims?.expiresAt == 1_893_456_000)
        #expect(claims?.issuedAt == 1_893_452_400)
        #expect(claims?.subject == "user-1")
    }

    @Test("a fractional exp is kept")
    func fractionalExp() {
        #expect(JWT.expiry(of: makeJWT(payload: #"{"exp":1700000000.5}"#)) == 1_700_000_000.5)
    }

    @Test("a JWT without exp has no expiry")
    func noExp() {
        let token = makeJWT(payload: #"{"sub":"x"}"#)
        #expect(JWT.claims(of: token) != nil)
        #expect(JWT.expiry(of: token) == nil)
    }

    @Test("an exp that is no number counts as absent")
    func nonNumericExp() {
        #expect(JWT.expiry(of: makeJWT(payload: #"{"exp":"1700000000"}"#)) == nil)
        #expect(JWT.expiry(of: makeJWT(payload: #"{"exp":true}"#)) == nil)
        #expect(JWT.expiry(of: makeJWT(payload: #"{"exp":null}"#)) == nil)
    }

    @Test(
        "malformed tokens are no JWT",
        arguments: [
            "", "opaque-token", "a.b", "a.b.c.d", "..", ".e30.", "e30..sig",
            "e30.!!!.sig",  // not base64url
            "e30.e30+.sig",  // standard base64 alphabet
            "e30.ZXhw.sig",  // payload "exp": not JSON
            "e30.WzFd.sig",  // payload [1]: not an object
            "bm90anNvbg.eyJleHAiOjF9.sig",  // header "notjson"
            "e30.eyJleHAiOjF9a.sig",  // length ≡ 1 (mod 4)
        ]
    )
    func malformedTokens(token: String) {
        #expect(JWT.claims(of: token) == nil)
        #expect(JWT.expiry(of: token) == nil)
    }

    @Test("payloads of every length decode with and without padding")
    func paddingVariants() {
        // Payload lengths 12, 13, 14 bytes: base64 lengths ≡ 0, 2, 3 (mod 4).
        for payload in [#"{"exp":1234}"#, #"{"exp":12345}"#, #"{"exp":123456}"#] {
            let expected = Double(payload.dropFirst(7).dropLast())!
            let unpadded = makeJWT(payload: payload)
            #expect(JWT.expiry(of: unpadded) == expected)
            let parts = unpadded.split(separator: ".")
            var body = String(parts[1])
            while body.count % 4 != 0 { body += "=" }
            #expect(JWT.expiry(of: "\(parts[0]).\(body).\(parts[2])") == expected)
        }
    }

    @Test("the base64url alphabet (- and _) is decoded")
    func urlAlphabet() {
        // "?>" and "~" encode to characters that differ between base64 and base64url.
        let payload = #"{"exp":99,"x":"??>>~~~"}"#
        let encoded = base64URL(Data(payload.utf8))
        #expect(encoded.contains("-") || encoded.contains("_"))
        #expect(JWT.expiry(of: makeJWT(payload: payload)) == 99)
    }

    @Test("the expiry of an issued token prefers exp, then expires_at, then expires_in, then the default")
    func expiryOrder() {
        let jwt = makeJWT(payload: #"{"exp":5000}"#)
        #expect(TokenExpiry.resolve(IssuedToken(accessToken: jwt, expiresIn: 10, expiresAt: 20), now: 100, defaultLifetime: 60) == 5000)
        #expect(TokenExpiry.resolve(IssuedToken(accessToken: "t", expiresIn: 10, expiresAt: 20), now: 100, defaultLifetime: 60) == 20)
        #expect(TokenExpiry.resolve(IssuedToken(accessToken: "t", expiresIn: 10), now: 100, defaultLifetime: 60) == 110)
        #expect(TokenExpiry.resolve(IssuedToken(accessToken: "t"), now: 100, defaultLifetime: 60) == 160)
        #expect(TokenExpiry.resolve(IssuedToken(accessToken: "t"), now: 100, defaultLifetime: nil) == nil)
    }

    @Test("a token with spaces, control characters or nothing in it is not usable")
    func bearerTokenCharacters() {
        #expect(BearerToken.isUsable("abc.DEF-123_~+/="))
        for bad in ["", "a b", "a\r\nX-Evil: 1", "a\tb", "a\u{7F}", "tökén", "a\u{0}"] {
            #expect(!BearerToken.isUsable(bad))
        }
    }

    @Test("RFC 3339 times with and without fractions and offsets are read")
    func rfc3339() {
        #expect(RFC3339.parse("2026-11-22T03:00:00Z") == 1_795_316_400)
        #expect(RFC3339.parse("2026-11-22T04:00:00+01:00") == 1_795_316_400)
        #expect(RFC3339.parse("2026-11-22T03:00:00.250Z") == 1_795_316_400.25)
        #expect(RFC3339.parse("yesterday") == nil)
    }
}
