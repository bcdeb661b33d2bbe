import Foundation
import Logging
import Synchronization
import Testing

@testable import Logs

/// Collects the lines a handler writes.
final class LineSink: Sendable {
    private let lines = Mutex<[String]>([])
    var all: [String] { lines.withLock { $0 } }
    var text: String { all.joined() }
    func append(_ line: String) { lines.withLock { $0.append(line) } }
}

func makeLogger(
    format: LogFormat,
    registry: SecretRegistry,
    sink: LineSink,
    level: Logger.Level = .debug
) -> Logger {
    Logger(label: "test") { label in
        TokenproxyLogHandler(label: label, level: level, format: format, registry: registry, output: { sink.append($0) })
    }
}

let sampleJWT =
    "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwiZXhwIjo0MTAyNDQ0ODAwfQ.c2lnbmF0dXJlLXZhbHVlLTEyMw"

@Suite struct SecretRegistryTests {
    @Test func registeredSecretIsReplacedEverywhereInAString() {
        let registry = SecretRegistry()
        registry.register("s3cr3t-value")
        #expect(registry.redact("a s3cr3t-value b s3cr3t-value") == "a [REDACTED] b [REDACTED]")
    }

    @Test func shortStringsAreNotRegistered() {
        let registry = SecretRegistry()
        registry.register("abc")
        registry.register("")
        #expect(registry.redact("abc def") == "abc def")
    }

    @Test func longerSecretContainingAShorterOneIsReplacedWhole() {
        let registry = SecretRegistry()
        registry.register("secret")
        registry.register("secret-and-more")
        #expect(registry.redact("x secret-and-more y") == "x [REDACTED] y")
    }

    @Test(arguments: [
        ("Authorization: Bearer abc.def-ghi", "Authorization: Bearer [REDACTED]"),
        ("authorization: bearer xyz123 rest", "authorization: bearer [REDACTED] rest"),
        ("{\"h\":\"Bearer tok42\"}", "{\"h\":\"Bearer [REDACTED]\"}"),
    ])
    func bearerCredentialIsRedactedEvenWhenNotRegistered(line: String, redacted: String) {
        #expect(SecretRegistry().redact(line) == redacted)
    }

    @Test(arguments: [
        ("token=\(sampleJWT) end", "token=[REDACTED] end"),
        ("\(sampleJWT)", "[REDACTED]"),
        // Unsigned JWT (alg none) has an empty third part.
        ("t eyJhbGciOiJub25lIn0.eyJzdWIiOiJ4In0. u", "t [REDACTED] u"),
    ])
    func jwtShapedStringsAreRedacted(line: String, redacted: String) {
        #expect(SecretRegistry().redact(line) == redacted)
    }

    @Test(arguments: ["scheme Bearer", "Bearers are fine"])
    func bearerWithoutValueAndTheWordAloneStayUntouched(line: String) {
        #expect(SecretRegistry().redact(line) == line)
    }

    @Test(arguments: ["eyJ only", "file.name.txt", "version 1.2.3"])
    func stringsThatOnlyResembleAJWTAreKept(line: String) {
        #expect(SecretRegistry().redact(line) == line)
    }

    @Test func unicodeAroundSecretsSurvives() {
        let registry = SecretRegistry()
        registry.register("pässwört-42")
        #expect(registry.redact("é pässwört-42 ü") == "é [REDACTED] ü")
    }

    @Test func concurrentRegistrationAndRedactionAreSafe() async {
        let registry = SecretRegistry()
        await withTaskGroup(of: Void.self) { group in
            for i in 0..<50 {
                group.addTask {
                    registry.register("secret-number-\(i)")
                    _ = registry.redact("value secret-number-\(i)")
                }
            }
        }
        for i in 0..<50 {
            #expect(!registry.redact("secret-number-\(i)").contains("secret-number"))
        }
    }
}

@Suite struct LogHandlerTests {
    @Test(arguments: LogFormat.allCases)
    func registeredSecretNeverAppearsInMessageOrMetadata(format: LogFormat) {
        let registry = SecretRegistry()
        let secret = "very-secret-refresh-token-1234"
        registry.register(secret)
        let sink = LineSink()
        let logger = makeLogger(format: format, registry: registry, sink: sink)
        logger.info("got \(secret) from idp", metadata: ["token": "\(secret)", "nested": ["a": "x\(secret)y"], "list": ["\(secret)"]])
        logger.error("plain", metadata: ["convertible": .stringConvertible(secret)])
        #expect(sink.all.count == 2)
        #expect(!sink.text.contains(secret))
        #expect(sink.text.contains("[REDACTED]"))
    }

