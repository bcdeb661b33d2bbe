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

    /// The digits are written eight at a time: every nibble value at every place, against
    /// `String(radix:)`, and the same bytes as the value's string through `withValue`.
    @Test func everyNibbleIsItsLowercaseDigitAtEveryPlace() {
        var ids: [UInt64] = [0, .max, 0x0123_4567_89AB_CDEF, 0xFEDC_BA98_7654_3210, 0x9A9A_9A9A_0F0F_F0F0]
        for shift in stride(from: 0, to: 64, by: 4) { ids += (0..<16).map { UInt64($0) << UInt64(shift) } }
        for id in ids {
            let expected = String(repeating: "0", count: 16 - String(id, radix: 16).count) + String(id, radix: 16)
            let parent = TraceParent(traceID: TraceID(high: id, low: ~id), spanID: id, sampled: true)
            #expect(TraceParent.hex(parent.traceID).prefix(16) == expected)
            #expect(parent.value == "00-\(TraceParent.hex(parent.traceID))-\(expected)-01")
            var written: [UInt8] = []
            parent.withValue { written = Array($0) }
            #expect(written == Array(parent.value.utf8))
        }
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
