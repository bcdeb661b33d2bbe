import Testing

@testable import Telemetry

@Suite struct TraceContextTests {
    @Test func aValidTraceparentIsReadWithItsSampledFlag() throws {
        let parent = try #require(TraceParent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"))
        #expect(TraceParent.hex(parent.traceID) == "4bf92f3577b34da6a3ce929d0e0e4736")
        #expect(parent.spanID == 0x00f0_67aa_0ba9_02b7)
        #expect(parent.sampled)
        #expect(TraceParent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00")?.sampled == false)
        #expect(parent.value == "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
    }

    @Test func aTraceparentIsWrittenWithEveryDigitAndTheSampledFlag() {
        let parent = TraceParent(traceID: TraceID(high: 1, low: .max), spanID: 0xAB_CDEF, sampled: false)
        #expect(parent.value == "00-0000000000000001ffffffffffffffff-0000000000abcdef-00")
        #expect(TraceParent.hex(parent.traceID) == "0000000000000001ffffffffffffffff")
    }

    @Test(arguments: [
        "00-00000000000000000000000000000000-00f067aa0ba902b7-01",  // zero trace id
        "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",  // zero parent id
        "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",  // version ff
        "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",  // uppercase
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-x",  // version 00 with more parts
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",  // no flags
        "",
    ])
    func anInvalidTraceparentIsNone(value: String) {
        #expect(TraceParent(value) == nil)
    }

    @Test func aLaterVersionMayAddParts() {
        #expect(TraceParent("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra") != nil)
    }

    @Test func theRatioSamplesByTheTraceIDsLowBits() {
        let half = TraceSampler(ratio: 0.5)
        #expect(half.samples(newTrace: TraceID(high: 1, low: 0x7fff_ffff_ffff_ffff)))
        #expect(!half.samples(newTrace: TraceID(high: 1, low: 0x8000_0000_0000_0001)))
        #expect(TraceSampler(ratio: 1).samples(newTrace: TraceID(high: 1, low: .max)))
        #expect(!TraceSampler(ratio: 0).samples(newTrace: TraceID(high: 1, low: 0)))
    }

    @Test func generatedIDsAreNeverZeroAndDiffer() {
        var ids = SpanIDGenerator(seed: 0)
        let made = (0..<1000).map { _ in ids.next() }
        #expect(!made.contains(0))
        #expect(Set(made).count == made.count)
    }
}
