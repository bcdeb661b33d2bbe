import Testing

@testable import Config

@Suite struct UnitsTests {
    @Test(arguments: [
        ("250ms", 0.25), ("10s", 10), ("5m", 300), ("1h", 3600), ("1m30s", 90), ("1h5m10s", 3910),
        ("1.5s", 1.5), ("0", 0), ("0s", 0), (" 2s ", 2), ("1s500ms", 1.5),
    ])
    func durationsWithAUnitParseToSeconds(text: String, seconds: Double) {
        #expect(Units.parseDuration(text) == seconds)
    }

    @Test(arguments: ["10", "", "s", "10x", "-5s", "1.s", ".5s", "1..5s", "5 s", "10S", "1d", "ms10", "99999999999h", "1e3s"])
    func durationsWithoutAValidUnitAreRejected(text: String) {
        #expect(Units.parseDuration(text) == nil)
    }

    @Test(arguments: [
        ("64KiB", 65536), ("1MiB", 1 << 20), ("1GiB", 1 << 30), ("4096", 4096), ("0", 0), ("3MiB", 3 << 20),
    ])
    func sizesWithABinaryUnitOrPlainBytesParse(text: String, bytes: Int) {
        #expect(Units.parseSize(text) == bytes)
    }

    @Test(arguments: ["-1", "-1KiB", "1KB", "1kib", "1.5MiB", "", "KiB", "10 MiB", "99999999999999999999", "9999999999999GiB"])
    func negativeFractionalOrUnknownSizesAreRejected(text: String) {
        #expect(Units.parseSize(text) == nil)
    }

    @Test(arguments: [(300.0, "5m"), (90, "1m30s"), (0.25, "250ms"), (0, "0"), (3600, "1h"), (10, "10s")])
    func durationsFormatInTheirShortestForm(seconds: Double, text: String) {
        #expect(Units.formatDuration(seconds) == text)
        #expect(Units.parseDuration(text) == seconds)
    }

    @Test(arguments: [(65536, "64KiB"), (1 << 20, "1MiB"), (1000, "1000"), (0, "0"), (1 << 30, "1GiB")])
    func sizesFormatInTheLargestWholeUnit(bytes: Int, text: String) {
        #expect(Units.formatSize(bytes) == text)
    }
}
