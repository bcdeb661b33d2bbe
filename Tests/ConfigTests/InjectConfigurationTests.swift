import Testing

@testable import Config

/// CONTRACT.md "Where the credential goes": `inject` at the top and in a route, and every rule
/// `check` names by key and reason.
@Suite struct InjectConfigurationTests {
    func inject(_ body: String) -> String { minimalYAML + "\ninject: " + body }

    /// Every error of a file, each on its own.
    func errors(_ yaml: String) -> [ConfigurationError] { parseError(yaml)?.all ?? [] }

    @Test func withoutInjectTheTokenGoesAsBearer() throws {
        #expect(try parse(minimalYAML).configuration.routes[0].inject == nil)
    }

    @Test func eachPlacementIsRead() throws {
        #expect(
            try parse(inject("{header: X-API-Key, format: \"{token}\"}")).configuration.routes[0].inject
                == InjectConfiguration(.header(name: "X-API-Key", format: "{token}")))
        #expect(
            try parse(inject("{format: \"token {token}\"}")).configuration.routes[0].inject
                == InjectConfiguration(.header(name: "Authorization", format: "token {token}")))
        #expect(
            try parse(inject("{header: Proxy-Authorization}")).configuration.routes[0].inject
                == InjectConfiguration(.header(name: "Proxy-Authorization", format: "Bearer {token}")))
        #expect(
            try parse(inject("{basic_username: x-access-token}")).configuration.routes[0].inject
                == InjectConfiguration(.basic(username: "x-access-token")))
        #expect(try parse(inject("{query: api_key}")).configuration.routes[0].inject == InjectConfiguration(.query(parameter: "api_key")))
        #expect(try parse(inject("{header: authorization, format: \"Bearer {token}\"}")).configuration.routes[0].inject?.isDefault == true)
    }

    @Test func moreThanOnePlaceIsNamedByEachExtraKey() {
        let found = errors(inject("{header: X-Key, basic_username: u, query: k}"))
        #expect(found.map(\.keyPath) == ["inject.basic_username", "inject.query"])
        #expect(found.allSatisfy { $0.reason.contains("at most one of header, basic_username and query") })
    }

    @Test func formatNeedsTheTokenExactlyOnce() {
        #expect(errors(inject("{format: \"Bearer\"}")).map(\.description) == ["inject.format: must contain {token} exactly once (found 0)"])
        #expect(errors(inject("{format: \"{token}{token}\"}")).map(\.keyPath) == ["inject.format"])
    }

    @Test func formatGoesWithNeitherBasicNorQuery() {
        #expect(errors(inject("{basic_username: u, format: \"{token}\"}")).map(\.keyPath) == ["inject.format"])
        #expect(errors(inject("{query: k, format: \"{token}\"}")).map(\.keyPath) == ["inject.format"])
    }

    @Test func theHeaderMustBeAFieldTheUpstreamGetsAndTheProxyDoesNotSet() {
        for name in [
            "Connection", "Keep-Alive", "TE", "Trailer", "Upgrade", "Proxy-Connection", "Transfer-Encoding", "Host", "content-length",
            "X-Forwarded-For", "x-forwarded-host", "X-Forwarded-Proto", "X API Key", "X:Key", "Kéy",
        ] {
            let found = errors(inject("{header: \"\(name)\"}"))
            #expect(found.map(\.keyPath) == ["inject.header"], "\(name)")
        }
        #expect((try? parse(inject("{header: Proxy-Authorization}"))) != nil)
        #expect((try? parse(inject("{header: X-Serverless-Authorization}"))) != nil)
    }

    @Test func lineBreaksAreRefusedEverywhere() {
        #expect(errors(inject("{header: \"X-Key\\r\\nEvil: 1\"}")).map(\.keyPath) == ["inject.header"])
        #expect(errors(inject("{format: \"Bearer {token}\\r\\nEvil: 1\"}")).map(\.keyPath) == ["inject.format"])
        #expect(errors(inject("{query: \"k\\nx\"}")).map(\.keyPath) == ["inject.query"])
        #expect(errors(inject("{query: \"a&b\"}")).map(\.keyPath) == ["inject.query"])
        #expect(errors(inject("{basic_username: \"a\\nb\"}")).map(\.keyPath) == ["inject.basic_username"])
        #expect(errors(inject("{basic_username: \"a:b\"}")).map(\.keyPath) == ["inject.basic_username"])
    }

    @Test func unknownKeysAreNamed() {
        #expect(errors(inject("{headr: X-Key}")).map(\.keyPath) == ["inject.headr"])
    }

    @Test func checkNamesEveryProblemOfOneSectionAtOnce() {
        let problems = InjectConfiguration.problems(header: "Host", format: "{token}", basicUsername: "u", query: nil)
        #expect(problems.map(\.key) == ["basic_username", "header", "format"])
    }

    @Test func aRoutesInjectReplacesTheTopOneAsAWhole() throws {
        let yaml = """
            listen: 127.0.0.1:8080
            inject: {header: X-API-Key, format: "{token}"}
            routes:
              - name: a
                match: {path_prefix: /a/}
                upstream: https://a.example.com
                credentials: {type: static, token_env: TOKEN}
              - name: b
                match: {path_prefix: /b/}
                upstream: https://b.example.com
                credentials: {type: static, token_env: TOKEN}
                inject: {query: key}
            """
        let routes = try parse(yaml).configuration.routes
        #expect(routes[0].inject == InjectConfiguration(.header(name: "X-API-Key", format: "{token}")))
        #expect(routes[1].inject == InjectConfiguration(.query(parameter: "key")))
    }

    @Test func aRoutesBadInjectIsNamedWithItsRoute() {
        let yaml = """
            listen: 127.0.0.1:8080
            routes:
              - name: a
                upstream: https://a.example.com
                credentials: {type: static, token_env: TOKEN}
                inject: {header: Host}
            """
        #expect(errors(yaml).map(\.keyPath) == ["routes[0].inject.header"])
    }

    @Test func dpopWithInjectIsAWarning() throws {
        let yaml = """
            upstream: https://api.example.com
            credentials:
              type: oauth2_client_credentials
              token_url: https://idp/t
              client_id: a
              client_auth: none
              dpop: {}
            inject: {header: X-API-Key}
            """
        let loaded = try parse(yaml)
        #expect(loaded.warnings.contains { $0.hasPrefix("inject:") && $0.contains("DPoP") })
        #expect(try parse(minimalYAML + "\ninject: {header: X-API-Key}").warnings.allSatisfy { !$0.contains("DPoP") })
    }

    @Test func checkPrintsWhereTheTokenGoesWithoutIt() throws {
        let text = try parse(inject("{basic_username: x-access-token}")).configuration.resolvedDescription()
        #expect(text.contains("Authorization: Basic base64(x-access-token:{token})"))
        #expect(!text.contains("static-token-value"))
    }
}
