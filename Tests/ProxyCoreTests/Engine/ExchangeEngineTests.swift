import Testing

@testable import ProxyCore

/// One exchange's token side through the engine: a 401 answered with one refresh and one retry,
/// the body kept for it, a request that waits for the first token (CONTRACT.md "What the proxy
/// does with a request", points 2, 3 and 8).
@Suite(.engineTimeLimit) struct ExchangeEngineTests {
    @Test func a401IsRetriedOnceWithTheNextTokenAndTheClientSeesOnlyTheRetrysAnswer() async throws {
        try await withEngine(source: ScriptedTokenSource(tokens: ["token-1", "token-2"])) { harness, client in
            try await client.write(getRequest("/private"))
            let refused = try await harness.upstream.answerNext(status: 401, body: "expired")
            let retried = try await harness.upstream.answerNext(body: "welcome")
            let answer = try #require(try await client.readMessage())

            #expect(refused.field("authorization") == "Bearer token-1")
            #expect(retried.field("authorization") == "Bearer token-2")
            #expect(retried.requestLine == "GET /private HTTP/1.1")
            #expect(answer.status == 200 && answer.bodyText == "welcome")
            #expect(harness.source.fetches == 2)
        }
    }

    @Test func aBodyIsKeptAndSentAgainWithTheRetry() async throws {
        try await withEngine(source: ScriptedTokenSource(tokens: ["token-1", "token-2"])) { harness, client in
            try await client.write("POST /items HTTP/1.1\r\nHost: localhost\r\nContent-Length: 11\r\n\r\nhello world")
            let refused = try await harness.upstream.answerNext(status: 401)
            let retried = try await harness.upstream.answerNext(status: 201, body: "made")
            let answer = try #require(try await client.readMessage())

            #expect(refused.bodyText == "hello world")
            #expect(retried.bodyText == "hello world")
            #expect(retried.field("content-length") == "11")
            #expect(retried.field("authorization") == "Bearer token-2")
            #expect(answer.status == 201 && answer.bodyText == "made")
        }
    }

    @Test func aSecond401GoesBackToTheClientAsItCame() async throws {
        try await withEngine(source: ScriptedTokenSource(tokens: ["token-1", "token-2"])) { harness, client in
            try await client.write(getRequest("/private"))
            try await harness.upstream.answerNext(status: 401, body: "first")
            try await harness.upstream.answerNext(status: 401, fields: ["WWW-Authenticate: Bearer"], body: "second")
            let answer = try #require(try await client.readMessage())

            #expect(answer.status == 401 && answer.bodyText == "second")
            #expect(answer.field("www-authenticate") == "Bearer")
            #expect(harness.source.fetches == 2)
        }
    }

    @Test func aRequestThatCameBeforeTheFirstTokenIsSentWhenTheTokenArrives() async throws {
        let source = ScriptedTokenSource(tokens: ["late-token"])
        source.holdNextFetch()
        try await withEngine(source: source) { harness, client in
            try await client.write(getRequest("/early"))
            try await harness.waitUntil { ctx in ctx.connections.values.contains { $0.exchange != nil } }
            try await source.releaseHeldFetch()
            let request = try await harness.upstream.answerNext(body: "served")

            #expect(request.field("authorization") == "Bearer late-token")
            #expect(try await client.readMessage()?.bodyText == "served")
            #expect(source.fetches == 1)
        }
    }
}
