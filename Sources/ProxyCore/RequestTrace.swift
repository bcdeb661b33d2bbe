import Telemetry

/// One request's trace while it is in progress (CONTRACT.md "Telemetry"): its ids, when each of its
/// spans started and ended, kept in the exchange's `ExchangeRecord` (nil there when telemetry is
/// off: the record's hooks then test one optional). The spans are made of it at the request's end
/// by `RequestTracer.finish`. Times are Unix nanoseconds (`WallClock`). A class, so that the record
/// holds one pointer (nil without telemetry) and an exchange without a trace stays as small as before.
final class RequestTrace {
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
        guard recordsSpans else { return nil }
        let id = childSpanID(attempts.count + waits.count)
        attempts.append(Attempt(spanID: id, start: WallClock.nanoseconds()))
        return TraceParent(traceID: traceID, spanID: id, sampled: sampled).value
    }

    /// The current attempt's answer head came.
    func attemptAnswered(status: Int) {
        guard let last = attempts.indices.last, attempts[last].end == 0 else { return }
        attempts[last].end = WallClock.nanoseconds()
        attempts[last].status = status
    }

    func waitStarted() {
        guard recordsSpans else { return }
        waits.append(Wait(spanID: childSpanID(attempts.count + waits.count), start: WallClock.nanoseconds()))
    }

    func linkLastWait(to refresh: SpanLink) {
        guard let last = waits.indices.last else { return }
        waits[last].refresh = refresh
    }

    func waitEnded() {
        guard let last = waits.indices.last, waits[last].end == 0 else { return }
        waits[last].end = WallClock.nanoseconds()
    }
}
