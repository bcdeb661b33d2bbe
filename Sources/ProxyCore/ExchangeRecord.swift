import HTTP1

/// What the metrics and the access log report of one exchange (docs/OBSERVABILITY.md): set only
/// through its methods, as the exchange goes.
struct ExchangeRecord {
    /// The status the client got (0: none yet).
    private(set) var status = 0
    private(set) var bytesOut = 0
    /// The contract's error code when the proxy answered itself.
    private(set) var refusal: String?
    /// The status the upstream answered (0: none), before any retry's.
    private(set) var upstreamStatus = 0
    /// Seconds from the last request written to the response head (nil: no head came).
    private(set) var upstreamSeconds: Double?
    /// A retry went up after a 401 (the access log's `retried_401`; the machine's
    /// `retryAfter401Used` is the decision that the one retry was taken).
    private(set) var retriedAfter401 = false
    /// Seconds spent waiting for a token, over every wait.
    private(set) var tokenWaitSeconds = 0.0
    /// When the current wait for a token started (0: not waiting).
    private var tokenWaitStartedAt = 0.0
    /// The request was counted and logged (`Connection.recordFinished`).
    private(set) var recorded = false
    /// Its trace (nil: telemetry is off; RequestTrace.swift).
    var trace: RequestTrace?

    /// The client gets this status (a head written, or one of the proxy's own answers).
    mutating func answered(status: Int, refusal: String? = nil) {
        self.status = status
        if let refusal { self.refusal = refusal }
    }

    /// An answer that will not be complete: `status` when none was given yet (502 for an upstream
    /// failure, 499 for a client gone).
    mutating func endedShort(status: Int) {
        if self.status == 0 { self.status = status }
    }

    mutating func wroteOut(_ n: Int) {
        bytesOut += n
    }

    /// The upstream's final head arrived after `seconds`; the first status is the one logged.
    mutating func upstreamAnswered(status: Int, seconds: Double) {
        upstreamSeconds = seconds
        if upstreamStatus == 0 { upstreamStatus = status }
        trace?.attemptAnswered(status: status)
    }

    mutating func retriedAfter401Sent() {
        retriedAfter401 = true
    }

    mutating func tokenWaitStarted(now: Double) {
        tokenWaitStartedAt = now
        trace?.waitStarted()
    }

    /// An upstream attempt starts: the `traceparent` it carries (nil: telemetry is off).
    mutating func attemptStarted() -> String? {
        trace?.attemptStarted()
    }

    /// Counts the wait that just ended; answers its seconds (nil: this was no wait).
    mutating func tokenWaitEnded(now: Double) -> Double? {
        guard tokenWaitStartedAt > 0 else { return nil }
        let waited = now - tokenWaitStartedAt
        tokenWaitStartedAt = 0
        tokenWaitSeconds += waited
        trace?.waitEnded()
        return waited
    }

    /// True the first time: the request is counted and logged once.
    mutating func markRecorded() -> Bool {
        guard !recorded else { return false }
        recorded = true
        return true
    }
}

extension Exchange {
    /// Its access-log line (docs/OBSERVABILITY.md "Access log"): the request, or a tunnel's end, or a
    /// client gone before its answer's end.
    func accessRecord(event: String, seconds: Double) -> AccessRecord {
        var line = AccessRecord(
            event: event, route: route?.state.name, method: head.method,
            path: path.isEmpty ? AccessRecord.refusedPath(head.target) : path, status: record.status)
        line.upstreamStatus = record.upstreamStatus
        line.bytesIn = bodyBytesSeen
        line.bytesOut = record.bytesOut
        line.seconds = seconds
        line.upstreamSeconds = record.upstreamSeconds
        line.tokenWaitSeconds = record.tokenWaitSeconds
        line.retriedAfter401 = record.retriedAfter401
        line.error = record.refusal
        line.tokenGeneration = sentToken?.generation
        line.traceID = AccessRecord.traceID(fromTraceparent: head.first("traceparent"))
        line.tunnel = tunnelHost
        return line
    }
}
