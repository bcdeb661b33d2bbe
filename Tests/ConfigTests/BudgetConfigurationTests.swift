import Testing

@testable import Config

/// `budget:` (CONTRACT.md "Programs in a sandbox", "Budgets"): the rate's units, the burst's
/// default, the defaults a route takes from the top, and the errors `check` prints.
@Suite struct BudgetConfigurationTests {
    @Test(arguments: [
        ("20/s", 20.0), ("0.5/s", 0.5), ("120/m", 2.0), ("1.5/m", 0.025), ("3600/h", 1.0), ("90/h", 0.025), (" 10 / s ", 10.0),
    ])
    func ratesAreRequestsPerSecond(text: String, perSecond: Double) {
        let parsed = BudgetConfiguration.parseRate(text)
        #expect(parsed.map { abs($0 - perSecond) < 1e-9 } == true, "\(text): \(String(describing: parsed))")
    }

    @Test(arguments: ["20", "20/d", "0/s", "-1/s", "/s", "1e3/s", ".5/s", "5./s", "1.2.3/s", "twenty/s", "20/ss", "inf/s", "nan/s"])
    func notARate(text: String) {
        #expect(BudgetConfiguration.parseRate(text) == nil, "\(text)")
    }

    @Test func aRouteReadsItsBudgetAndTheBurstDefaultsToTheRateRoundedUp() throws {
        let one = try parse(minimalYAML + "\nbudget: {max_concurrent: 8, rate: 2.5/s}").configuration.routes[0].budget
        #expect(one?.maxConcurrent == 8 && one?.ratePerSecond == 2.5 && one?.burst == 3)
        let slow = try parse(minimalYAML + "\nbudget: {rate: 6/m}").configuration.routes[0].budget
        #expect(slow?.burst == 1 && slow?.maxConcurrent == nil)
        let burst = try parse(minimalYAML + "\nbudget: {rate: 20/s, burst: 40}").configuration
        #expect(burst.routes[0].budget?.burst == 40)
        #expect(burst.resolvedDescription().contains("budget: rate 20/s, burst 40 per caller"), "\(burst.resolvedDescription())")
        #expect(try parse(minimalYAML).configuration.routes[0].budget == nil)
    }

    @Test func theTopBudgetIsEveryRoutesUnlessItHasItsOwn() throws {
        let yaml = """
            budget: {max_concurrent: 4}
            routes:
              - name: a
                match: {path_prefix: /a/}
                upstream: https://a.example.com
                credentials: {type: static, token_env: TOKEN}
              - name: b
                match: {path_prefix: /b/}
                upstream: https://b.example.com
                credentials: {type: static, token_env: TOKEN}
                budget: {rate: 1/s}
            """
        let routes = try parse(yaml).configuration.routes
        #expect(routes[0].budget?.maxConcurrent == 4)
        #expect(routes[1].budget?.maxConcurrent == nil && routes[1].budget?.ratePerSecond == 1)
    }

    @Test func everyBadKeyIsNamed() throws {
        let error = try #require(parseError(minimalYAML + "\nbudget: {max_concurrent: 0, rate: 5/d, burst: 0, ceiling: 3}"))
        let paths = Set(error.all.map(\.keyPath))
        #expect(paths.isSuperset(of: ["budget.max_concurrent", "budget.rate", "budget.burst", "budget.ceiling"]), "\(error.all)")
        let burstAlone = try #require(parseError(minimalYAML + "\nbudget: {burst: 5}"))
        #expect(burstAlone.all.contains { $0.keyPath == "budget.burst" && $0.reason.contains("set rate") }, "\(burstAlone.all)")
        let empty = try #require(parseError(minimalYAML + "\nbudget: {}"))
        #expect(empty.all.contains { $0.keyPath == "budget" && $0.reason.contains("max_concurrent, rate") }, "\(empty.all)")
        let routed = """
            routes:
              - name: a
                upstream: https://a.example.com
                credentials: {type: static, token_env: TOKEN}
                budget: {rate: fast}
            """
        let inRoute = try #require(parseError(routed))
        #expect(inRoute.all.contains { $0.keyPath == "routes[0].budget.rate" }, "\(inRoute.all)")
    }
}
