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
