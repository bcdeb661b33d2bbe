/// An audit event as an OTLP log record's attributes (CONTRACT.md "Telemetry": "each audit event's
/// fields are attributes under their audit names, `ts` is the record's time"): the members the line
/// has, under the same names, in the same order; numbers and booleans as their text.
extension AuditEvent {
    public var attributes: [(name: String, value: String)] {
        var out: [(name: String, value: String)] = [("event", kind.rawValue)]
        func add(_ name: String, _ value: String?) {
            if let value { out.append((name, value)) }
        }
        switch kind {
        case .request, .connect:
            add("decision", decision?.rawValue)
            add("reason", reason)
            add("route", route)
            add("caller", caller)
            add("client", client)
            add("method", method)
            add("host", host)
            add("path", path)
            add("status", status.map(String.init))
            add("upstream_status", upstreamStatus > 0 ? String(upstreamStatus) : nil)
            add("credential", credential)
            add("placement", placement)
            add("placeholder", placeholder.map(String.init))
            add("scrubbed", scrubbed.map(String.init))
            add("address", address)
            add("trace_id", traceID)
        case .credential:
            add("route", route)
            add("credential", credential)
            add("action", action?.rawValue)
            add("outcome", outcome?.rawValue)
            add("reason", reason)
        }
        return out
    }

    /// `ts` in nanoseconds since the Unix epoch: the log record's time.
    public var unixNanoseconds: UInt64 { UInt64(max(seconds, 0)) * 1_000_000_000 + UInt64(max(milliseconds, 0)) * 1_000_000 }
}
