/// `budget:` of a route (CONTRACT.md "Programs in a sandbox", "Budgets"): how many of its requests
/// one caller may have in flight upstream at once, and a token bucket of requests per caller. At
/// the top it is every route's default (each route keeps its own counts); a route's own `budget`
/// replaces it as a whole.
public struct BudgetConfiguration: Sendable, Equatable {
    /// `max_concurrent` (nil: no bound).
    public var maxConcurrent: Int? = nil
    /// `rate` in requests per second (nil: no bucket).
    public var ratePerSecond: Double? = nil
    /// `rate` as the file wrote it (`20/s`, `0.5/m`), for `check`.
    public var rateText: String? = nil
    /// `burst`: the bucket's size; default the rate per second rounded up, at least 1.
    public var burst: Int = 1

    public init() {}

    /// What `check` prints for it.
    var resolvedDescription: String {
        var parts: [String] = []
        if let maxConcurrent { parts.append("max_concurrent \(maxConcurrent)") }
        if let rateText { parts.append("rate \(rateText), burst \(burst)") }
        return parts.joined(separator: ", ") + " per caller"
    }
}

extension BudgetConfiguration {
    static let keys = ["max_concurrent", "rate", "burst"]

    /// The seconds each unit of `rate` stands for.
    static let rateUnits: [Character: Double] = ["s": 1, "m": 60, "h": 3600]

    static func parse(_ s: YAMLSection, in load: LoadContext) -> BudgetConfiguration? {
        load.found.collect { try s.rejectUnknownKeys(keys) }
        var budget = BudgetConfiguration()
        load.found.collect {
            guard let n = try s.int("max_concurrent") else { return }
            guard n >= 1 else { throw ConfigurationError(keyPath: s.path("max_concurrent"), reason: "must be 1 or more (requests in flight at once)") }
            budget.maxConcurrent = n
        }
        load.found.collect {
            guard let text = try s.string("rate") else { return }
            guard let perSecond = parseRate(text) else {
                throw ConfigurationError(
                    keyPath: s.path("rate"), reason: "\"\(text)\" is not a rate: a number above 0, then /s, /m or /h (e.g. 20/s, 0.5/m)")
            }
            budget.ratePerSecond = perSecond
            budget.rateText = text.trimmingWhitespace()
            budget.burst = max(1, Int(perSecond.rounded(.up)))
        }
        load.found.collect {
            guard let n = try s.int("burst") else { return }
            guard n >= 1 else { throw ConfigurationError(keyPath: s.path("burst"), reason: "must be 1 or more (the requests the bucket holds)") }
            guard budget.ratePerSecond != nil || s.has("rate") else {
                throw ConfigurationError(keyPath: s.path("burst"), reason: "is the size of the rate's bucket: set rate too")
            }
            budget.burst = n
        }
        guard s.has("max_concurrent") || s.has("rate") else {
            load.found.record(ConfigurationError(keyPath: s.keyPath, reason: "needs max_concurrent, rate or both"))
            return nil
        }
        return budget
    }

    /// `N/s`, `N/m` or `N/h` (N decimal, a fraction allowed, above 0) in requests per second.
    static func parseRate(_ text: String) -> Double? {
        let trimmed = text.trimmingWhitespace()
        guard let slash = trimmed.lastIndex(of: "/") else { return nil }
        let number = String(trimmed[..<slash]).trimmingWhitespace()
        let unit = String(trimmed[trimmed.index(after: slash)...]).trimmingWhitespace()
        guard unit.count == 1, let seconds = rateUnits[unit.first!] else { return nil }
        guard !number.isEmpty, number.allSatisfy({ $0.isASCII && ($0.isNumber || $0 == ".") }), number.filter({ $0 == "." }).count <= 1,
            number.first != ".", number.last != ".", let n = Double(number), n > 0, n.isFinite
        else { return nil }
        return n / seconds
    }
}
