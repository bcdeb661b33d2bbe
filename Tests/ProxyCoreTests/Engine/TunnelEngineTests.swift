import Testing

/// An `Upgrade` request answered 101 turns both connections into a tunnel until either side closes
/// (CONTRACT.md "What the proxy does with a request", point 1). Only what the two ends see is
/// asserted, whichever relay carries the bytes.
@Suite(.timeLimit(.minutes(2)), .enabled(if: engineTestsEnabled, "TOKENPROXY_ENGINE_TESTS=1 runs the engine suites")) struct TunnelEngineTests {
    /// The client's upgrade, the upstream's 101 and a first message up the tunnel; the upstream's end.
    private func openTunnel(_ harness: EngineHarness, _ client: SocketEnd) throws -> SocketEnd {
        try client.write(getRequest("/socket", fields: ["Connection: Upgrade", "Upgrade: websocket"]))
        let (upstream, request) = try harness.upstream.nextRequest()
        #expect(request.field("upgrade") == "websocket")
        #expect(request.field("authorization") == "Bearer token-1")
        try upstream.write("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n")
        let switched = try #require(try client.readMessage())
        #expect(switched.status == 101)
        #expect(switched.field("upgrade") == "websocket")
        try client.write("ping")
        #expect(try upstream.read(count: 4) == Array("ping".utf8))
        return upstream
    }

    @Test func bytesGoBothWaysAndTheClientsEndReachesTheUpstreamAfterItsLastBytes() throws {
        try withEngine { harness, client in
            let upstream = try openTunnel(harness, client)

            try upstream.write("pong")
            #expect(try client.read(count: 4) == Array("pong".utf8))
            try client.write("last")
            client.shutdownWrite()

            #expect(try upstream.readToEnd() == Array("last".utf8))
            upstream.close()
            #expect(try client.readToEnd() == [])
        }
    }

    @Test func theUpstreamsLastBytesReachTheClientBeforeItsEnd() throws {
        try withEngine { harness, client in
            let upstream = try openTunnel(harness, client)

            try upstream.write("goodbye")
            upstream.close()

            #expect(try client.readToEnd() == Array("goodbye".utf8))
        }
    }

    @Test func aTunnelCarriesMoreThanEveryBufferHoldsEachWay() throws {
        try withEngine { harness, client in
            let upstream = try openTunnel(harness, client)
            let down = SocketEnd.pattern(2 << 20)
            let up = Array(SocketEnd.pattern(2 << 20 + 7).reversed())

            let writingDown = upstream.writeInBackground(down)
            #expect(try client.read(count: down.count) == down)
            try writingDown.wait()
            let writingUp = client.writeInBackground(up)
            #expect(try upstream.read(count: up.count) == up)
            try writingUp.wait()
        }
    }
}
