/// The audit line's `"ts"` value, its part up to the second (`"2026-11-22T03:00:00.`) formatted once
/// per second and reused: at thousands of lines a second, the calendar arithmetic and its nineteen
/// digits and signs would otherwise be redone for every line (bench/RESULTS.md, the audit log's cost).
/// One per writer (an event loop's line buffer), so it needs no lock.
struct AuditTimestamp {
    private var second = Int.min
    /// `"YYYY-MM-DDTHH:MM:SS.`, opening quote included.
    private var prefix: [UInt8] = []

    /// Appends `"…T…:…:SS.mmmZ"`, quotes included: the bytes `AuditEvent.appendTimestamp` writes.
    mutating func append(seconds: Int, milliseconds: Int, to out: AuditLineBuffer) {
        if seconds != second {
            prefix.removeAll(keepingCapacity: true)
            AuditEvent.appendTimestamp(seconds: seconds, milliseconds: 0, to: &prefix)
            // Keep up to the dot: the milliseconds, `Z` and the closing quote are the line's own.
            prefix.removeLast(5)
            second = seconds
        }
        prefix.withUnsafeBufferPointer { out.append($0) }
        out.reserve(5)
        out.appendReserved(UInt8(ascii: "0") + UInt8(truncatingIfNeeded: milliseconds / 100 % 10))
        out.appendReserved(UInt8(ascii: "0") + UInt8(truncatingIfNeeded: milliseconds / 10 % 10))
        out.appendReserved(UInt8(ascii: "0") + UInt8(truncatingIfNeeded: milliseconds % 10))
        out.appendReserved(UInt8(ascii: "Z"))
        out.appendReserved(UInt8(ascii: "\""))
    }
}
