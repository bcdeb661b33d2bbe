import Basics
import Config
import Credentials
import Telemetry

/// One request's trace while it is in progress (CONTRACT.md "Telemetry"): its ids, when each of its
/// spans started and ended, kept in the exchange's `ExchangeRecord` (nil there when telemetry is
/// off: the record's hooks then test one optional). At the request's end `RequestTracer.finish`
/// gives it its `ending` and hands it to the exporter, whose thread writes its spans (`writeSpans`).
/// Times are Unix nanoseconds (`WallClock`). A class, so that the record holds one pointer (nil
/// without telemetry) and an exchange without a trace stays as small as before.
// @unchecked Sendable: the loop changes it only until `ending` is set, then hands it over; the
// exporter's thread only reads it after that (the hand-over is under the exporter's lock).
final class RequestTrace: FinishedTrace, @unchecked Sendable {
    let traceID: TraceID
    /// The client's span (0: the trace starts here).
    let parentSpanID: UInt64
    let serverSpanID: UInt64
    /// Spans are exported only when sampled; an unsampled request still sends its trace id upstream.
    let sampled: Bool
    /// `traces` is on: the attempts and waits are timed and the upstream gets the CLIENT span's
    /// context. Off (`logs` alone): only the trace id, for the audit records.
    let recordsSpans: Bool
    let start: UInt64
    /// The loop's tracer the request started under: its exporter gets the spans even when a reload
    /// replaced or removed the loop's tracer meanwhile (CONTRACT.md "Telemetry": a reload applies to
    /// the requests that start after it; an exporter already stopped counts them as dropped).
    let tracer: RequestTracer

    /// An upstream attempt: a `CLIENT` span (a 401's retry is a second one).
    struct Attempt {
        let spanID: UInt64
        let start: UInt64
        var end: UInt64 = 0
        var status = 0
    }

    /// The request's attempts: the first in place (most requests make one and no more), later ones
    /// in an array made only for them.
    struct Attempts {
        private var first = Attempt(spanID: 0, start: 0)
        private var later: [Attempt] = []
        private(set) var count = 0

        mutating func append(_ attempt: Attempt) {
            if count == 0 { first = attempt } else { later.append(attempt) }
            count += 1
        }

        subscript(i: Int) -> Attempt {
            get { i == 0 ? first : later[i - 1] }
            set { if i == 0 { first = newValue } else { later[i - 1] = newValue } }
        }
    }
    private(set) var attempts = Attempts()

    /// A wait for a token: a `token.wait` span.
    struct Wait {
        let spanID: UInt64
        let start: UInt64
        var end: UInt64 = 0
        /// The `credential.refresh` it waited for (one already under way counts).
        var refresh: SpanLink?
    }
    private(set) var waits: [Wait] = []

    /// What the spans say of the request, as it ended (set once, by `RequestTracer.finish`).
    struct Ending {
        let end: UInt64
        let method: String
        /// `url.path`: the client's path, before `strip_prefix`, without its query.
        let path: String
        /// The Host field as it came.
        let host: String?
        let status: Int
        let retriedAfter401: Bool
        let route: String?
        let caller: String
        let refusal: String?
        /// The CLIENT spans' `server.address` (nil: the request had no upstream): the upstream's
        /// host, or the authority sent to it (`addressIsAuthority`, its port still on) when the
        /// upstream takes the request's host.
        let upstreamAddress: String?
        let addressIsAuthority: Bool
        let upstreamPort: Int
    }
    private(set) var ending: Ending?
    /// `ending` is set: the loop no longer changes the trace (a flag, tested without a copy of
    /// `ending`).
    private(set) var ended = false

    /// The request ended: what its spans say of it. Once only.
    func end(_ ending: Ending) {
        self.ending = ending
        ended = true
    }

    init(traceID: TraceID, parentSpanID: UInt64, serverSpanID: UInt64, sampled: Bool, recordsSpans: Bool, start: UInt64, tracer: RequestTracer) {
        self.tracer = tracer
        self.traceID = traceID
        self.parentSpanID = parentSpanID
        self.serverSpanID = serverSpanID
        self.sampled = sampled
        self.recordsSpans = recordsSpans
        self.start = start
    }

    /// The ids of the request's other spans, made from the SERVER span's (a SplitMix64 step per
    /// span): unique within the trace without the loop's generator at hand.
    private func childSpanID(_ n: Int) -> UInt64 {
        var z = serverSpanID &+ UInt64(n + 1) &* 0x9E37_79B9_7F4A_7C15
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        z ^= z >> 31
        return z == 0 ? 1 : z
    }

