import Config
import Telemetry

/// One request's trace while it is in progress (CONTRACT.md "Telemetry"): its ids, when each of its
/// spans started and ended, kept in the exchange's `ExchangeRecord` (nil there when telemetry is
/// off: the record's hooks then test one optional). At the request's end `RequestTracer.finish`
/// gives it its `ending` and hands it to the exporter, whose thread makes its spans (`makeSpans`).
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

    /// An upstream attempt: a `CLIENT` span (a 401's retry is a second one).
    struct Attempt {
        let spanID: UInt64
        let start: UInt64
        var end: UInt64 = 0
        var status = 0
    }
    private(set) var attempts: [Attempt] = []

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
        /// The route's upstream, and the authority sent to it when the upstream takes the
        /// request's host.
        let upstream: UpstreamURL?
        let forwardedHost: String?
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

    init(traceID: TraceID, parentSpanID: UInt64, serverSpanID: UInt64, sampled: Bool, recordsSpans: Bool, start: UInt64) {
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
    func attemptStarted() -> String? {
        guard recordsSpans, !ended else { return nil }
        let id = childSpanID(attempts.count + waits.count)
        attempts.append(Attempt(spanID: id, start: WallClock.nanoseconds()))
        return TraceParent(traceID: traceID, spanID: id, sampled: sampled).value
    }

    /// The current attempt's answer head came.
    func attemptAnswered(status: Int) {
        guard !ended, let last = attempts.indices.last, attempts[last].end == 0 else { return }
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

    /// The request's spans (the SERVER span, a CLIENT span per attempt, `token.wait`), on the
    /// exporter's thread once `ending` is set.
    func makeSpans(into spans: inout [SpanData]) {
        guard let ending else { return }
        let end = ending.end
        let method = ending.method
        var server = SpanData(traceID: traceID, spanID: serverSpanID, parentSpanID: parentSpanID, name: method, kind: .server, start: start, end: end)
        server.attributes.reserveCapacity(8)
        server.attributes.append(Attribute("http.request.method", method))
        server.attributes.append(Attribute("url.path", ending.path))
        server.attributes.append(Attribute("http.response.status_code", ending.status))
        server.attributes.append(Attribute("tokenproxy.retried_401", ending.retriedAfter401))
        if let host = ending.host { server.attributes.append(Attribute("server.address", RequestTracer.hostOnly(host))) }
        if let route = ending.route {
            server.attributes.append(Attribute("tokenproxy.route", route))
            server.attributes.append(Attribute("tokenproxy.caller", ending.caller))
        }
        if let code = ending.refusal {
            server.errorCode = code
            server.attributes.append(Attribute("error.type", code))
        }
        spans.append(server)

        for (i, attempt) in attempts.enumerated() {
            var client = SpanData(
                traceID: traceID, spanID: attempt.spanID, parentSpanID: serverSpanID, name: method, kind: .client, start: attempt.start,
                end: attempt.end == 0 ? end : attempt.end)
            client.attributes.reserveCapacity(5)
            client.attributes.append(Attribute("http.request.method", method))
            if let upstream = ending.upstream {
                let host = upstream.takesRequestHost ? ending.forwardedHost.map(RequestTracer.hostOnly) ?? "" : upstream.host
                client.attributes.append(Attribute("server.address", host))
                client.attributes.append(Attribute("server.port", upstream.port))
            }
            if attempt.status > 0 {
                client.attributes.append(Attribute("http.response.status_code", attempt.status))
            } else if i == attempts.count - 1, let code = ending.refusal {
                // No answer came: the request's error (bad_gateway, upstream_timeout) is this attempt's.
                client.errorCode = code
                client.attributes.append(Attribute("error.type", code))
            }
            if let route = ending.route { client.attributes.append(Attribute("tokenproxy.route", route)) }
            spans.append(client)
        }
        for wait in waits {
            var span = SpanData(
                traceID: traceID, spanID: wait.spanID, parentSpanID: serverSpanID, name: "token.wait", kind: .internal, start: wait.start,
                end: wait.end == 0 ? end : wait.end)
            if let route = ending.route { span.attributes = [Attribute("tokenproxy.route", route)] }
            if let refresh = wait.refresh { span.links = [refresh] }
            if wait.end == 0, let code = ending.refusal, code == "token_unavailable" || code == "login_required" {
                span.errorCode = code
                span.attributes.append(Attribute("error.type", code))
            }
            spans.append(span)
        }
    }
}
