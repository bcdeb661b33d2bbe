import Testing
import Upstream

@testable import ProxyCore

@Suite struct UpstreamRetirementCountTests {
    @Test func closedUpstreamConnectionsAreCountedByReasonAndSummedOverTheLoops() {
        let first = LoopMetrics()
        let second = LoopMetrics()
        first.upstreamRetired(.idleTimeout)
        first.upstreamRetired(.closedByUpstream)
        second.upstreamRetired(.idleTimeout)
        second.upstreamRetired(.drain)
        var sum = LoopMetrics.Counters()
        sum.add(first.counters.withLock { $0 })
        sum.add(second.counters.withLock { $0 })
        #expect(sum.upstreamRetirements(.idleTimeout) == 2)
        #expect(sum.upstreamRetirements(.closedByUpstream) == 1)
        #expect(sum.upstreamRetirements(.drain) == 1)
        #expect(sum.upstreamRetirements(.overBound) == 0)
        #expect(UpstreamRetirement.allCases.map(sum.upstreamRetirements).reduce(0, +) == 4)
    }
}

@Suite struct RequestAndLatencyCountTests {
    @Test func requestsByStatusAndLatencyBucketsAreSummedOverTheLoopsAndRenderedCumulative() {
        let first = LoopMetrics()
        let second = LoopMetrics()
        first.requestFinished(status: 200, bytesIn: 10, bytesOut: 100)
        second.requestFinished(status: 200, bytesIn: 0, bytesOut: 50)
        second.requestFinished(status: 502, bytesIn: 0, bytesOut: 0)
        // 0.5 ms (first bucket), 3 ms (le 0.005), exactly 0.1 s (le 0.1: bounds include their value), 100 s (only +Inf).
        first.upstreamLatency(0.0005)
        first.upstreamLatency(0.003)
        second.upstreamLatency(0.1)
        second.upstreamLatency(100)
        var sum = LoopMetrics.Counters()
        sum.add(first.counters.withLock { $0 })
        sum.add(second.counters.withLock { $0 })
        #expect(sum.requestsByCode[200] == 2)
        #expect(sum.requestsByCode[502] == 1)
        #expect(sum.requestsByCode.reduce(0, +) == 3)
        #expect(sum.bytesToClients == 150)
        let cumulative = Dictionary(uniqueKeysWithValues: zip(LoopMetrics.latencyBounds, sum.cumulativeLatencyBuckets))
        #expect(cumulative[0.001] == 1)
        #expect(cumulative[0.0025] == 1)
        #expect(cumulative[0.005] == 2)
        #expect(cumulative[0.05] == 2)
        #expect(cumulative[0.1] == 3)
        #expect(cumulative[60] == 3)
        #expect(sum.latencyCount == 4)
    }
}
