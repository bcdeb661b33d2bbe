/// One Prometheus histogram's counts on one event loop (docs/OBSERVABILITY.md): an increment per
/// observation into its own bucket; made cumulative only when rendered (the exposition format's
/// `_bucket{le}` counts every observation at or below `le`). Loops' histograms are summed at a scrape.
/// Every histogram of /metrics is one of these; only its bounds differ.
public struct Histogram: Sendable, Equatable {
    /// The bounds most histograms use: upper bounds in seconds, from 100 µs to 30 s (issue 22),
    /// roughly 1-2.5-5 per decade.
    public static let bounds: [Double] = [
        0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30,
    ]

    /// This histogram's upper bounds, ascending.
    public let bounds: [Double]
    /// Observations in each bucket alone; the last slot holds those above every bound (`+Inf`).
    public var buckets: [Int] { counts }
    public var count: Int { total }
    public var sum: Double { valueSum }
    // Stored apart from their public reads so that `observe`, inlined into the request path, may
    // write them (an inlinable body can use only `@usableFromInline` declarations).
    @usableFromInline var counts: [Int]
    @usableFromInline var total = 0
    @usableFromInline var valueSum = 0.0

    public init(bounds: [Double] = Histogram.bounds) {
        self.bounds = bounds
        counts = [Int](repeating: 0, count: bounds.count + 1)
    }

    /// Inlined where a request is counted (three times a request): a call into this module, the
    /// bounds array retained for the scan and the bucket's bounds checks cost more than the count
    /// (docs/ENGINE.md "Instructions per request").
    @inlinable @inline(__always)
    public mutating func observe(_ seconds: Double) {
        let value = max(seconds, 0)
        // Most observations are short: a linear scan from the smallest bound ends after a few steps.
        let i = bounds.withUnsafeBufferPointer { bounds in
            var i = 0
            while i < bounds.count && value > bounds[i] { i &+= 1 }
            return i
        }
        counts.withUnsafeMutableBufferPointer { $0[i] &+= 1 }
        total &+= 1
        valueSum += value
    }

    /// Adds another loop's counts of the same series (same bounds).
    public mutating func add(_ other: Histogram) {
        precondition(other.bounds == bounds, "histograms of one series share their bounds")
        for i in counts.indices { counts[i] += other.counts[i] }
        total += other.total
        valueSum += other.valueSum
    }

    /// The count at or below each bound, then `+Inf` (equal to `count`).
    public var cumulative: [Int] {
        var total = 0
        return buckets.map {
            total += $0
            return total
        }
    }
}
