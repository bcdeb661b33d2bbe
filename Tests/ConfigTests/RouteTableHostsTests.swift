import Testing

@testable import Config

/// `RouteTable.hostRoute`: which `host` route a name and port reach, whatever the path (what a
/// CONNECT reaches, docs/FORWARD-PROXY.md).
@Suite struct RouteTableHostsTests {
    static func table() throws -> RouteTable {
        let yaml = RouteTests.routesFile(
            """
              - name: exact
                match: {host: [API.example.com, "dotted.test.", "ported.example.com:8443"]}
                upstream: https://a.example.com
                credentials: {type: static, token_env: TOKEN}
              - name: wild
                match: {host: "*.example.com"}
                upstream: https://b.example.com
                credentials: {type: static, token_env: TOKEN}
              - name: prefixed
                match: {host: files.test, path_prefix: /v1/}
                upstream: https://c.example.com
                credentials: {type: static, token_env: TOKEN}
              - name: paths
                match: {path_prefix: /orders/}
                upstream: https://d.example.com
                credentials: {type: static, token_env: TOKEN}
            """)
        return RouteTable(try ConfigurationLoader.parse(yaml: yaml, baseDirectory: "/", environment: RouteTests.environment).configuration.routes)
    }

    @Test func exactNamesThenWildcardsWithTheDefaultPortWhenTheEntryGivesNone() throws {
        let table = try Self.table()
        #expect(table.hostRoute(forName: "api.example.com", port: 443, defaultPort: 443) == .route(0))
        #expect(table.hostRoute(forName: "API.EXAMPLE.COM.", port: 443, defaultPort: 443) == .route(0))
        #expect(table.hostRoute(forName: "dotted.test", port: 443, defaultPort: 443) == .route(0), "the entry's trailing dot is ignored")
        #expect(table.hostRoute(forName: "dotted.test.", port: 443, defaultPort: 443) == .route(0))
        #expect(table.hostRoute(forName: "a.b.example.com", port: 443, defaultPort: 443) == .route(1))
        #expect(table.hostRoute(forName: "ported.example.com", port: 8443, defaultPort: 443) == .route(0))
        #expect(table.hostRoute(forName: "ported.example.com", port: 443, defaultPort: 443) == .route(1), "falls through to the *. name")
        #expect(table.hostRoute(forName: "files.test", port: 443, defaultPort: 443) == .route(2), "the path prefix does not matter")
    }

    @Test func aNamedHostOnAnotherPortIsToldApartFromAnUnnamedOne() throws {
        let table = try Self.table()
        #expect(table.hostRoute(forName: "api.example.com", port: 8443, defaultPort: 443) == .otherPort)
        #expect(table.hostRoute(forName: "dotted.test", port: 80, defaultPort: 443) == .otherPort)
        #expect(table.hostRoute(forName: "api.example.com", port: 80, defaultPort: 80) == .route(0))
        #expect(table.hostRoute(forName: "example.com", port: 443, defaultPort: 443) == .unnamed, "*. needs a label before the suffix")
        #expect(table.hostRoute(forName: "xexample.com", port: 443, defaultPort: 443) == .unnamed)
        #expect(table.hostRoute(forName: "d.example.com.evil", port: 443, defaultPort: 443) == .unnamed)
        #expect(table.hostRoute(forName: "", port: 443, defaultPort: 443) == .unnamed)
        #expect(table.hostRoute(forName: ".", port: 443, defaultPort: 443) == .unnamed)
        #expect(table.hostRoute(forName: ".example.com", port: 443, defaultPort: 443) == .unnamed)
    }
}
