import Testing

/// The client side of `Connection`: keep-alive, pipelining, heads however they are cut, clients
/// that go away (CONTRACT.md "What the proxy does with a request", point 8). Each test asserts
/// what the client's end of the socketpair receives.
@Suite(.engineTimeLimit) struct ConnectionEngineTests {
    @Test func twoRequestsOneAfterTheOtherAreAnsweredOnOneKeptAliveConnection() async throws {
        try await withEngine { harness, client in
            try await client.write(getRequest("/first"))
            let first = try await harness.upstream.answerNext(body: "one")
            let firstAnswer = try #require(try await client.readMessage())
            try await client.write(getRequest("/second"))
            let second = try await harness.upstream.answerNext(body: "two")
            let secondAnswer = try #require(try await client.readMessage())

            #expect(first.requestLine == "GET /first HTTP/1.1")
            #expect(second.requestLine == "GET /second HTTP/1.1")
            #expect(firstAnswer.status == 200 && firstAnswer.bodyText == "one")
            #expect(secondAnswer.status == 200 && secondAnswer.bodyText == "two")
            #expect(firstAnswer.field("connection")?.lowercased() != "close")
            #expect(!client.hasInput)
        }
    }

    @Test func twoRequestsInOneWriteAreAnsweredInOrder() async throws {
        try await withEngine { harness, client in
            try await client.write(getRequest("/first") + getRequest("/second"))
            let first = try await harness.upstream.answerNext(body: "one")
            let second = try await harness.upstream.answerNext(body: "two")

            #expect(first.requestLine == "GET /first HTTP/1.1")
            #expect(second.requestLine == "GET /second HTTP/1.1")
            #expect(try await client.readMessage()?.bodyText == "one")
            #expect(try await client.readMessage()?.bodyText == "two")
        }
    }

    @Test func aHeadSentOneByteAtATimeIsForwardedWhole() async throws {
        try await withEngine { harness, client in
            for byte in getRequest("/drip", fields: ["X-Drip: yes"]).utf8 { try await client.write([byte]) }
            let request = try await harness.upstream.answerNext(body: "whole")

            #expect(request.requestLine == "GET /drip HTTP/1.1")
            #expect(request.field("x-drip") == "yes")
            #expect(request.field("authorization") == "Bearer token-1")
            #expect(try await client.readMessage()?.bodyText == "whole")
        }
    }

    @Test func aClientThatClosesInsideItsBodyGetsNoAnswerAndTheUpstreamConnectionIsDropped() async throws {
        try await withEngine { harness, client in
            try await client.write("POST /upload HTTP/1.1\r\nHost: localhost\r\nContent-Length: 10\r\n\r\nabc")
            let upstream = try await harness.upstream.accept()
            let head = try #require(try await upstream.readMessageHead())
            client.shutdownWrite()

            #expect(head.requestLine == "POST /upload HTTP/1.1")
            // The upstream gets the three bytes and then the end of its connection: a request cut short
            // is never completed by the proxy.
            #expect(try await upstream.readToEnd() == Array("abc".utf8))
            #expect(try await client.readToEnd() == [])
        }
    }

    @Test func aRequestBodyLargerThanEveryBufferGoesUpWholeThroughTheProxysPauses() async throws {
        try await withEngine { harness, client in
            let body = SocketEnd.pattern(4 << 20)

            let writing = client.writeInBackground(Array("PUT /blob HTTP/1.1\r\nHost: localhost\r\nContent-Length: \(body.count)\r\n\r\n".utf8) + body)
            let request = try await harness.upstream.answerNext(status: 204)
            try await writing.wait()

            #expect(request.requestLine == "PUT /blob HTTP/1.1")
            #expect(request.body == body)
            #expect(try await client.readMessage()?.status == 204)
        }
    }
}
