import Testing

/// An `Upgrade` request answered 101 turns both connections into a tunnel until either side closes
/// (CONTRACT.md "What the proxy does with a request", point 1). Only what the two ends see is
/// asserted, whichever relay carries the bytes.
@Suite(.engineTimeLimit) struct TunnelEngineTests {
    /// The client's upgrade, the upstream's 101 and a first message up the tunnel; the upstream's end.
    private func openTunnel(_ harness: EngineHarness, _ client: SocketEnd) async throws -> SocketEnd {
        try await client.write(getRequest("/socket", fields: ["Connection: Upgrade", "Upgrade: websocket"]))
        let (upstream, request) = try await harness.upstream.nextRequest()
        #expect(request.field("upgrade") == "websocket")
        #expect(request.field("authorization") == "Bearer token-1")
        try await upstream.write("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n")
        let switched = try #require(try await client.readMessage())
        #expect(switched.status == 101)
        #expect(switched.field("upgrade") == "websocket")
        try await client.write("ping")
        #expect(try await upstream.read(count: 4) == Array("ping".utf8))
        return upstream
    }

    @Test func bytesGoBothWaysAndTheClientsEndReachesTheUpstreamAfterItsLastBytes() async throws {
        try await withEngine { harness, client in
            let upstream = try await openTunnel(harness, client)

            try await upstream.write("pong")
            #expect(try await client.read(count: 4) == Array("pong".utf8))
            try await client.write("last")
            client.shutdownWrite()

            #expect(try await upstream.readToEnd() == Array("last".utf8))
            upstream.close()
            #expect(try await client.readToEnd() == [])
        }
    }

    @Test func theUpstreamsLastBytesReachTheClientBeforeItsEnd() async throws {
        try await withEngine { harness, client in
            let upstream = try await openTunnel(harness, client)

            try await upstream.write("goodbye")
            upstream.close()

            #expect(try await client.readToEnd() == Array("goodbye".utf8))
        }
    }

    @Test func aTunnelCarriesMoreThanEveryBufferHoldsEachWay() async throws {
        try await withEngine { harness, client in
            let upstream = try await openTunnel(harness, client)
            let down = SocketEnd.pattern(2 << 20)
            let up = Array(SocketEnd.pattern(2 << 20 + 7).reversed())

            let writingDown = upstream.writeInBackground(down)
            #expect(try await client.read(count: down.count) == down)
            try await writingDown.wait()
            let writingUp = client.writeInBackground(up)
            #expect(try await upstream.read(count: up.count) == up)
            try await writingUp.wait()
        }
    }
}
