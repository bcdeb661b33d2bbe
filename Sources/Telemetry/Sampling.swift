/// Ids and the sampling decision (CONTRACT.md "Telemetry": parent-based ratio sampling, as the
/// OpenTelemetry SDK's `ParentBased(TraceIdRatioBased)`): a client's traceparent decides by its
/// sampled flag; a new trace is sampled when its id's low 64 bits fall under `ratio` of their range,
/// so every process that sees the same trace id with the same ratio decides alike. Not
/// `parentBased` (OTEL_TRACES_SAMPLER `always_on`, `always_off`, `traceidratio`), a client's trace
/// is decided by its id as a new one is.
public struct TraceSampler: Sendable {
    /// Low 64 bits of a trace id under this are sampled (ratio 1: all).
    let bound: UInt64
    let all: Bool
    let parentBased: Bool

    public init(ratio: Double, parentBased: Bool = true) {
        all = ratio >= 1
        bound = ratio <= 0 ? 0 : all ? UInt64.max : UInt64(ratio * 18_446_744_073_709_551_616.0)
        self.parentBased = parentBased
    }

    public func samples(newTrace id: TraceID) -> Bool {
        all || id.low < bound
    }

    /// A trace the client started.
    public func samples(parent: TraceParent) -> Bool {
        parentBased ? parent.sampled : samples(newTrace: parent.traceID)
    }
}

/// Random ids for spans and new traces, one generator per event loop (no lock, no system call per
/// id): SplitMix64 (Steele, Lea, Flood 2014) seeded from the system's generator. The ids need to be
/// unique, not secret.
public struct SpanIDGenerator: Sendable {
    private var state: UInt64

    public init() {
        var system = SystemRandomNumberGenerator()
        state = system.next()
    }

    public init(seed: UInt64) { state = seed }

    /// Never 0 (an all-zero id is invalid, W3C Trace Context §3.2.2.4).
    public mutating func next() -> UInt64 {
        while true {
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            z ^= z >> 31
            if z != 0 { return z }
        }
    }

    public mutating func nextTraceID() -> TraceID {
        TraceID(high: next(), low: next())
    }
}
