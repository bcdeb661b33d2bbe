import Config
import Testing

@testable import Credentials

/// The pure parts of `login: browser`: PKCE, state, the authorization URL, the callback decisions.
@Suite struct BrowserLoginRulesTests {
    /// RFC 7636 Appendix B's example.
    @Test func theS256ChallengeIsRFC7636AppendixB() {
        #expect(PKCE.challenge(for: "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk") == "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM")
    }

    @Test func everyVerifierAndStateIsNewAnd43CharactersOfTheUnreservedSet() {
        let verifiers = Set((0..<50).map { _ in PKCE.random().verifier })
        let states = Set((0..<50).map { _ in LoginRandom.token() })
        #expect(verifiers.count == 50 && states.count == 50)
        for text in verifiers.union(states) {
            #expect(text.count == 43)
            #expect(
                text.unicodeScalars.allSatisfy {
                    $0.properties.isASCIIHexDigit || ("A"..."Z").contains($0) || ("a"..."z").contains($0) || "-_".unicodeScalars.contains($0)
                })
        }
    }

    private func request(endpoint: String = "https://idp.example/authorize", extra: [String: String] = [:]) -> AuthorizationRequest {
        AuthorizationRequest(
            endpoint: endpoint, clientID: "cli ent", redirectURI: "http://127.0.0.1:8400/callback", scope: "openid offline_access",
            state: "st", codeChallenge: "ch", loginHint: "ann@example.com", audience: "https://api", extra: extra)
    }

    @Test func theAuthorizationURLCarriesEveryParameterEncoded() {
        #expect(
            request().url
                == "https://idp.example/authorize?response_type=code&client_id=cli%20ent&redirect_uri=http%3A%2F%2F127.0.0.1%3A8400%2Fcallback"
                + "&scope=openid%20offline_access&state=st&code_challenge=ch&code_challenge_method=S256&login_hint=ann%40example.com&audience=https%3A%2F%2Fapi"
        )
    }

    @Test func authorizationParamsComeLastAndNeverReplaceTheProxysOwn() {
        let url = request(extra: ["prompt": "select_account", "state": "forged", "code_challenge_method": "plain"]).url
        #expect(url.hasSuffix("&prompt=select_account"))
        #expect(!url.contains("forged") && !url.contains("plain"))
    }

    @Test func anEndpointWithAQueryKeepsIt() {
        #expect(request(endpoint: "https://b2c.example/authorize?p=signin").url.hasPrefix("https://b2c.example/authorize?p=signin&response_type=code&"))
    }

    private let rules = CallbackRules(path: "/callback", state: "good-state")

    @Test func theRightStateWithACodeEndsTheWait() {
        #expect(rules.decide(method: "GET", target: "/callback?code=abc%2B1&state=good-state") == .code("abc+1"))
        #expect(rules.decide(method: "GET", target: "/callback?state=good-state&code=x&iss=https%3A%2F%2Fidp") == .code("x"))
    }

    @Test func aWrongOrMissingStateIsRefusedAndChangesNothing() {
        for target in [
            "/callback?code=abc&state=bad", "/callback?code=abc", "/callback?error=access_denied&state=bad", "/callback", "/callback?state=good-stat",
        ] {
            let decision = rules.decide(method: "GET", target: target)
            #expect(!decision.ends, "\(target)")
            guard case .badRequest = decision else {
                Issue.record("\(target): \(decision)")
                continue
            }
        }
    }

    @Test func aRepeatedParameterIsRefused() {
        guard case .badRequest = rules.decide(method: "GET", target: "/callback?code=a&code=b&state=good-state") else {
            Issue.record("two codes accepted")
            return
        }
    }

    @Test func otherPathsAre404AndOtherMethods405() {
        #expect(rules.decide(method: "GET", target: "/favicon.ico") == .notFound)
        #expect(rules.decide(method: "GET", target: "/callback/x?state=good-state&code=a") == .notFound)
        #expect(rules.decide(method: "POST", target: "/callback?state=good-state&code=a") == .methodNotAllowed)
        #expect(rules.decide(method: "HEAD", target: "/callback?state=good-state&code=a") == .methodNotAllowed)
    }

    @Test func anErrorWithTheRightStateEndsTheWaitWithItsTextCleaned() {
        let long = String(repeating: "d", count: 400)
        let decision = rules.decide(method: "GET", target: "/callback?error=access_denied&error_description=no%0D%0Athanks%1B\(long)&state=good-state")
        guard case .denied(let error, let description?) = decision else {
            Issue.record("\(decision)")
            return
        }
        #expect(error == "access_denied")
        #expect(description.hasPrefix("nothanksddd"))
        #expect(description.utf8.count == 300)
    }

    @Test func aPasteIsTheWholeAddressOrItsQuery() {
        #expect(rules.decidePaste("http://127.0.0.1:8400/callback?code=c1&state=good-state\n") == .code("c1"))
        #expect(rules.decidePaste("  ?code=c2&state=good-state ") == .code("c2"))
        #expect(rules.decidePaste("code=c3&state=good-state") == .code("c3"))
        #expect(rules.decidePaste("http://127.0.0.1:8400/elsewhere?code=c1&state=good-state") == nil)
        #expect(rules.decidePaste("hello") == nil)
        #expect(!(rules.decidePaste("http://127.0.0.1:8400/callback?code=c1&state=other")?.ends ?? true))
    }

    @Test func aRedirectWithoutAPortGetsTheBoundOneAfterTheHost() throws {
        #expect(try LoopbackRedirect.parse("http://localhost/cb").uri(port: 5000) == "http://localhost:5000/cb")
        #expect(try LoopbackRedirect.parse("http://[::1]/cb").uri(port: 5000) == "http://[::1]:5000/cb")
        #expect(try LoopbackRedirect.parse("http://127.0.0.1").uri(port: 5000) == "http://127.0.0.1:5000")
        #expect(try LoopbackRedirect.parse("http://127.0.0.1").path == "/")
        #expect(try LoopbackRedirect.parse("http://127.0.0.1:8400/callback").uri(port: 5000) == "http://127.0.0.1:8400/callback")
    }

    @Test(arguments: [
        "https://127.0.0.1/cb", "http://example.com/cb", "http://127.0.0.1:0/cb", "http://127.0.0.1:99999/cb", "http://127.0.0.1/cb?x=1",
        "http://127.0.0.1/cb#f", "http://u@127.0.0.1/cb", "http://10.0.0.1/cb",
    ])
    func aRedirectThatIsNoLoopbackHTTPAddressIsRefused(text: String) {
        #expect(throws: LoopbackRedirect.Problem.self) { try LoopbackRedirect.parse(text) }
    }

    private func jwt(_ claims: String) -> String {
        "eyJhbGciOiJub25lIn0." + Base64URL.encode(Array(claims.utf8)) + ".sig"
    }

    @Test func whoLoggedInComesFromTheIDTokenThenAJWTAccessTokenInTheContractsOrder() {
        let access = jwt(#"{"sub":"s-1","email":"a@example.com"}"#)
        #expect(LoginIdentity.person(idToken: jwt(#"{"sub":"s-1","email":"e@x","preferred_username":"ann"}"#), accessToken: access) == "ann")
        #expect(LoginIdentity.person(idToken: jwt(#"{"sub":"s-1","upn":"ann@corp"}"#), accessToken: access) == "ann@corp")
        #expect(LoginIdentity.person(idToken: nil, accessToken: access) == "a@example.com")
        #expect(LoginIdentity.person(idToken: nil, accessToken: "opaque-token") == nil)
    }
}
