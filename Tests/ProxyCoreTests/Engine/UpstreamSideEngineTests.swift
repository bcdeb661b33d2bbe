import Testing

/// The upstream side of an exchange (`UpstreamLeg`): an upstream that goes away before its answer,
/// an answer in chunks (CONTRACT.md "What the proxy does with a request", point 8; the errors' table).
@Suite(.timeLimit(.minutes(2)), .enabled(if: engineTestsEnabled, "TOKENPROXY_ENGINE_TESTS=1 runs the engine suites")) struct UpstreamSideEngineTests {
    @Test func anUpstreamThatClosesBeforeItsHeadOnANewConnectionIsA502() throws {
        try withEngine { harness, client in
            try client.write(getRequest("/gone"))
            let upstream = try harness.upstream.accept()
            _ = try #require(try upstream.readMessage())
            upstream.close()
            let answer = try #require(try client.readMessage())

            #expect(answer.status == 502)
            #expect(answer.bodyText.contains("\"bad_gateway\""))
        }
    }

    @Test func aChunkedAnswerIsRelayedWithItsBodyWhole() throws {
        try withEngine { harness, client in
            try client.write(getRequest("/stream"))
            let (upstream, _) = try harness.upstream.nextRequest()
            try upstream.write("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Type: text/plain\r\n\r\n")
            try upstream.write("5\r\nhello\r\n")
            try upstream.write("7\r\n, world\r\n")
            try upstream.write("0\r\n\r\n")
            let answer = try #require(try client.readMessage())

            #expect(answer.status == 200)
            #expect(answer.field("content-type") == "text/plain")
            #expect(answer.bodyText == "hello, world")
        }
    }

    @Test func aKeptUpstreamConnectionIsUsedForTheNextRequest() throws {
        try withEngine { harness, client in
            try client.write(getRequest("/first"))
            let (upstream, _) = try harness.upstream.nextRequest()
            try upstream.write(ScriptedUpstream.response(status: 200, body: "one"))
            #expect(try client.readMessage()?.bodyText == "one")
            try client.write(getRequest("/second"))
            let second = try #require(try upstream.readMessage())
            try upstream.write(ScriptedUpstream.response(status: 200, body: "two"))

            #expect(second.requestLine == "GET /second HTTP/1.1")
            #expect(try client.readMessage()?.bodyText == "two")
        }
    }

    @Test func anAnswerLargerThanEveryBufferArrivesWholeThroughTheProxysPauses() throws {
        try withEngine { harness, client in
            let body = SocketEnd.pattern(4 << 20)

            try client.write(getRequest("/large"))
            let (upstream, _) = try harness.upstream.nextRequest()
            let writing = upstream.writeInBackground(Array("HTTP/1.1 200 OK\r\nContent-Length: \(body.count)\r\n\r\n".utf8) + body)
            let answer = try #require(try client.readMessage())
            try writing.wait()

            #expect(answer.status == 200)
            #expect(answer.body.count == body.count)
            #expect(answer.body == body)
        }
    }
}
