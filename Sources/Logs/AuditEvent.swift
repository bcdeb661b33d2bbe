import Basics

/// One line of the audit log (CONTRACT.md "Programs in a sandbox", "Audit log"): a request, a
/// CONNECT decision or a credential event, as one JSON object with the contract's members in the
/// contract's order, only those that apply. It holds no token, secret, placeholder or query: its
/// fields are names, addresses, paths without their query and counts.
public struct AuditEvent: Sendable, Equatable {
    public enum Kind: String, Sendable {
        case request, connect, credential
    }

    public enum Decision: String, Sendable {
        case forwarded, refused, intercepted, tunnelled
    }

    /// A credential event's `action`: a session renewed with its refresh token, or a credential made anew.
    public enum Action: String, Sendable {
        case refresh, mint
    }

    public enum Outcome: String, Sendable {
        case success, failure
    }

    public var kind: Kind
    /// Seconds and milliseconds since 1970 (UTC), as `Syscall.wallClockParts` gives them.
    public var seconds: Int
    public var milliseconds: Int
    public var decision: Decision?
    /// The error code of a refusal (`forbidden_path`, `deny_address` …), or why a credential event failed.
    public var reason: String?
    public var route: String?
    /// The placeholder's caller (`callers_file`), else `default`.
    public var caller: String?
    /// The peer address, or the subject of the client certificate on an mTLS listener.
    public var client: String?
    public var method: String?
    public var host: String?
    /// The client's path before `strip_prefix`, without its query.
    public var path: String?
    public var status: Int?
    /// 0: none came.
    public var upstreamStatus = 0
    /// The route's `credentials.type`.
    public var credential: String?
    public var placement: String?
    public var placeholder: Bool?
    public var scrubbed: Int?
    /// A tunnel's checked address.
    public var address: String?
    public var traceID: String?
    public var action: Action?
    public var outcome: Outcome?

    public init(kind: Kind, seconds: Int, milliseconds: Int) {
        self.kind = kind
        self.seconds = seconds
        self.milliseconds = milliseconds
    }

    /// A credential event: one refresh or mint of `route`'s credential of type `credential`.
    public static func credential(
        route: String, credential: String, action: Action, outcome: Outcome, reason: String?, seconds: Int, milliseconds: Int
    ) -> AuditEvent {
        var event = AuditEvent(kind: .credential, seconds: seconds, milliseconds: milliseconds)
        event.route = route
        event.credential = credential
        event.action = action
        event.outcome = outcome
        event.reason = outcome == .failure ? reason : nil
        return event
    }

    /// Appends the line, newline included, to `out`, with a timestamp formatted for it alone.
    public func append(to out: inout [UInt8]) {
        let buffer = AuditLineBuffer()
        append(to: buffer)
        out.append(contentsOf: buffer.bytes)
    }

    /// Appends the line, newline included, to `out`: bytes copied in place, each member's name from
    /// a constant in the binary, the timestamp's prefix from `out`'s cache, no intermediate strings
    /// (it runs once per request on the loop).
    func append(to out: AuditLineBuffer) {
        func name(_ name: StaticString) { out.append(name) }
        func string(_ member: StaticString, _ value: String?) {
            guard let value else { return }
            out.append(member)
            out.appendEscaped(value)
            out.append(UInt8(ascii: "\""))
        }
        func number(_ member: StaticString, _ value: Int?) {
            guard let value else { return }
            out.append(member)
            out.appendDecimal(value)
        }
        name(Member.ts)
        out.timestamp.append(seconds: seconds, milliseconds: milliseconds, to: out)
        string(Member.event, kind.rawValue)
        switch kind {
        case .request, .connect:
            string(Member.decision, decision?.rawValue)
            string(Member.reason, reason)
            string(Member.route, route)
            string(Member.caller, caller)
            string(Member.client, client)
            string(Member.method, method)
            string(Member.host, host)
            string(Member.path, path)
            number(Member.status, status)
            number(Member.upstreamStatus, upstreamStatus > 0 ? upstreamStatus : nil)
            string(Member.credential, credential)
            string(Member.placement, placement)
            if let placeholder {
                name(Member.placeholder)
                name(placeholder ? "true" : "false")
            }
            number(Member.scrubbed, scrubbed)
            string(Member.address, address)
            string(Member.traceID, traceID)
        case .credential:
            string(Member.route, route)
            string(Member.credential, credential)
            string(Member.action, action?.rawValue)
            string(Member.outcome, outcome?.rawValue)
            string(Member.reason, reason)
        }
        out.append("}\n")
    }

