import Config
import Logs
import Testing

@testable import ProxyCore

/// CONTRACT.md "Budgets": the token bucket and one caller's budget, with time passed in.
@Suite struct BudgetTests {
    static func configuration(maxConcurrent: Int? = nil, rate: Double? = nil, burst: Int = 1) -> BudgetConfiguration {
        var c = BudgetConfiguration()
        c.maxConcurrent = maxConcurrent
        c.ratePerSecond = rate
        c.rateText = rate.map { "\($0)/s" }
        c.burst = burst
        return c
    }

    @Test func aFullBucketGivesItsBurstThenRefillsAtItsRate() {
        var bucket = TokenBucket(rate: 2, capacity: 3, now: 100)
        #expect(bucket.take(now: 100) == nil)
        #expect(bucket.take(now: 100) == nil)
        #expect(bucket.take(now: 100) == nil)
        // Empty: a token comes back in half a second, so the client is told 1 (whole seconds, at least 1).
        #expect(bucket.take(now: 100) == 1)
        #expect(bucket.take(now: 100.25) == 1)
        #expect(bucket.take(now: 100.5) == nil)
        // Never more than the capacity, however long it rested.
        #expect(bucket.take(now: 1000) == nil)
        #expect(bucket.tokens == 2)
    }

    @Test func aSlowRateTellsTheWholeSecondsUntilTheNextToken() {
        // 6 a minute: one every 10 s.
        var bucket = TokenBucket(rate: 0.1, capacity: 1, now: 0)
        #expect(bucket.take(now: 0) == nil)
        #expect(bucket.take(now: 0) == 10)
        #expect(bucket.take(now: 2.5) == 8)
        #expect(bucket.take(now: 9.99) == 1)
        #expect(bucket.take(now: 10) == nil)
        // One an hour.
        var hourly = TokenBucket(rate: 1.0 / 3600, capacity: 1, now: 0)
        #expect(hourly.take(now: 0) == nil)
        #expect(hourly.take(now: 0) == 3600)
    }

    @Test func aClockReadEarlierOnAnotherLoopAddsNothing() {
        var bucket = TokenBucket(rate: 1, capacity: 1, now: 50)
        #expect(bucket.take(now: 50) == nil)
        #expect(bucket.take(now: 49.5) == 1)
        #expect(bucket.updatedAt == 50)
        #expect(bucket.take(now: 51) == nil)
    }

    @Test func concurrencyIsBoundedAndEachReleaseFreesOnePlace() {
        var budget = CallerBudget(Self.configuration(maxConcurrent: 2), now: 0)
        #expect(budget.admit(now: 0) == .admitted)
        #expect(budget.admit(now: 0) == .admitted)
        #expect(budget.admit(now: 0) == .refused(.concurrency, retryAfter: 1))
        budget.release()
        #expect(budget.inFlight == 1)
        #expect(budget.admit(now: 0) == .admitted)
        budget.release()
        budget.release()
        budget.release()
        #expect(budget.inFlight == 0, "never below zero")
    }

    @Test func aConcurrencyRefusalTakesNoTokenAndARateRefusalNoPlace() {
        var budget = CallerBudget(Self.configuration(maxConcurrent: 1, rate: 1, burst: 2), now: 0)
        #expect(budget.admit(now: 0) == .admitted)
        #expect(budget.admit(now: 0) == .refused(.concurrency, retryAfter: 1))
        #expect(budget.bucket?.tokens == 1, "the refused request took no token")
        budget.release()
        #expect(budget.admit(now: 0) == .admitted)
        budget.release()
        #expect(budget.admit(now: 0) == .refused(.rate, retryAfter: 1))
        #expect(budget.inFlight == 0, "the refused request holds no place")
    }

    @Test func theSharedBudgetKeepsCallersApartAndCountsRefusals() {
        let budget = RouteBudget(Self.configuration(maxConcurrent: 1))
        #expect(budget.admit(caller: "a", now: 0) == .admitted)
        #expect(budget.admit(caller: "b", now: 0) == .admitted)
        #expect(budget.admit(caller: "a", now: 0) == .refused(.concurrency, retryAfter: 1))
        budget.release(caller: "a")
        #expect(budget.admit(caller: "a", now: 0) == .admitted)
        var registry = MetricRegistry()
        budget.collect(route: "api", into: &registry)
        let text = registry.text
        #expect(text.contains(#"tokenproxy_budget_refusals_total{route="api",caller="a",reason="concurrency"} 1"#), "\(text)")
        #expect(text.contains(#"tokenproxy_budget_refusals_total{route="api",caller="b",reason="concurrency"} 0"#), "\(text)")
        #expect(text.contains(#"tokenproxy_budget_refusals_total{route="api",caller="a",reason="rate"} 0"#), "\(text)")
    }

    @Test func theRefusalIs429WithRetryAfterAndStaysOpen() {
        let error = ProxyError.rateLimited(.rate, retryAfter: 7)
        #expect(error.status == 429 && error.code == "rate_limited" && !error.closesConnection)
        let text = String(decoding: error.response(keepAlive: true, isHead: false), as: UTF8.self)
        #expect(text.hasPrefix("HTTP/1.1 429 Too Many Requests\r\n"), "\(text)")
        #expect(text.contains("\r\nRetry-After: 7\r\n"), "\(text)")
        let concurrency = String(decoding: ProxyError.rateLimited(.concurrency, retryAfter: 1).response(keepAlive: true, isHead: false), as: UTF8.self)
        #expect(concurrency.contains("\r\nRetry-After: 1\r\n"), "\(concurrency)")
    }
}
