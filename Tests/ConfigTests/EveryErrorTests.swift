import Testing

@testable import Config

/// CONTRACT.md, `tokenproxy check`: an invalid file gets every error it has, each with its key and
/// reason, not only the first.
@Suite struct EveryErrorTests {
    /// Every error of `yaml` as `key: reason` lines.
    private func errors(_ yaml: String, environment: [String: String] = minimalEnvironment) throws -> [ConfigurationError] {
        try #require(parseError(yaml, environment: environment), "the file was accepted").all
    }

    @Test func errorsInSeveralSectionsAreAllReportedInFileOrder() throws {
        let all = try errors(
            """
            listne: 127.0.0.1:1
            upstream: https://api.example.com
            drain_timeout: 10
            credentials:
              type: static
              token_env: TOKEN
            limits:
              max_connections: 0
              upstream_timeout: 0
            log:
              level: loud
            """)
        #expect(all.map(\.keyPath) == ["listne", "drain_timeout", "limits.max_connections", "limits.upstream_timeout", "log.level"], "\(all)")
        #expect(all[0].reason.contains("did you mean listen?"))
        #expect(all[2].reason.contains("must be 1 or more"))
        #expect(all[4].reason.contains("is not one of error | warn | info | debug"))
    }

    @Test func everyUnknownKeyOfASectionIsNamed() throws {
        let all = try errors(minimalYAML + "\nlimits:\n  max_header_byte: 1KiB\n  upstream_timout: 5s\n  max_body_bytes: 1MiB")
        #expect(all.map(\.keyPath) == ["limits.max_header_byte", "limits.upstream_timout"], "\(all)")
        #expect(all.allSatisfy { $0.reason.hasPrefix("unknown key (did you mean") })
    }

    @Test func errorsInsideCredentialsAreAllReported() throws {
        let all = try errors(
            """
            upstream: https://api.example.com
            credentials:
              type: oauth2_client_credentials
              client_id: c
              token_url: ftp://idp/token
              client_auth: jwt
              refresh_margin: soon
            """)
        #expect(all.map(\.keyPath) == ["credentials.refresh_margin", "credentials.token_url", "credentials.client_auth"], "\(all)")
    }

    @Test func aKeyFoundWrongIsNotAlsoReportedAsMissing() throws {
        let all = try errors("upstream: https://a\ncredentials: {type: oauth2_client_credentials, client_id: c, token_url: ftp://idp/token}")
        #expect(all.map(\.keyPath) == ["credentials.token_url"], "\(all)")
        #expect(all[0].reason.contains("only http and https"))
    }

    @Test func aMissingUpstreamDoesNotHideTheOtherSectionsErrors() throws {
        let all = try errors("credentials: {type: static, token_env: TOKEN}\nlog: {format: xml}\nworkers: -1")
        #expect(all.map(\.keyPath) == ["upstream", "workers", "log.format"], "\(all)")
    }

    @Test func aSingleErrorCarriesNoFurtherOnes() throws {
        let error = try #require(parseError(minimalYAML + "\nlog: {level: verbose}"))
        #expect(error.further.isEmpty)
        #expect(error.all == [ConfigurationError(keyPath: "log.level", reason: error.reason)])
    }

    @Test func theDescriptionNamesEveryError() throws {
        let error = try #require(parseError(minimalYAML + "\nlog: {level: verbose, format: xml}"))
        #expect(error.description.hasPrefix("log.level: "))
        #expect(error.description.contains("; log.format: "), "\(error)")
    }
}
