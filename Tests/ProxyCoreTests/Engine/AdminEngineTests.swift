import Testing

/// The admin listener's connections (`AdminConnection`) over the harness's loop, answered by a
/// `Server` whose one loop is the harness's (CONTRACT.md "Signals, admin, logs").
@Suite(.timeLimit(.minutes(2)), .enabled(if: engineTestsEnabled, "TOKENPROXY_ENGINE_TESTS=1 runs the engine suites")) struct AdminEngineTests {
    @Test func healthzAnswersOkAndCloses() throws {
        try withEngine { harness, _ in
            let admin = try harness.connectAdmin()

            try admin.write(getRequest("/healthz"))
            let answer = try #require(try admin.readMessage())

            #expect(answer.status == 200 && answer.bodyText == "ok\n")
            #expect(try admin.readToEnd() == [])
        }
    }

    @Test func metricsCountARequestTheLoopAnswered() throws {
        try withEngine { harness, client in
            try client.write(getRequest("/counted"))
            try harness.upstream.answerNext(status: 204)
            #expect(try client.readMessage()?.status == 204)

            let admin = try harness.connectAdmin()
            try admin.write(getRequest("/metrics"))
            let answer = try #require(try admin.readMessage())

            #expect(answer.status == 200)
            #expect(answer.field("content-type")?.hasPrefix("text/plain; version=0.0.4") == true)
            let counted = answer.bodyText.split(separator: "\n").filter { $0.hasPrefix("tokenproxy_requests_total{") && $0.contains("code=\"204\"") }
            #expect(counted.count == 1 && counted.first?.hasSuffix(" 1") == true, "\(answer.bodyText)")
        }
    }

    @Test func readyzSaysNotReadyUntilTheFirstTokenArrives() throws {
        let source = ScriptedTokenSource()
        source.holdNextFetch()
        try withEngine(source: source) { harness, _ in
            let before = try harness.connectAdmin()
            try before.write(getRequest("/readyz"))
            let notReady = try #require(try before.readMessage())
            try source.releaseHeldFetch()
            try harness.waitUntil { _ in harness.tokens.current().snapshot != nil }
            let after = try harness.connectAdmin()
            try after.write(getRequest("/readyz"))
            let ready = try #require(try after.readMessage())

            #expect(notReady.status == 503)
            #expect(ready.status == 200 && ready.bodyText == "ready\n")
        }
    }
}
