/// The audit line's `"ts"` value, its part up to the second (`"2026-11-22T03:00:00.`) formatted once
/// per second and reused: at thousands of lines a second, the calendar arithmetic and its nineteen
/// digits and signs would otherwise be redone for every line (bench/RESULTS.md, the audit log's cost).
/// One per writer (an event loop's line buffer), so it needs no lock.
public struct AuditTimestamp: Sendable {
    private var second = Int.min
    /// `"YYYY-MM-DDTHH:MM:SS.`, opening quote included.
    private var prefix: [UInt8] = []

    public init() {}

    /// Appends `"…T…:…:SS.mmmZ"`, quotes included: the bytes `AuditEvent.appendTimestamp` writes.
    public mutating func append(seconds: Int, milliseconds: Int, to out: inout [UInt8]) {
        if seconds != second {
            prefix.removeAll(keepingCapacity: true)
            AuditEvent.appendTimestamp(seconds: seconds, milliseconds: 0, to: &prefix)
            // Keep up to the dot: the milliseconds, `Z` and the closing quote are the line's own.
            prefix.removeLast(5)
            second = seconds
        }
        out.append(contentsOf: prefix)
        let ms = UInt8(truncatingIfNeeded: milliseconds / 100 % 10)
        out.append(UInt8(ascii: "0") + ms)
        out.append(UInt8(ascii: "0") + UInt8(truncatingIfNeeded: milliseconds / 10 % 10))
        out.append(UInt8(ascii: "0") + UInt8(truncatingIfNeeded: milliseconds % 10))
        out.append(UInt8(ascii: "Z"))
        out.append(UInt8(ascii: "\""))
    }
}

/// Where a writer formats its audit lines: the bytes, kept between lines so that their capacity is
/// reused (no allocation per line), and the writer's timestamp cache.
public struct AuditLineBuffer: Sendable {
    public var bytes: [UInt8] = []
    public var timestamp = AuditTimestamp()

    public init() {}
}
