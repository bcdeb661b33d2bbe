import Testing

/// The upstream side of an exchange (`UpstreamLeg`): an upstream that goes away before its answer,
/// an answer in chunks (CONTRACT.md "What the proxy does with a request", point 8; the errors' table).
@Suite(.engineTimeLimit) struct UpstreamSideEngineTests {
    @Test func anUpstreamThatClosesBeforeItsHeadOnANewConnectionIsA502() async throws {
        try await withEngine { harness, client in
            try await client.write(getRequest("/gone"))
            let upstream = try await harness.upstream.accept()
            _ = try #require(try await upstream.readMessage())
            upstream.close()
            let answer = try #require(try await client.readMessage())

            #expect(answer.status == 502)
            #expect(answer.bodyText.contains("\"bad_gateway\""))
        }
    }

    @Test func aChunkedAnswerIsRelayedWithItsBodyWhole() async throws {
        try await withEngine { harness, client in
            try await client.write(getRequest("/stream"))
            let (upstream, _) = try await harness.upstream.nextRequest()
            try await upstream.write("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Type: text/plain\r\n\r\n")
            try await upstream.write("5\r\nhello\r\n")
            try await upstream.write("7\r\n, world\r\n")
            try await upstream.write("0\r\n\r\n")
            let answer = try #require(try await client.readMessage())

            #expect(answer.status == 200)
            #expect(answer.field("content-type") == "text/plain")
            #expect(answer.bodyText == "hello, world")
        }
    }

    @Test func aKeptUpstreamConnectionIsUsedForTheNextRequest() async throws {
        try await withEngine { harness, client in
            try await client.write(getRequest("/first"))
            let (upstream, _) = try await harness.upstream.nextRequest()
            try await upstream.write(ScriptedUpstream.response(status: 200, body: "one"))
            #expect(try await client.readMessage()?.bodyText == "one")
            try await client.write(getRequest("/second"))
            let second = try #require(try await upstream.readMessage())
            try await upstream.write(ScriptedUpstream.response(status: 200, body: "two"))

            #expect(second.requestLine == "GET /second HTTP/1.1")
            #expect(try await client.readMessage()?.bodyText == "two")
        }
    }

    @Test func anAnswerLargerThanEveryBufferArrivesWholeThroughTheProxysPauses() async throws {
        try await withEngine { harness, client in
            let body = SocketEnd.pattern(4 << 20)

            try await client.write(getRequest("/large"))
            let (upstream, _) = try await harness.upstream.nextRequest()
            let writing = upstream.writeInBackground(Array("HTTP/1.1 200 OK\r\nContent-Length: \(body.count)\r\n\r\n".utf8) + body)
            let answer = try #require(try await client.readMessage())
            try await writing.wait()

            #expect(answer.status == 200)
            #expect(answer.body.count == body.count)
            #expect(answer.body == body)
        }
    }
}
