/// Counts by one label whose values are the cases of `Label` (a failure reason, an outcome, a store
/// operation): one slot per case, in `allCases` order, which is also the order /metrics lists them
/// in. The counts kept off the request path (token managers, stores, assertion files) are these,
/// each behind its owner's lock; the loops' counts on the request path are plain fields
/// (docs/OBSERVABILITY.md, "How the counts are kept").
public struct LabeledCounts<Label: CaseIterable & Equatable & Sendable>: Sendable, Equatable, ExpressibleByDictionaryLiteral {
    private var counts = [UInt64](repeating: 0, count: Label.allCases.count)

    public init() {}

    /// The counts named, every other case 0 (for tests and defaults: `[.won: 1]`).
    public init(dictionaryLiteral elements: (Label, UInt64)...) {
        for (label, count) in elements { counts[Self.slot(label)] += count }
    }

    public subscript(label: Label) -> UInt64 { counts[Self.slot(label)] }

    public mutating func increment(_ label: Label, by count: UInt64 = 1) {
        counts[Self.slot(label)] += count
    }

    /// One sample of `family` for each case, in `allCases` order: `labels`, then the case as the
    /// label `name`.
    public func collect(
        _ family: MetricFamily, as name: String, labels: [MetricLabel] = [], into registry: inout MetricRegistry
    ) where Label: RawRepresentable, Label.RawValue == String {
        for label in Label.allCases {
            registry.add(family, labels + [MetricLabel(name, label.rawValue)], self[label])
        }
    }

    private static func slot(_ label: Label) -> Int {
        Label.allCases.distance(from: Label.allCases.startIndex, to: Label.allCases.firstIndex(of: label)!)
    }
}
