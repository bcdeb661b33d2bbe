import Testing

/// The admin listener's connections (`AdminConnection`) over the harness's loop, answered by a
/// `Server` whose one loop is the harness's (CONTRACT.md "Signals, admin, logs").
@Suite(.engineTimeLimit) struct AdminEngineTests {
    @Test func healthzAnswersOkAndCloses() async throws {
        try await withEngine { harness, _ in
            let admin = try await harness.connectAdmin(sending: getRequest("/healthz"))
            let answer = try #require(try await admin.readMessage())

            #expect(answer.status == 200 && answer.bodyText == "ok\n")
            #expect(try await admin.readToEnd() == [])
        }
    }

    @Test func metricsCountARequestTheLoopAnswered() async throws {
        try await withEngine { harness, client in
            try await client.write(getRequest("/counted"))
            try await harness.upstream.answerNext(status: 204)
            #expect(try await client.readMessage()?.status == 204)

            let admin = try await harness.connectAdmin(sending: getRequest("/metrics"))
            let answer = try #require(try await admin.readMessage())

            #expect(answer.status == 200)
            #expect(answer.field("content-type")?.hasPrefix("text/plain; version=0.0.4") == true)
            let counted = answer.bodyText.split(separator: "\n").filter { $0.hasPrefix("tokenproxy_requests_total{") && $0.contains("code=\"204\"") }
            #expect(counted.count == 1 && counted.first?.hasSuffix(" 1") == true, "\(answer.bodyText)")
        }
    }

    @Test func readyzSaysNotReadyUntilTheFirstTokenArrives() async throws {
        let source = ScriptedTokenSource()
        source.holdNextFetch()
        try await withEngine(source: source) { harness, _ in
            let before = try await harness.connectAdmin(sending: getRequest("/readyz"))
            let notReady = try #require(try await before.readMessage())
            try await source.releaseHeldFetch()
            try await harness.waitUntil { _ in harness.tokens.current().snapshot != nil }
            let after = try await harness.connectAdmin(sending: getRequest("/readyz"))
            let ready = try #require(try await after.readMessage())

            #expect(notReady.status == 503)
            #expect(ready.status == 200 && ready.bodyText == "ready\n")
        }
    }
}
