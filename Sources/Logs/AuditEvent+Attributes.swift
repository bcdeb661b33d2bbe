/// An audit event as an OTLP log record's attributes (CONTRACT.md "Telemetry": "each audit event's
/// fields are attributes under their audit names, `ts` is the record's time"): the members the line
/// has (`forEachMember`), under the same names, in the same order; numbers and booleans as their text.
extension AuditEvent {
    public var attributes: [(name: String, value: String)] {
        var out: [(name: String, value: String)] = []
        forEachMember { member, value in
            switch value {
            case .text(let text): out.append((member.name, text))
            case .number(let number): out.append((member.name, String(number)))
            case .flag(let flag): out.append((member.name, String(flag)))
            }
        }
        return out
    }

    /// `ts` in nanoseconds since the Unix epoch: the log record's time.
    public var unixNanoseconds: UInt64 { UInt64(max(seconds, 0)) * 1_000_000_000 + UInt64(max(milliseconds, 0)) * 1_000_000 }
}
