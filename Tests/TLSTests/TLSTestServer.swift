import Foundation
import Sockets
import Synchronization
import TLS

/// What the test server saw, in order.
enum ServerEvent: Equatable {
    case handshake(serverName: String?, applicationProtocol: String?, version: TLSVersion?)
    case failure(TLSFailure)
}

/// A small HTTPS/1.1 server on one event loop thread, built on the TLS module and the Sockets layer:
/// non-blocking sockets, every TLS step driven by epoll readiness. It answers each request head with
/// 200 and a body naming the session's version, ALPN protocol and server name (keep-alive).
final class TLSTestServer: @unchecked Sendable {
    let context: TLSServerContext
    let port: Int
    /// `https://localhost:PORT/`: the name the server certificate is for.
    var localhostURL: String { "https://localhost:\(port)/" }
    private let listener: ListeningSocket
    private let loop: EventLoop
    private let finished = DispatchSemaphore(value: 0)
    private let log = Mutex<[ServerEvent]>([])

    init(context: TLSServerContext, serverName: (@Sendable (String?) -> ServerNameDecision)? = nil) throws {
        self.context = context
        // OpenSSL writes the socket with write(2): a client gone mid-answer must not end the test process.
        signal(SIGPIPE, SIG_IGN)
        listener = try ListeningSocket.tcp(host: "127.0.0.1", port: 0, reusePort: false)
        port = listener.address.port ?? 0
        loop = try EventLoop(index: 0)
        let acceptor = Acceptor(server: self, serverName: serverName)
        try loop.register(listener.fd, .accept, acceptor)
        try OSThread.start(name: "tls-test") { [loop, finished] in
            loop.run()
            finished.signal()
        }
    }

    func stop() {
        loop.stop()
        finished.wait()
        listener.close()
    }

    var events: [ServerEvent] { log.withLock { $0 } }

    func record(_ event: ServerEvent) { log.withLock { $0.append(event) } }

    /// Waits up to `seconds` for an event that `match` accepts.
    func waitFor(seconds: Double = 10, _ match: (ServerEvent) -> Bool) -> ServerEvent? {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            if let found = events.first(where: match) { return found }
            Thread.sleep(forTimeInterval: 0.02)
        }
        return nil
    }

    private final class Acceptor: EventHandler {
        unowned let server: TLSTestServer
        let serverName: (@Sendable (String?) -> ServerNameDecision)?
        init(server: TLSTestServer, serverName: (@Sendable (String?) -> ServerNameDecision)?) {
            self.server = server
            self.serverName = serverName
        }

        func handleEvents(_ events: UInt32) {
            while case .connection(let fd, _) = server.listener.accept() {
                guard let session = try? server.context.makeSession(fd: fd, serverName: serverName) else {
                    Syscall.close(fd)
                    continue
                }
                let connection = TestConnection(server: server, session: session)
                do { try server.loop.register(fd, .read, connection) } catch {
                    Syscall.close(fd)
                    continue
                }
                connection.advance()
            }
        }
    }

    /// One client: handshake, then request heads in, answers out, until the client closes.
    private final class TestConnection: EventHandler {
        unowned let server: TLSTestServer
        let session: TLSSession
        var handshaken = false
        var input: [UInt8] = []
        var output: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 16384)

        init(server: TLSTestServer, session: TLSSession) {
            self.server = server
            self.session = session
        }

        func handleEvents(_ events: UInt32) { advance() }

        func advance() {
            if !handshaken {
                switch session.handshake() {
                case .done:
                    handshaken = true
                    server.record(.handshake(serverName: session.serverName, applicationProtocol: session.applicationProtocol, version: session.version))
                case .wantRead: return wait(.read)
                case .wantWrite: return wait([.read, .write])
                case .closed: return finish()
                case .failed(let failure):
                    server.record(.failure(failure))
                    return finish()
                }
            }
            while true {
                let result = buffer.withUnsafeMutableBytes { session.read(into: $0) }
                if result == .wantRead { break }
                guard let count = byteCount(result) else { return }
                input += buffer[0..<count]
            }
            answerRequests()
            while !output.isEmpty {
                guard let count = byteCount(output.withUnsafeBytes { session.write($0) }) else { return }
                output.removeFirst(count)
            }
            wait(.read)
        }

        /// The bytes a read or write moved, or nil after arranging what comes next: a wait, or the end.
        private func byteCount(_ result: TLSTransfer) -> Int? {
            switch result {
            case .done(let count): return count
            case .wantRead: wait(.read)
            case .wantWrite: wait([.read, .write])
            case .closed: finish()
            case .failed(let failure):
                server.record(.failure(failure))
                finish()
            }
            return nil
        }

        /// Every complete request head gets its answer (these tests send no bodies).
        private func answerRequests() {
            let end: [UInt8] = Array("\r\n\r\n".utf8)
            while let range = input.firstRange(of: end) {
                input.removeSubrange(..<range.upperBound)
                let version = session.version.map { $0 == .tls13 ? "tls13" : "tls12" } ?? "none"
                let body = "version=\(version) alpn=\(session.applicationProtocol ?? "none") sni=\(session.serverName ?? "none")\n"
                output += Array("HTTP/1.1 200 OK\r\nContent-Length: \(body.utf8.count)\r\nContent-Type: text/plain\r\n\r\n\(body)".utf8)
            }
        }

        private func wait(_ interest: Interest) { server.loop.modify(session.fd, interest) }

        private func finish() {
            if handshaken { _ = session.shutdown() }
            server.loop.unregister(session.fd, self)
            Syscall.close(session.fd)
        }
    }
}
