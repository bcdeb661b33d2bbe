/// One label of a sample: a name its family declares (`MetricFamily.labels`) and a value.
public struct MetricLabel: Sendable, Equatable {
    public let name: String
    public let value: String

    public init(_ name: String, _ value: String) {
        self.name = name
        self.value = value
    }
}

/// The samples of one scrape, kept by family with their labels as values, and rendered once in the
/// Prometheus text format 0.0.4 (docs/OBSERVABILITY.md). Families come out in the order they were
/// first declared or given a sample, each with its `# HELP` and `# TYPE` lines from `MetricCatalog`
/// once, then every sample it was given, whichever part of the proxy (a loop, a route, a token
/// manager, a store) gave it. The counting itself stays where it is cheap (per loop, without locks);
/// this is where the counts meet.
public struct MetricRegistry {
    private struct Sample {
        /// `_bucket`, `_sum`, `_count`, or "".
        let suffix: String
        let labels: [MetricLabel]
        let value: String
    }

    private struct Family {
        let family: MetricFamily
        var samples: [Sample] = []
    }

    private var families: [Family] = []
    private var index: [String: Int] = [:]
    /// Labels put first on every sample added while set: the `route` of one route's token series
    /// when the configuration has `routes:` (CONTRACT "Several APIs").
    public var leadingLabels: [MetricLabel] = []

    public init() {}

    /// Makes `family` part of the exposition: its `# HELP` and `# TYPE` lines come out even when it
    /// gets no sample (a token that does not expire has no `tokenproxy_token_expiry_seconds`).
    public mutating func declare(_ family: MetricFamily) {
        _ = slot(family)
    }

    public mutating func add(_ family: MetricFamily, _ labels: [MetricLabel] = [], _ value: some BinaryInteger) {
        append(family, Sample(suffix: "", labels: leadingLabels + labels, value: "\(value)"))
    }

    public mutating func add(_ family: MetricFamily, _ labels: [MetricLabel] = [], _ value: Double) {
        append(family, Sample(suffix: "", labels: leadingLabels + labels, value: "\(value)"))
    }

    /// A histogram's `_bucket` samples (cumulative, then `+Inf`), `_sum` and `_count`.
    public mutating func add(_ family: MetricFamily, _ labels: [MetricLabel] = [], _ histogram: Histogram) {
        let labels = leadingLabels + labels
        for (bound, count) in zip(histogram.bounds, histogram.cumulative) {
            append(family, Sample(suffix: "_bucket", labels: labels + [MetricLabel("le", "\(bound)")], value: "\(count)"))
        }
        append(family, Sample(suffix: "_bucket", labels: labels + [MetricLabel("le", "+Inf")], value: "\(histogram.count)"))
        append(family, Sample(suffix: "_sum", labels: labels, value: "\(histogram.sum)"))
        append(family, Sample(suffix: "_count", labels: labels, value: "\(histogram.count)"))
    }

    /// The exposition: every family in order, its header once, then its samples.
    public var text: String {
        var out = ""
        for entry in families {
            let family = entry.family
            out += "# HELP \(family.name) \(family.help)\n# TYPE \(family.name) \(family.type.rawValue)\n"
            for sample in entry.samples {
                out += family.name + sample.suffix
                if !sample.labels.isEmpty {
                    out += "{" + sample.labels.map { "\($0.name)=\"\(Self.escaped($0.value))\"" }.joined(separator: ",") + "}"
                }
                out += " " + sample.value + "\n"
            }
        }
        return out
    }

    private mutating func slot(_ family: MetricFamily) -> Int {
        if let i = index[family.name] {
            precondition(families[i].family == family, "\(family.name) is declared twice")
            return i
        }
        families.append(Family(family: family))
        index[family.name] = families.count - 1
        return families.count - 1
    }

    private mutating func append(_ family: MetricFamily, _ sample: Sample) {
        // A label the catalog does not name for the family is a bug (`route` and `le` are implied).
        assert(sample.labels.allSatisfy { family.labels.contains($0.name) || $0.name == "route" || $0.name == "le" }, "\(family.name)")
        families[slot(family)].samples.append(sample)
    }

    /// A label value as the text format writes it: backslash, double quote and line feed escaped.
    static func escaped(_ value: String) -> String {
        let backslash = UInt8(ascii: "\\")
        let quote = UInt8(ascii: "\"")
        let lineFeed = UInt8(ascii: "\n")
        guard value.utf8.contains(where: { $0 == backslash || $0 == quote || $0 == lineFeed }) else { return value }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(value.utf8.count + 4)
        for byte in value.utf8 {
            if byte == backslash || byte == quote {
                bytes += [backslash, byte]
            } else if byte == lineFeed {
                bytes += [backslash, UInt8(ascii: "n")]
            } else {
                bytes.append(byte)
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}
