import Sockets
import TLS

/// The TLS under a client connection (docs/ARCHITECTURE.md, "TLS"): reads and writes through the
/// session, the handshake's steps, and what TLS changes in the interest. Whether the bytes go
/// through TLS and the handshake's phase are `ConnectionMachine`'s; this performs.
extension Connection {
    /// Client bytes: from the socket, or decrypted from the TLS session over it.
    @inline(__always)
    func receive(_ buffer: UnsafeMutableRawBufferPointer) -> IOResult {
        guard machine.speaksTLS else { return Syscall.read(fd, buffer) }
        var wantsWrite = false
        let result = ClientTLSIO.read(tls!, buffer, wantsWrite: &wantsWrite)
        if wantsWrite { machine.onTLSWantsWrite() }
        return result
    }

    /// Bytes to the client: to the socket, or encrypted through the TLS session.
    @inline(__always)
    func send(_ bytes: UnsafeRawBufferPointer) -> IOResult {
        guard machine.speaksTLS else { return Syscall.write(fd, bytes) }
        return ClientTLSIO.write(tls!, bytes)
    }

    /// One step of the handshake; when it is done, requests are read as on a plain connection.
    func continueHandshake() {
        guard let tls else { return }
        switch tls.handshake() {
        case .done:
            machine.onHandshakeDone()
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
