import HTTP1
import Sockets

/// A client connection after `101 Switching Protocols` (docs/ENGINE.md, "Upgrade and WebSocket"):
/// both connections are a byte tunnel, each direction through a bounded buffer, until either side closes.
extension Connection {
    func startTunnel(_ exchange: Exchange, _ response: ResponseHead) {
        exchange.record.answered(status: 101)
        let out = ByteBuffer()
        Forwarder.writeSwitchingProtocolsHead(into: out, response)
        exchange.record.wroteOut(out.count)
        appendOut(out.bytes)
        recordFinished(exchange)
        ctx.metrics.tunnelOpened()
        machine.onTunnel()
        // What the client sent after its request head already belongs to the new protocol.
        if inStart < inBuf.count {
            inBuf.withUnsafeBytes(from: inStart) { exchange.queueRaw($0) }
            inStart = inBuf.count
            compactInput()
        }
        pumpUpstream(exchange)
        updateUpstreamInterest(exchange)
        flush()
    }

    /// Client bytes of a tunnel go up as they are, while the upstream keeps up.
    func readIntoTunnel(_ exchange: Exchange) {
        while !closed && exchange.pendingUpstreamCount < Connection.bodyHighWater {
            switch Syscall.read(fd, ctx.readBuffer) {
            case .done(let n):
                machine.onClientBytes(now: ctx.loop.now)
                exchange.queueRaw(UnsafeRawBufferPointer(rebasing: ctx.readBuffer[0..<n]))
                pumpUpstream(exchange)
                if n < ctx.readBuffer.count { break }
                continue
            case .wouldBlock:
                break
            case .closed:
                tunnelSideClosed(exchange, upstreamClosed: false)
                return
            }
            break
        }
        updateUpstreamInterest(exchange)
        updateInterest()
    }

    /// Either side of a tunnel closed: what the other side still has to get is sent, then both close.
    func tunnelSideClosed(_ exchange: Exchange, upstreamClosed: Bool) {
        if upstreamClosed {
            exchange.detachUpstream()?.retire(.closedByUpstream)
            machine.onTunnelUpstreamClosed()
            flush()
        } else {
            pumpUpstream(exchange)
            close()
        }
    }
}