    @Test(arguments: LogFormat.allCases)
    func bearerAndJWTAreRedactedInMessageAndMetadata(format: LogFormat) {
        let sink = LineSink()
        let logger = makeLogger(format: format, registry: SecretRegistry(), sink: sink)
        logger.warning("header Authorization: Bearer opaque-token-value", metadata: ["jwt": "\(sampleJWT)"])
        #expect(!sink.text.contains("opaque-token-value"))
        #expect(!sink.text.contains(sampleJWT))
        #expect(!sink.text.contains("eyJhbGci"))
    }

    @Test func jsonLinesParseAsJSONWithTheExpectedFields() throws {
        let sink = LineSink()
        let logger = makeLogger(format: .json, registry: SecretRegistry(), sink: sink)
        logger.info("listening on 127.0.0.1:8080", metadata: ["port": "8080", "count": .stringConvertible(3)])
        logger.warning("quote \" backslash \\ newline \n tab \t control \u{01} done", metadata: ["k\"ey": "v\nal"])
        logger.debug("nested", metadata: ["d": ["a": ["1", "2"]]])
        logger.error("bad")
        #expect(sink.all.count == 4)
        for line in sink.all {
            #expect(line.hasSuffix("\n"))
            #expect(line.dropLast().contains("\n") == false)
            let object = try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any]
            #expect(object != nil)
            #expect(object?["ts"] is String)
        }
        let first = try JSONSerialization.jsonObject(with: Data(sink.all[0].utf8)) as! [String: Any]
        #expect(first["level"] as? String == "info")
        #expect(first["msg"] as? String == "listening on 127.0.0.1:8080")
        #expect(first["port"] as? String == "8080")
        let second = try JSONSerialization.jsonObject(with: Data(sink.all[1].utf8)) as! [String: Any]
        #expect(second["level"] as? String == "warn")
        #expect(second["msg"] as? String == "quote \" backslash \\ newline \n tab \t control \u{01} done")
        #expect(second["k\"ey"] as? String == "v\nal")
        let third = try JSONSerialization.jsonObject(with: Data(sink.all[2].utf8)) as! [String: Any]
        #expect(((third["d"] as? [String: Any])?["a"] as? [String]) == ["1", "2"])
        let fourth = try JSONSerialization.jsonObject(with: Data(sink.all[3].utf8)) as! [String: Any]
        #expect(fourth["level"] as? String == "error")
    }

    @Test func textLinesHaveTimestampLevelMessageAndKeyValues() throws {
        let sink = LineSink()
        let logger = makeLogger(format: .text, registry: SecretRegistry(), sink: sink)
        logger.info("listening on 127.0.0.1:8080", metadata: ["b": "2", "a": "one two"])
        let line = try #require(sink.all.first)
        let pattern = #/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z info listening on 127\.0\.0\.1:8080 a="one two" b=2\n$/#
        #expect(line.wholeMatch(of: pattern) != nil, "\(line)")
    }

    @Test func textLinesStayOnOneLine() {
        let sink = LineSink()
        let logger = makeLogger(format: .text, registry: SecretRegistry(), sink: sink)
        logger.info("two\nlines", metadata: ["k": "a\nb"])
        #expect(sink.all.count == 1)
        #expect(sink.all[0].filter { $0 == "\n" }.count == 1)
    }

    @Test func levelsMapToTheContractsFourNames() {
        #expect(TokenproxyLogHandler.levelName(.trace) == "debug")
        #expect(TokenproxyLogHandler.levelName(.debug) == "debug")
        #expect(TokenproxyLogHandler.levelName(.info) == "info")
        #expect(TokenproxyLogHandler.levelName(.notice) == "info")
        #expect(TokenproxyLogHandler.levelName(.warning) == "warn")
        #expect(TokenproxyLogHandler.levelName(.error) == "error")
        #expect(TokenproxyLogHandler.levelName(.critical) == "error")
        #expect(LogSetup.level(named: "warn") == .warning)
        #expect(LogSetup.level(named: "DEBUG") == .debug)
        #expect(LogSetup.level(named: "verbose") == nil)
    }

    @Test func recordsBelowTheLevelAreDropped() {
        let sink = LineSink()
        let logger = makeLogger(format: .text, registry: SecretRegistry(), sink: sink, level: .warning)
        logger.info("hidden")
        logger.debug("hidden")
        logger.warning("shown")
        #expect(sink.all.count == 1)
        #expect(sink.all[0].contains("warn shown"))
    }

    @Test func handlerMetadataAndProviderMetadataAreMerged() {
        let sink = LineSink()
        let registry = SecretRegistry()
        let provider = Logger.MetadataProvider { ["request": "r1"] }
        var logger = Logger(label: "t") { label in
            TokenproxyLogHandler(label: label, level: .debug, format: .text, registry: registry, metadataProvider: provider, output: { sink.append($0) })
        }
        logger[metadataKey: "conn"] = "c7"
        logger.info("hi", metadata: ["x": "1"])
        #expect(sink.all.first?.hasSuffix(" info hi conn=c7 request=r1 x=1\n") == true)
    }

    @Test func sharedRegistryIsTheDefault() {
        let secret = "shared-registry-secret-\(UInt32.random(in: 0...UInt32.max))"
        SecretRegistry.shared.register(secret)
        let sink = LineSink()
        let logger = Logger(label: "t") { TokenproxyLogHandler(label: $0, output: { sink.append($0) }) }
        logger.info("value \(secret)")
        #expect(!sink.text.contains(secret))
    }
}

