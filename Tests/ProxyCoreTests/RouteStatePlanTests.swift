import Config
import Credentials
import Logging
import Testing

@testable import ProxyCore

/// Which token managers a reload keeps (docs/ROUTES.md "Reload"): decided without sockets.
@Suite struct RouteStatePlanTests {
    static let environment = ["T1": "token-one", "T2": "token-two"]

    static func configuration(_ routes: String) throws -> Configuration {
        try ConfigurationLoader.parse(
            yaml: """
                listen: 127.0.0.1:8080
                store: {path: /tmp/route-plan-tests/tokens.json}
                routes:
                \(routes)
                """, baseDirectory: "/", environment: environment
        ).configuration
    }

    static let logger = Logger(label: "route-plan-test")

    static func make(_ configuration: Configuration) throws -> TokenManager {
        try TokenManager(configuration: configuration, logger: logger)
    }

    static let two = """
          - {name: a, match: {path_prefix: /a/}, upstream: "https://a.example.com", credentials: {type: static, token_env: T1}}
          - {name: b, match: {path_prefix: /b/}, upstream: "https://b.example.com", credentials: {type: static, token_env: T2}}
        """

    @Test func aFirstConfigurationMakesOneManagerPerRoute() throws {
        let plan = try RouteStatePlan(try Self.configuration(Self.two), previous: nil, make: Self.make)
        #expect(plan.states.map(\.name) == ["a", "b"])
        #expect(plan.created.count == 2)
        #expect(plan.retired.isEmpty)
        #expect(plan.states[0].tokens !== plan.states[1].tokens)
    }

    @Test func routesWhoseCredentialsStayKeepTheirManagerAndStateEvenWhenTheirMatchChanges() throws {
        let old = try Self.configuration(Self.two)
        let first = try RouteStatePlan(old, previous: nil, make: Self.make)
        let new = try Self.configuration(
            """
              - {name: a, match: {host: a.example.test}, upstream: "https://other.example.com", credentials: {type: static, token_env: T1}}
              - {name: b, match: {path_prefix: /b/}, upstream: "https://b.example.com", credentials: {type: static, token_env: T1}}
              - {name: c, match: {path_prefix: /c/}, upstream: "https://c.example.com", credentials: {type: static, token_env: T2}}
            """)
        let plan = try RouteStatePlan(new, previous: (old, first.states), make: Self.make)
        #expect(plan.states[0] === first.states[0], "a: same credentials and store")
        // b's credentials changed: a new manager; the old one of b is retired.
        #expect(plan.states[1].tokens !== first.states[1].tokens)
        #expect(plan.created.count == 2, "b changed, c is new")
        #expect(plan.retired.count == 1)
        #expect(plan.retired[0] === first.states[1].tokens)
    }

    /// A route's budget (its counts and places) is kept while its `budget` stays as it was; a
    /// changed one starts afresh, with the same token manager.
    @Test func aBudgetIsKeptWhileItStaysTheSame() throws {
        let budgeted = """
              - {name: a, match: {path_prefix: /a/}, upstream: "https://a.example.com", credentials: {type: static, token_env: T1}, budget: {max_concurrent: 2}}
              - {name: b, match: {path_prefix: /b/}, upstream: "https://b.example.com", credentials: {type: static, token_env: T2}}
            """
        let old = try Self.configuration(budgeted)
        let first = try RouteStatePlan(old, previous: nil, make: Self.make)
        #expect(first.states[0].budget?.configuration.maxConcurrent == 2)
        #expect(first.states[1].budget == nil)
        let same = try RouteStatePlan(try Self.configuration(budgeted), previous: (old, first.states), make: Self.make)
        #expect(same.states[0] === first.states[0] && same.states[0].budget === first.states[0].budget)
        let changed = try RouteStatePlan(
            try Self.configuration(budgeted.replacing("max_concurrent: 2", with: "max_concurrent: 3")), previous: (old, first.states),
            make: Self.make)
        #expect(changed.states[0].budget?.configuration.maxConcurrent == 3)
        #expect(changed.states[0].tokens === first.states[0].tokens, "the session is kept")
        #expect(changed.states[1] === first.states[1])
    }

    @Test func aRemovedRouteRetiresItsManager() throws {
        let old = try Self.configuration(Self.two)
        let first = try RouteStatePlan(old, previous: nil, make: Self.make)
        let new = try Self.configuration(
            """
              - {name: a, match: {path_prefix: /a/}, upstream: "https://a.example.com", credentials: {type: static, token_env: T1}}
            """)
        let plan = try RouteStatePlan(new, previous: (old, first.states), make: Self.make)
        #expect(plan.created.isEmpty)
        #expect(plan.retired.map { ObjectIdentifier($0) } == [ObjectIdentifier(first.states[1].tokens)])
    }

    @Test func routesSharingOneStoreAndCredentialsShareOneManager() throws {
        let config = try Self.configuration(
            """
              - {name: a, match: {path_prefix: /a/}, upstream: "https://a.example.com", credentials: {type: static, token_env: T1}, store: {path: /tmp/route-plan-tests/shared.json}}
              - {name: b, match: {path_prefix: /b/}, upstream: "https://b.example.com", credentials: {type: static, token_env: T1}, store: {path: /tmp/route-plan-tests/shared.json}}
            """)
        let plan = try RouteStatePlan(config, previous: nil, make: Self.make)
        #expect(plan.created.count == 1)
        #expect(plan.states[0].tokens === plan.states[1].tokens)
    }
}
