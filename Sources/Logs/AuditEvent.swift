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

    /// Every member at once: a request's line is made in one initialization, with no member
    /// assigned (and the `nil` it held destroyed) afterwards; inlinable, so the loop's caller
    /// stores the members in place rather than passing nineteen arguments.
    @inlinable
    public init(
        kind: Kind, seconds: Int, milliseconds: Int, decision: Decision? = nil, reason: String? = nil, route: String? = nil,
        caller: String? = nil, client: String? = nil, method: String? = nil, host: String? = nil, path: String? = nil,
        status: Int? = nil, upstreamStatus: Int = 0, credential: String? = nil, placement: String? = nil, placeholder: Bool? = nil,
        scrubbed: Int? = nil, address: String? = nil, traceID: String? = nil
    ) {
        self.kind = kind
        self.seconds = seconds
        self.milliseconds = milliseconds
        self.decision = decision
        self.reason = reason
        self.route = route
        self.caller = caller
        self.client = client
        self.method = method
        self.host = host
        self.path = path
        self.status = status
        self.upstreamStatus = upstreamStatus
        self.credential = credential
        self.placement = placement
        self.placeholder = placeholder
        self.scrubbed = scrubbed
        self.address = address
        self.traceID = traceID
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

    /// Appends the line, newline included, to `out` after the lines already there: bytes copied in
    /// place, each member's name from a constant in the binary, the timestamp's prefix from `out`'s
    /// cache, no intermediate strings (it runs once per request on the loop).
    func append(to out: AuditLineBuffer) {
        out.append(#"{"ts":"#)
        out.timestamp.append(seconds: seconds, milliseconds: milliseconds, to: out)
        forEachMember { member, value in
            out.append(member.written)
            switch value {
            case .text(let text):
                out.appendQuoted(text)
            case .number(let number):
                out.appendDecimal(number)
            case .flag(let flag):
                out.append(flag ? "true" : "false")
            }
        }
        out.append("}\n")
        out.lines += 1
    }

    /// A member's value as the line writes it: a JSON string, number or boolean.
    enum Value {
        case text(String)
        case number(Int)
        case flag(Bool)
    }

    /// The members after `ts` that apply, in the contract's order: the one list the line
    /// (`append(to:)`) and the OTLP attributes (`attributes`) are both made from, so that a member
    /// is added here and nowhere else.
    @inline(__always)
    func forEachMember(_ body: (Member, Value) -> Void) {
        func text(_ member: Member, _ value: String?) {
            if let value { body(member, .text(value)) }
        }
        func number(_ member: Member, _ value: Int?) {
            if let value { body(member, .number(value)) }
        }
        text(.event, kind.rawValue)
        switch kind {
        case .request, .connect:
            text(.decision, decision?.rawValue)
            text(.reason, reason)
            text(.route, route)
            text(.caller, caller)
            text(.client, client)
            text(.method, method)
            text(.host, host)
            text(.path, path)
            number(.status, status)
            number(.upstreamStatus, upstreamStatus > 0 ? upstreamStatus : nil)
            text(.credential, credential)
            text(.placement, placement)
            if let placeholder { body(.placeholder, .flag(placeholder)) }
            number(.scrubbed, scrubbed)
            text(.address, address)
            text(.traceID, traceID)
        case .credential:
            text(.route, route)
            text(.credential, credential)
            text(.action, action?.rawValue)
            text(.outcome, outcome?.rawValue)
            text(.reason, reason)
        }
    }

    /// A member's name, written once: as the line has it after the first member (a comma, the name
    /// in quotes, a colon), a constant in the binary; `name` is the name alone.
    struct Member {
        let written: StaticString

        var name: String {
            String(decoding: UnsafeBufferPointer(start: written.utf8Start + 2, count: written.utf8CodeUnitCount - 4), as: UTF8.self)
        }

        static var event: Member { Member(written: #","event":"#) }
        static var decision: Member { Member(written: #","decision":"#) }
        static var reason: Member { Member(written: #","reason":"#) }
        static var route: Member { Member(written: #","route":"#) }
        static var caller: Member { Member(written: #","caller":"#) }
        static var client: Member { Member(written: #","client":"#) }
        static var method: Member { Member(written: #","method":"#) }
        static var host: Member { Member(written: #","host":"#) }
        static var path: Member { Member(written: #","path":"#) }
        static var status: Member { Member(written: #","status":"#) }
        static var upstreamStatus: Member { Member(written: #","upstream_status":"#) }
        static var credential: Member { Member(written: #","credential":"#) }
        static var placement: Member { Member(written: #","placement":"#) }
        static var placeholder: Member { Member(written: #","placeholder":"#) }
        static var scrubbed: Member { Member(written: #","scrubbed":"#) }
        static var address: Member { Member(written: #","address":"#) }
        static var traceID: Member { Member(written: #","trace_id":"#) }
        static var action: Member { Member(written: #","action":"#) }
        static var outcome: Member { Member(written: #","outcome":"#) }
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