@Suite struct LogTimestampTests {
    @Test func knownInstantsAreWrittenAsRFC3339UTC() {
        #expect(TokenproxyLogHandler.timestamp(epochSeconds: 0, milliseconds: 0) == "1970-01-01T00:00:00.000Z")
        #expect(TokenproxyLogHandler.timestamp(epochSeconds: 1_795_316_400, milliseconds: 123) == "2026-11-22T03:00:00.123Z")
        #expect(TokenproxyLogHandler.timestamp(epochSeconds: 951_782_399, milliseconds: 999) == "2000-02-28T23:59:59.999Z")
        #expect(TokenproxyLogHandler.timestamp(epochSeconds: 951_782_400, milliseconds: 5) == "2000-02-29T00:00:00.005Z")
        #expect(TokenproxyLogHandler.timestamp(epochSeconds: 4_102_444_799, milliseconds: 0) == "2099-12-31T23:59:59.000Z")
    }

    @Test func everyDayOfTwoCenturiesAgreesWithFoundation() {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "UTC")
        formatter.dateFormat = "yyyy-MM-dd'T'HH:mm:ss.SSS'Z'"
        var seconds = -86_400 * 365 * 30  // 1940
        var generator = SystemRandomNumberGenerator()
        while seconds < 4_102_444_800 {
            let expected = formatter.string(from: Date(timeIntervalSince1970: Double(seconds)))
            #expect(TokenproxyLogHandler.timestamp(epochSeconds: seconds, milliseconds: 0) == expected)
            seconds += 86_400 + Int.random(in: -3600...3600, using: &generator)
        }
    }
}

@Suite struct HistogramTests {
    @Test func anObservationCountsInTheFirstBucketWhoseBoundHoldsIt() {
        var h = Histogram()
        h.observe(0.0001)  // a bound holds its own value
        h.observe(0.00011)
        h.observe(31)  // above every bound: +Inf only
        h.observe(-1)  // a clock step back counts as 0
        #expect(h.count == 4)
        #expect(h.buckets[0] == 2)
        #expect(h.buckets[1] == 1)
        #expect(h.buckets[Histogram.bounds.count] == 1)
        #expect(h.cumulative.last == h.count)
        #expect(h.cumulative == h.cumulative.sorted())
    }

    @Test func addingSumsEveryBucket() {
        var a = Histogram()
        var b = Histogram()
        a.observe(0.002)
        b.observe(0.002)
        b.observe(5)
        a.add(b)
        #expect(a.count == 3)
        #expect(abs(a.sum - 5.004) < 1e-9)
        #expect(a.buckets[Histogram.bounds.firstIndex(of: 0.0025)!] == 2)
        #expect(a.buckets[Histogram.bounds.firstIndex(of: 5)!] == 1)
    }

    @Test func theBoundsRunFrom100MicrosecondsTo30Seconds() {
        #expect(Histogram.bounds.first == 0.0001)
        #expect(Histogram.bounds.last == 30)
        #expect(Histogram.bounds == Histogram.bounds.sorted())
    }
}

