import Testing

/// The client side of `Connection`: keep-alive, pipelining, heads however they are cut, clients
/// that go away (CONTRACT.md "What the proxy does with a request", point 8). Each test asserts
/// what the client's end of the socketpair receives.
@Suite(.timeLimit(.minutes(2)), .enabled(if: engineTestsEnabled, "TOKENPROXY_ENGINE_TESTS=1 runs the engine suites")) struct ConnectionEngineTests {
    @Test func twoRequestsOneAfterTheOtherAreAnsweredOnOneKeptAliveConnection() throws {
        try withEngine { harness, client in
            try client.write(getRequest("/first"))
            let first = try harness.upstream.answerNext(body: "one")
            let firstAnswer = try #require(try client.readMessage())
            try client.write(getRequest("/second"))
            let second = try harness.upstream.answerNext(body: "two")
            let secondAnswer = try #require(try client.readMessage())

            #expect(first.requestLine == "GET /first HTTP/1.1")
            #expect(second.requestLine == "GET /second HTTP/1.1")
            #expect(firstAnswer.status == 200 && firstAnswer.bodyText == "one")
            #expect(secondAnswer.status == 200 && secondAnswer.bodyText == "two")
            #expect(firstAnswer.field("connection")?.lowercased() != "close")
            #expect(!client.hasInput)
        }
    }

    @Test func twoRequestsInOneWriteAreAnsweredInOrder() throws {
        try withEngine { harness, client in
            try client.write(getRequest("/first") + getRequest("/second"))
            let first = try harness.upstream.answerNext(body: "one")
            let second = try harness.upstream.answerNext(body: "two")

            #expect(first.requestLine == "GET /first HTTP/1.1")
            #expect(second.requestLine == "GET /second HTTP/1.1")
            #expect(try client.readMessage()?.bodyText == "one")
            #expect(try client.readMessage()?.bodyText == "two")
        }
    }

    @Test func aHeadSentOneByteAtATimeIsForwardedWhole() throws {
        try withEngine { harness, client in
            for byte in getRequest("/drip", fields: ["X-Drip: yes"]).utf8 { try client.write([byte]) }
            let request = try harness.upstream.answerNext(body: "whole")

            #expect(request.requestLine == "GET /drip HTTP/1.1")
            #expect(request.field("x-drip") == "yes")
            #expect(request.field("authorization") == "Bearer token-1")
            #expect(try client.readMessage()?.bodyText == "whole")
        }
    }

    @Test func aClientThatClosesInsideItsBodyGetsNoAnswerAndTheUpstreamConnectionIsDropped() throws {
        try withEngine { harness, client in
            try client.write("POST /upload HTTP/1.1\r\nHost: localhost\r\nContent-Length: 10\r\n\r\nabc")
            let upstream = try harness.upstream.accept()
            let head = try #require(try upstream.readMessageHead())
            client.shutdownWrite()

            #expect(head.requestLine == "POST /upload HTTP/1.1")
            // The upstream gets the three bytes and then the end of its connection: a request cut short
            // is never completed by the proxy.
            #expect(try upstream.readToEnd() == Array("abc".utf8))
            #expect(try client.readToEnd() == [])
        }
    }

    @Test func aRequestBodyLargerThanEveryBufferGoesUpWholeThroughTheProxysPauses() throws {
        try withEngine { harness, client in
            let body = SocketEnd.pattern(4 << 20)

            let writing = client.writeInBackground(Array("PUT /blob HTTP/1.1\r\nHost: localhost\r\nContent-Length: \(body.count)\r\n\r\n".utf8) + body)
            let request = try harness.upstream.answerNext(status: 204)
            try writing.wait()

            #expect(request.requestLine == "PUT /blob HTTP/1.1")
            #expect(request.body == body)
            #expect(try client.readMessage()?.status == 204)
        }
    }
}
