import Config
import Testing

@testable import ProxyCore

/// CONTRACT.md "Programs in a sandbox", "Audit log": what a line says of a route's credential and of
/// the client's target.
@Suite struct RouteAuditTests {
    @Test(arguments: [
        ("", "authorization"),
        ("inject: {header: x-api-key, format: \"{token}\"}", "header:x-api-key"),
        ("inject: {header: Authorization, format: \"token {token}\"}", "authorization"),
        ("inject: {basic_username: x-access-token}", "basic"),
        ("inject: {query: key}", "query:key"),
    ])
    func thePlacementIsNamedAsTheContractNamesIt(inject: String, expected: String) throws {
        let route = try CredentialPlacementTests.configuration(inject).routes[0]
        #expect(RouteAudit(route).placement == expected)
        #expect(RouteAudit(route).credential == "static")
    }

    @Test func aStaticTokenIsNeverFetchedSoItHasNoCredentialEvents() throws {
        let route = try CredentialPlacementTests.configuration("").routes[0]
        #expect(RouteAudit.action(route.credentials, environment: [:]) == nil)
    }

    @Test(
        arguments: [
            ("/v1/items?key=secret", nil, "/v1/items"),
            ("/v1/items#frag", nil, "/v1/items"),
            ("http://user:password@api.example.com:8080/a?b", "api.example.com:8080", "/a"),
            ("http://api.example.com", "api.example.com", "/"),
            ("*", nil, "*"),
        ] as [(String, String?, String)])
    func theTargetLosesItsQueryAndUserinfo(target: String, host: String?, path: String) {
        let split = AuditTarget.split(target)
        #expect(split.host == host)
        #expect(split.path == path)
    }
}