@Suite struct HistogramBoundsTests {
    @Test func aHistogramWithItsOwnBoundsCountsAboveTheLastOneInPlusInf() {
        var h = Histogram(bounds: [0.001, 0.01, 60])
        h.observe(0.001)
        h.observe(0.5)
        h.observe(100)
        #expect(h.buckets == [1, 0, 1, 1])
        #expect(h.cumulative == [1, 1, 2, 3])
    }
}

/// The registry the /metrics text is made from: labels are values, families come out in the order
/// first seen with their HELP and TYPE once (docs/OBSERVABILITY.md).
@Suite struct MetricRegistryTests {
    @Test func familiesComeOutOnceInTheOrderFirstSeenWithTheSamplesOfEveryPart() {
        var registry = MetricRegistry()
        registry.declare(MetricCatalog.tokenExpirySeconds)
        for route in ["orders", "billing"] {
            registry.leadingLabels = [MetricLabel("route", route)]
            registry.add(MetricCatalog.tokenFetchFailuresTotal, [MetricLabel("reason", "timeout")], route == "orders" ? 2 : 0)
            registry.add(MetricCatalog.refreshConsecutiveFailures, [], 1)
        }
        registry.leadingLabels = []
        registry.add(MetricCatalog.configReloadsTotal, [MetricLabel("outcome", "success")], 3)
        #expect(
            registry.text == """
                # HELP tokenproxy_token_expiry_seconds \(MetricCatalog.tokenExpirySeconds.help)
                # TYPE tokenproxy_token_expiry_seconds gauge
                # HELP tokenproxy_token_fetch_failures_total \(MetricCatalog.tokenFetchFailuresTotal.help)
                # TYPE tokenproxy_token_fetch_failures_total counter
                tokenproxy_token_fetch_failures_total{route="orders",reason="timeout"} 2
                tokenproxy_token_fetch_failures_total{route="billing",reason="timeout"} 0
                # HELP tokenproxy_refresh_consecutive_failures \(MetricCatalog.refreshConsecutiveFailures.help)
                # TYPE tokenproxy_refresh_consecutive_failures gauge
                tokenproxy_refresh_consecutive_failures{route="orders"} 1
                tokenproxy_refresh_consecutive_failures{route="billing"} 1
                # HELP tokenproxy_config_reloads_total \(MetricCatalog.configReloadsTotal.help)
                # TYPE tokenproxy_config_reloads_total counter
                tokenproxy_config_reloads_total{outcome="success"} 3

                """)
    }

    @Test func aHistogramGivesCumulativeBucketsThenSumAndCount() {
        var registry = MetricRegistry()
        var h = Histogram(bounds: [0.1, 1])
        h.observe(0.05)
        h.observe(2)
        registry.add(MetricCatalog.tokenRefreshSeconds, [], h)
        registry.leadingLabels = [MetricLabel("route", "a")]
        registry.add(MetricCatalog.tokenRefreshSeconds, [], Histogram(bounds: [0.1, 1]))
        let samples = registry.text.split(separator: "\n").filter { !$0.hasPrefix("#") }
        #expect(
            samples == [
                #"tokenproxy_token_refresh_seconds_bucket{le="0.1"} 1"#, #"tokenproxy_token_refresh_seconds_bucket{le="1.0"} 1"#,
                #"tokenproxy_token_refresh_seconds_bucket{le="+Inf"} 2"#, "tokenproxy_token_refresh_seconds_sum 2.05",
                "tokenproxy_token_refresh_seconds_count 2",
                #"tokenproxy_token_refresh_seconds_bucket{route="a",le="0.1"} 0"#, #"tokenproxy_token_refresh_seconds_bucket{route="a",le="1.0"} 0"#,
                #"tokenproxy_token_refresh_seconds_bucket{route="a",le="+Inf"} 0"#, #"tokenproxy_token_refresh_seconds_sum{route="a"} 0.0"#,
                #"tokenproxy_token_refresh_seconds_count{route="a"} 0"#,
            ])
    }

    @Test func aLabelValueIsEscapedAsTheTextFormatSays() {
        #expect(MetricRegistry.escaped(#"a"b\c"# + "\nd") == #"a\"b\\c\nd"#)
        #expect(MetricRegistry.escaped("orders-v2") == "orders-v2")
    }
}
