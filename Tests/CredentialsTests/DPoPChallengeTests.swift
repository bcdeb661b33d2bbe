import Testing

@testable import Credentials

@Suite("WWW-Authenticate: the error parameter of a DPoP challenge (RFC 9449 §9)")
struct DPoPChallengeTests {
    @Test(
        "use_dpop_nonce as the error parameter, quoted or not, in any challenge of the field",
        arguments: [
            #"DPoP error="use_dpop_nonce", error_description="Resource server requires nonce in DPoP proof""#,
            #"DPoP algs="ES256 PS256", error=use_dpop_nonce"#,
            #"Bearer realm="api", DPoP ERROR = "use_dpop_nonce""#,
            #"DPoP error="use_dpop_nonce""#,
        ])
    func asks(value: String) {
        #expect(DPoPChallenge.asksForNonce(value))
    }

    @Test(
        "the words elsewhere are no demand for a nonce",
        arguments: [
            #"DPoP error="invalid_token", error_description="use_dpop_nonce was expected""#,
            #"DPoP realm="use_dpop_nonce""#,
            #"Bearer error="invalid_token""#,
            "DPoP use_dpop_nonce",
            #"DPoP error_use="use_dpop_nonce""#,
            "",
        ])
    func doesNotAsk(value: String) {
        #expect(!DPoPChallenge.asksForNonce(value))
    }

    @Test("quoted-pairs are unquoted")
    func quotedPairs() {
        #expect(DPoPChallenge.errorCodes(#"DPoP error="a\"b", error="c""#) == [#"a"b"#, "c"])
    }
}
