import Sockets
import TLS

/// The TLS under a client connection (docs/ARCHITECTURE.md, "TLS"): the handshake's steps and what
/// TLS changes in the interest (reads and writes through the session are `receive` and `send`). Whether the bytes go
/// through TLS and the handshake's phase are `ConnectionMachine`'s; this performs.
extension Connection {
    /// One step of the handshake; when it is done, requests are read as on a plain connection.
    func continueHandshake() {
        guard let tls else { return }
        switch tls.handshake() {
        case .done:
            machine.onHandshakeDone()
            // Where a stalled tunnel stopped, in the debug log: TLS was up, its requests are read next.
            if let pin = machine.pin { ctx.logger.debug("tunnel to \(pin.host):\(pin.port): TLS handshake done") }
            // A client may send its request with its Finished: read it now, not at the next event.
            readAvailable()
            guard !closed else { return }
            updateInterest()
        case .wantRead:
            setInterest(.read)
        case .wantWrite:
            setInterest(.write)
        case .closed:
            // Closed before or during the ClientHello: no failed handshake (CONTRACT "HTTPS for clients").
            close()
        case .failed(let failure):
            ctx.metrics.tlsHandshakeFailed()
            if ctx.shared.handshakeFailureLog.shouldLog(address: peer.host, now: ctx.loop.now) {
                ctx.logger.warning("TLS handshake with \(peer.host) failed: \(failure) (logged once a minute per client address)")
            }
            // Plain HTTP on a TLS port: say so in plain HTTP, as nginx does, rather than just closing.
            if machine.onHandshakeFailed(notTLS: failure == .notTLS) == .answerPlainlyThenClose {
                let answer = ProxyError.badRequest("this port speaks TLS: use https://").response(keepAlive: false, isHead: false)
                answer.withUnsafeBytes { _ = Syscall.write(fd, $0) }
            }
            close()
        }
    }

    /// What TLS changes in the interest: OpenSSL's own wish to write, no reading while a CONNECT's 200
    /// waits to go out, and decrypted bytes OpenSSL holds, which wake no epoll: they are read on the
    /// next turn (a record larger than the room that was left in the input buffer).
    @inline(never)
    func adjustedForTLS(_ interest: Interest) -> Interest {
        // During the handshake its own step says what to wait for (`continueHandshake`).
        if machine.isHandshaking { return self.interest }
        var wanted = interest
        if machine.tlsWantsWrite { wanted.insert(.write) }
        if machine.awaitsTunnel { wanted.remove(.read) }
        if machine.speaksTLS, wanted.contains(.read), tls!.hasBufferedInput { ctx.loop.schedule(task: self) }
        return wanted
    }
}
