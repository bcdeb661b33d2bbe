/// Durations and sizes as the configuration file writes them (CONTRACT.md: "Every duration takes
/// `ms`, `s`, `m`, `h`; every size takes `KiB`, `MiB`, `GiB`").
public enum Units {
    /// The longest duration accepted, in seconds (about 31 years). Larger values would overflow
    /// nanosecond arithmetic elsewhere; no setting needs more.
    public static let maximumDuration: Double = 1_000_000_000

    /// Seconds for "250ms", "10s", "5m", "1h", "1.5s" or a combination such as "1m30s" or "1h5m10s".
    /// A unit is required, except for a literal "0". Negative, empty and too large values give nil.
    public static func parseDuration(_ s: String) -> Double? {
        let text = s.trimmingWhitespace()
        if text == "0" { return 0 }
        var chars = Substring(text)
        guard !chars.isEmpty else { return nil }
        var total: Double = 0
        while !chars.isEmpty {
            let number = chars.prefix { $0.isASCII && ($0.isNumber || $0 == ".") }
            guard !number.isEmpty, number.first != ".", number.last != ".",
                number.filter({ $0 == "." }).count <= 1, let value = Double(number)
            else { return nil }
            chars = chars.dropFirst(number.count)
            let unit = chars.prefix { $0.isASCII && $0.isLetter }
            chars = chars.dropFirst(unit.count)
            let scale: Double
            switch unit {
            case "ms": scale = 0.001
            case "s": scale = 1
            case "m": scale = 60
            case "h": scale = 3600
            default: return nil
            }
            total += value * scale
        }
        guard total.isFinite, total <= maximumDuration else { return nil }
        return total
    }

    /// Bytes for "64KiB", "1MiB", "1GiB" or a plain byte count ("4096"). Negative values,
    /// fractions, other units and values that overflow `Int` give nil.
    public static func parseSize(_ s: String) -> Int? {
        let text = s.trimmingWhitespace()
        let digits = text.prefix { $0.isASCII && $0.isNumber }
        guard !digits.isEmpty, let value = Int(digits) else { return nil }
        let scale: Int
        switch text.dropFirst(digits.count) {
        case "": scale = 1
        case "KiB": scale = 1 << 10
        case "MiB": scale = 1 << 20
        case "GiB": scale = 1 << 30
        default: return nil
        }
        let (product, overflow) = value.multipliedReportingOverflow(by: scale)
        return overflow ? nil : product
    }

    /// The shortest form that `parseDuration` reads back: 300 → "5m", 90 → "1m30s", 0.25 → "250ms", 0 → "0".
    public static func formatDuration(_ seconds: Double) -> String {
        guard seconds.isFinite, seconds > 0 else { return "0" }
        var millis = Int((seconds * 1000).rounded())
        guard millis > 0 else { return "0" }
        var out = ""
        for (unit, size) in [("h", 3_600_000), ("m", 60_000), ("s", 1000), ("ms", 1)] where millis >= size {
            out += "\(millis / size)\(unit)"
            millis %= size
        }
        return out
    }

    /// The largest whole unit: 65536 → "64KiB", 1048576 → "1MiB", 1000 → "1000".
    public static func formatSize(_ bytes: Int) -> String {
        for (unit, size) in [("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)] where bytes >= size && bytes % size == 0 {
            return "\(bytes / size)\(unit)"
        }
        return "\(bytes)"
    }
}

extension String {
    func trimmingWhitespace() -> String {
        var s = Substring(self)
        while let c = s.first, c.isWhitespace { s = s.dropFirst() }
        while let c = s.last, c.isWhitespace { s = s.dropLast() }
        return String(s)
    }
}
