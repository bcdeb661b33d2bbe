import Foundation
import Logs
import Testing
import Upstream

@testable import ProxyCore

/// The metrics of two loops of one process.
private func twoLoops() -> (SharedProxyState, LoopMetrics, LoopMetrics) {
    let shared = SharedProxyState()
    return (shared, LoopMetrics(shared: shared), LoopMetrics(shared: shared))
}

/// The counters of both loops added up, as `/metrics` shows them.
private func summed(_ first: LoopMetrics, _ second: LoopMetrics) -> LoopMetrics.Counters {
    var sum = LoopMetrics.Counters()
    sum.add(first.counters)
    sum.add(second.counters)
    return sum
}

@Suite struct UpstreamRetirementCountTests {
    @Test func closedUpstreamConnectionsAreCountedByReasonAndSummedOverTheLoops() {
        let (_, first, second) = twoLoops()
        let a = first.slot(for: "a")
        let b = second.slot(for: "b")
        let a2 = second.slot(for: "a")
        #expect(a == a2 && a != b, "a route has one slot on every loop")
        first.counters.routes[a].retirements[UpstreamRetirement.idleTimeout.rawValue] += 1
        first.counters.routes[a].retirements[UpstreamRetirement.closedByUpstream.rawValue] += 1
        second.counters.routes[a2].retirements[UpstreamRetirement.idleTimeout.rawValue] += 1
        second.counters.routes[b].retirements[UpstreamRetirement.drain.rawValue] += 1
        let sum = summed(first, second)
        #expect(sum.routes[a].retirements[UpstreamRetirement.idleTimeout.rawValue] == 2)
        #expect(sum.upstreamRetirements(.idleTimeout) == 2)
        #expect(sum.upstreamRetirements(.closedByUpstream) == 1)
        #expect(sum.upstreamRetirements(.drain) == 1)
        #expect(sum.upstreamRetirements(.overBound) == 0)
        #expect(UpstreamRetirement.allCases.map(sum.upstreamRetirements).reduce(0, +) == 4)
    }
}

@Suite struct RequestAndLatencyCountTests {
    @Test func requestsByStatusAndLatencyBucketsAreSummedOverTheLoopsAndRenderedCumulative() {
        let (_, first, second) = twoLoops()
        first.requestFinished(status: 200, bytesIn: 10, bytesOut: 100)
        second.requestFinished(status: 200, bytesIn: 0, bytesOut: 50)
        second.requestFinished(status: 502, bytesIn: 0, bytesOut: 0)
        // 0.5 ms (first bucket), 3 ms (le 0.005), exactly 0.1 s (le 0.1: bounds include their value), 100 s (only +Inf).
        first.upstreamLatency(0.0005)
        first.upstreamLatency(0.003)
        second.upstreamLatency(0.1)
        second.upstreamLatency(100)
        let sum = summed(first, second)
        #expect(sum.requestsByCode[200] == 2)
        #expect(sum.requestsByCode[502] == 1)
        #expect(sum.requestsByCode.reduce(0, +) == 3)
        #expect(sum.bytesToClients == 150)
        let cumulative = Dictionary(uniqueKeysWithValues: zip(LoopMetrics.latencyBounds, sum.upstreamLatency.cumulative))
        #expect(cumulative[0.001] == 1)
        #expect(cumulative[0.0025] == 1)
        #expect(cumulative[0.005] == 2)
        #expect(cumulative[0.05] == 2)
        #expect(cumulative[0.1] == 3)
        #expect(cumulative[60] == 3)
        #expect(sum.upstreamLatency.count == 4)
    }
}

