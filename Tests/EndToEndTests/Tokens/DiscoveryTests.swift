import Foundation
import TestSupport
import Testing

/// OpenID discovery (`credentials.issuer_url`) against the real OAuth test server: a document that
/// names another issuer is refused (RFC 8414 §3.3, OpenID Connect Discovery §4.3; issue 29), so a
/// server cannot send the client's secret to endpoints of its choosing.
@Suite(.tags(.endToEnd), .timeLimit(.minutes(35))) struct DiscoveryTests {
    static func serve(_ idp: OAuthServer, issuerURL: String) throws -> ProxyProcess {
        try ProxyProcess(
            config: """
                listen: 127.0.0.1:0
                upstream: http://127.0.0.1:9
                workers: 1
                credentials:
                  type: oauth2_client_credentials
                  issuer_url: \(issuerURL)
                  client_id: app
                  client_secret_env: DISCOVERY_SECRET
                """, environment: ["DISCOVERY_SECRET": "secret"])
    }

    @Test func aDocumentNamingAnotherIssuerIsRefused() throws {
        var options = OAuthServer.Options()
        options.extraArguments = ["--issuer", "http://attacker.invalid"]
        let idp = try OAuthServer.start(options)
        defer { idp.stop() }
        let proxy = try Self.serve(idp, issuerURL: idp.baseURL)
        #expect(
            proxy.waitForStderr(containing: "names the issuer \"http://attacker.invalid\", not credentials.issuer_url \"\(idp.baseURL)\""),
            "\(proxy.stderr)")
        expectProxyError(try curl([proxy.baseURL + "/x"]), status: 503, code: "token_unavailable")
        #expect(try idp.stats().count(OAuthGrant.clientCredentials) == 0, "no token request went anywhere")
        proxy.terminate()
        _ = try proxy.waitForExit()
    }

    /// The document's own issuer, with or without a trailing slash in the configuration, is taken.
    @Test(arguments: ["", "/"])
    func theIssuerItWasAskedOfIsTaken(suffix: String) throws {
        let idp = try OAuthServer.start()
        defer { idp.stop() }
        let proxy = try Self.serve(idp, issuerURL: idp.baseURL + suffix)
        #expect(try eventually { try idp.stats().count(OAuthGrant.clientCredentials) == 1 })
        proxy.terminate()
        _ = try proxy.waitForExit()
    }
}