    /// An attempt goes upstream: answers the `traceparent` it carries (the CLIENT span's context,
    /// W3C Trace Context §3.2; the sampled flag as decided for the request). nil without spans: the
    /// client's `traceparent`, if any, goes as it came.
    func attemptStarted() -> TraceParent? {
        guard recordsSpans, !ended else { return nil }
        let id = childSpanID(attempts.count + waits.count)
        attempts.append(Attempt(spanID: id, start: WallClock.nanoseconds()))
        return TraceParent(traceID: traceID, spanID: id, sampled: sampled)
    }

    /// The current attempt's answer head came.
    func attemptAnswered(status: Int) {
        let last = attempts.count - 1
        guard !ended, last >= 0, attempts[last].end == 0 else { return }
        attempts[last].end = WallClock.nanoseconds()
        attempts[last].status = status
    }

    func waitStarted() {
        guard recordsSpans, !ended else { return }
        waits.append(Wait(spanID: childSpanID(attempts.count + waits.count), start: WallClock.nanoseconds()))
    }

    func linkLastWait(to refresh: SpanLink) {
        guard !ended, let last = waits.indices.last else { return }
        waits[last].refresh = refresh
    }

    func waitEnded() {
        guard !ended, let last = waits.indices.last, waits[last].end == 0 else { return }
        waits[last].end = WallClock.nanoseconds()
    }

    var spanCount: Int { 1 + attempts.count + waits.count }

    /// The request's spans (the SERVER span, a CLIENT span per attempt, `token.wait`), written on
    /// the exporter's thread once `ending` is set. No attribute holds a query, a token or a header
    /// value.
    func writeSpans(_ out: inout SpanWriter) {
        guard let ending else { return }
        let end = ending.end
        let method = ending.method
        out.begin(traceID: traceID, spanID: serverSpanID, parentSpanID: parentSpanID, name: method, kind: .server, start: start, end: end)
        out.attribute("http.request.method", method)
        out.attribute("url.path", ending.path)
        out.attribute("http.response.status_code", ending.status)
        out.attribute("tokenproxy.retried_401", ending.retriedAfter401)
        if let host = ending.host { out.attribute("server.address", Self.hostOnly(host)) }
        if let route = ending.route {
            out.attribute("tokenproxy.route", route)
            out.attribute("tokenproxy.caller", ending.caller)
        }
        if let code = ending.refusal {
            out.attribute("error.type", code)
            out.error(code)
        }
        out.end()

        for i in 0..<attempts.count {
            let attempt = attempts[i]
            out.begin(
                traceID: traceID, spanID: attempt.spanID, parentSpanID: serverSpanID, name: method, kind: .client, start: attempt.start,
                end: attempt.end == 0 ? end : attempt.end)
            out.attribute("http.request.method", method)
            if let address = ending.upstreamAddress {
                if ending.addressIsAuthority {
                    out.attribute("server.address", Self.hostOnly(address))
                } else {
                    out.attribute("server.address", address)
                }
                out.attribute("server.port", ending.upstreamPort)
            }
            // No answer came: the request's error (bad_gateway, upstream_timeout) is the last attempt's.
            let failed = attempt.status == 0 && i == attempts.count - 1 ? ending.refusal : nil
            if attempt.status > 0 { out.attribute("http.response.status_code", attempt.status) }
            if let failed { out.attribute("error.type", failed) }
            if let route = ending.route { out.attribute("tokenproxy.route", route) }
            if let failed { out.error(failed) }
            out.end()
        }
        for wait in waits {
            out.begin(
                traceID: traceID, spanID: wait.spanID, parentSpanID: serverSpanID, name: "token.wait", kind: .internal, start: wait.start,
                end: wait.end == 0 ? end : wait.end)
            if let route = ending.route { out.attribute("tokenproxy.route", route) }
            // A wait that never ended: the request was refused for want of a token.
            let failed = wait.end == 0 ? ending.refusal.flatMap { Self.tokenErrors.contains($0) ? $0 : nil } : nil
            if let failed { out.attribute("error.type", failed) }
            if let refresh = wait.refresh { out.link(refresh) }
            if let failed { out.error(failed) }
            out.end()
        }
    }

    /// The refusals that end a wait for a token.
    private static let tokenErrors: Set<String> = [RefreshOutcome.tokenUnavailableCode, RefreshOutcome.loginRequiredCode]

    /// A Host field's or an authority's host, without its port (`[::1]:8080` → `::1`), read in
    /// place by the one authority parser (the field was checked when the request was read; what
    /// does not parse is given whole).
    static func hostOnly(_ authority: String) -> Substring {
        var authority = authority
        let host: Range<Int>? = authority.withUTF8 { utf8 in
            guard case .success(let span) = Authority.parse(utf8, port: Authority.PortRule(required: false, emptyIsDefault: true)) else {
                return nil
            }
            return span.host
        }
        guard let host else { return Substring(authority) }
        let utf8 = authority.utf8
        return Substring(utf8[utf8.index(utf8.startIndex, offsetBy: host.lowerBound)..<utf8.index(utf8.startIndex, offsetBy: host.upperBound)])
    }
}