@Suite struct RouteHistogramTests {
    @Test func aRoutesHistogramsAreSummedOverTheLoopsAndRenderedCumulativeWithTheRouteLabel() {
        let (shared, first, second) = twoLoops()
        let slot = first.slot(for: "orders")
        _ = second.slot(for: "orders")
        first.counters.routes[slot].requestFinished(status: 200, seconds: 0.0002)
        second.counters.routes[slot].requestFinished(status: 204, seconds: 0.004)
        second.counters.routes[slot].requestFinished(status: 503, seconds: 45)
        let sum = summed(first, second)
        var registry = MetricRegistry()
        MetricsRenderer.routeSeries(sum.routes, names: shared.routeNames, into: &registry)
        let text = registry.text
        #expect(text.contains(#"tokenproxy_request_duration_seconds_bucket{route="orders",code_class="2xx",le="0.00025"} 1"#), "\(text)")
        #expect(text.contains(#"tokenproxy_request_duration_seconds_bucket{route="orders",code_class="2xx",le="0.005"} 2"#))
        #expect(text.contains(#"tokenproxy_request_duration_seconds_bucket{route="orders",code_class="2xx",le="+Inf"} 2"#))
        #expect(text.contains(#"tokenproxy_request_duration_seconds_count{route="orders",code_class="2xx"} 2"#))
        // 45 s is above every bound: only +Inf counts it.
        #expect(text.contains(#"tokenproxy_request_duration_seconds_bucket{route="orders",code_class="5xx",le="30.0"} 0"#))
        #expect(text.contains(#"tokenproxy_request_duration_seconds_bucket{route="orders",code_class="5xx",le="+Inf"} 1"#))
    }

    @Test func aStatusOutsideTheClassesCountsAsServerError() {
        #expect(RouteCounters.codeClass(101) == 0)
        #expect(RouteCounters.codeClass(499) == 3)
        #expect(RouteCounters.codeClass(999) == 4)
    }

    @Test func everyFamilyInTheCatalogIsInObservabilityDoc() throws {
        let docs = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("docs/OBSERVABILITY.md")
        let text = try String(contentsOf: docs, encoding: .utf8)
        for family in MetricCatalog.families {
            let listed = text.contains("`\(family.name)`") || text.contains("`\(family.name){")
            #expect(listed, "docs/OBSERVABILITY.md does not list \(family.name)")
        }
        #expect(Set(MetricCatalog.families.map(\.name)).count == MetricCatalog.families.count, "a family is declared twice")
    }
}

@Suite struct AccessRecordTests {
    /// A refused target is logged without what may carry a secret: query, fragment, userinfo.
    @Test(arguments: [
        ("/cb#access_token=secret", "/cb"), ("/a/b?code=secret", "/a/b"), ("/plain", "/plain"),
        ("http://user:secret@host.example/x?y=1", "http://host.example/x"), ("http://host.example/a@b", "http://host.example/a@b"),
        ("https://u@h:8443", "https://h:8443"), ("*", "*"),
    ])
    func aRefusedTargetLosesItsSecrets(_ target: String, _ shown: String) {
        #expect(AccessRecord.refusedPath(target) == shown)
    }

    @Test func aTraceparentGivesItsTraceId() {
        #expect(AccessRecord.traceID(fromTraceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01") == "4bf92f3577b34da6a3ce929d0e0e4736")
        // A later version may append fields (W3C Trace Context §3.2.4).
        #expect(AccessRecord.traceID(fromTraceparent: "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra") == "4bf92f3577b34da6a3ce929d0e0e4736")
    }

    @Test func anInvalidTraceparentGivesNone() {
        for value in [
            "", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7", "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01", "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra", "00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01",
        ] {
            #expect(AccessRecord.traceID(fromTraceparent: value) == nil, "\(value)")
        }
        #expect(AccessRecord.traceID(fromTraceparent: nil) == nil)
    }

    @Test func durationsAreMillisecondsWithMicroseconds() {
        #expect(AccessRecord.milliseconds(0.00025) == "0.250")
        #expect(AccessRecord.milliseconds(1.5) == "1500.000")
        #expect(AccessRecord.milliseconds(0.0000004) == "0.000")
    }
}