    /// Each member's name as it is written: after the first, a comma before it; a string's opening
    /// quote after it.
    private enum Member {
        static var ts: StaticString { #"{"ts":"# }
        static var event: StaticString { #","event":""# }
        static var decision: StaticString { #","decision":""# }
        static var reason: StaticString { #","reason":""# }
        static var route: StaticString { #","route":""# }
        static var caller: StaticString { #","caller":""# }
        static var client: StaticString { #","client":""# }
        static var method: StaticString { #","method":""# }
        static var host: StaticString { #","host":""# }
        static var path: StaticString { #","path":""# }
        static var status: StaticString { #","status":"# }
        static var upstreamStatus: StaticString { #","upstream_status":"# }
        static var credential: StaticString { #","credential":""# }
        static var placement: StaticString { #","placement":""# }
        static var placeholder: StaticString { #","placeholder":"# }
        static var scrubbed: StaticString { #","scrubbed":"# }
        static var address: StaticString { #","address":""# }
        static var traceID: StaticString { #","trace_id":""# }
        static var action: StaticString { #","action":""# }
        static var outcome: StaticString { #","outcome":""# }
    }

    /// `"2026-11-22T03:00:00.042Z"` (RFC 3339, UTC, milliseconds), quotes included, as the log
    /// handler's timestamps (`CivilTime`).
    static func appendTimestamp(seconds: Int, milliseconds: Int, to out: inout [UInt8]) {
        let time = CivilTime(epochSeconds: seconds)
        out.append(UInt8(ascii: "\""))
        appendDecimal(time.year, width: 4, to: &out)
        out.append(UInt8(ascii: "-"))
        appendDecimal(time.month, width: 2, to: &out)
        out.append(UInt8(ascii: "-"))
        appendDecimal(time.day, width: 2, to: &out)
        out.append(UInt8(ascii: "T"))
        appendDecimal(time.secondOfDay / 3600, width: 2, to: &out)
        out.append(UInt8(ascii: ":"))
        appendDecimal(time.secondOfDay / 60 % 60, width: 2, to: &out)
        out.append(UInt8(ascii: ":"))
        appendDecimal(time.secondOfDay % 60, width: 2, to: &out)
        out.append(UInt8(ascii: "."))
        appendDecimal(milliseconds, width: 3, to: &out)
        out.append(UInt8(ascii: "Z"))
        out.append(UInt8(ascii: "\""))
    }

    /// `value` in decimal, padded with zeros to `width` digits.
    static func appendDecimal(_ value: Int, width: Int, to out: inout [UInt8]) {
        if value < 0 { out.append(UInt8(ascii: "-")) }
        var magnitude = value.magnitude
        var power: UInt = 1
        var digits = 1
        while magnitude / power >= 10 {
            power *= 10
            digits += 1
        }
        for _ in digits..<max(width, digits) { out.append(UInt8(ascii: "0")) }
        while power > 0 {
            out.append(UInt8(ascii: "0") + UInt8(magnitude / power))
            magnitude %= power
            power /= 10
        }
    }

    /// The line as text, for tests and messages.
    public var line: String {
        var out: [UInt8] = []
        append(to: &out)
        return String(decoding: out, as: UTF8.self)
    }
}
