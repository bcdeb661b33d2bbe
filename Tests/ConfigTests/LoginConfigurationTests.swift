import Testing

@testable import Config

/// The keys of `login: browser` and `login: srp` (CONTRACT.md "Logging in a person"), and `check`
/// naming every key each flow lacks.
@Suite struct LoginConfigurationTests {
    private func errors(_ credentials: String) throws -> [ConfigurationError] {
        try #require(parseError("upstream: https://api.example.com\ncredentials:\n" + credentials), "the file was accepted").all
    }

    @Test func aBrowserLoginWithoutDiscoveryNamesEveryMissingKey() throws {
        let all = try errors("  type: oauth2_refresh\n  login: browser\n")
        #expect(all.map(\.keyPath) == ["credentials.client_id", "credentials.token_url", "credentials.authorization_url"], "\(all)")
    }

    @Test func discoveryFillsTheBrowserLoginsURLs() throws {
        let loaded = try parse(
            "upstream: https://api.example.com\ncredentials:\n  type: oauth2_refresh\n  login: browser\n  client_id: c\n  issuer_url: https://idp.example\n"
                + "  redirect_uri: http://localhost:8400/callback\n  authorization_params: {prompt: select_account}\n")
        let c = try #require(loaded.configuration.credentials.asOAuth2Refresh)
        #expect(c.login == .browser)
        #expect(c.browser.redirectURI?.port == 8400)
        #expect(c.browser.redirectURI?.host == .localhost)
        #expect(c.browser.authorizationParams == ["prompt": "select_account"])
        #expect(loaded.warnings.isEmpty)
    }

    @Test func aRedirectThatIsNoLoopbackHTTPAddressIsAnError() throws {
        let all = try errors(
            "  type: oauth2_refresh\n  login: browser\n  client_id: c\n  issuer_url: https://idp.example\n  redirect_uri: https://app.example/cb\n")
        #expect(all.map(\.keyPath) == ["credentials.redirect_uri"])
    }

    @Test func authorizationParamsMayNotSetTheProxysOwnParameters() throws {
        let all = try errors(
            "  type: oauth2_refresh\n  login: browser\n  client_id: c\n  issuer_url: https://idp.example\n  authorization_params: {state: x}\n")
        #expect(all.map(\.keyPath) == ["credentials.authorization_params.state"])
    }

    @Test func anSRPLoginNamesEveryMissingKey() throws {
        let all = try errors("  type: cognito\n  login: srp\n  region: us-east-1\n")
        #expect(all.map(\.keyPath) == ["credentials.client_id", "credentials.user_pool_id"], "\(all)")
    }

    @Test func thePoolIdGivesTheDefaultRegion() throws {
        let loaded = try parse(
            "upstream: https://api.example.com\ncredentials:\n  type: cognito\n  login: srp\n  client_id: c\n  user_pool_id: eu-west-3_Ab12Cd34E\n")
        #expect(loaded.configuration.credentials.asCognito?.region == "eu-west-3")
        #expect(loaded.configuration.credentials.asCognito?.userPoolID == "eu-west-3_Ab12Cd34E")
    }

    @Test func flowsOfOtherTypesAreRefused() throws {
        #expect(try errors("  type: cognito\n  login: browser\n  client_id: c\n  region: us-east-1\n").map(\.keyPath) == ["credentials.login"])
        #expect(
            try errors("  type: oauth2_refresh\n  login: srp\n  client_id: c\n  token_url: https://idp.example/t\n").map(\.keyPath) == ["credentials.login"])
    }

    @Test func aMalformedPoolIdIsAnError() throws {
        #expect(try errors("  type: cognito\n  login: srp\n  client_id: c\n  user_pool_id: nounderscore\n").map(\.keyPath).contains("credentials.user_pool_id"))
    }
}
