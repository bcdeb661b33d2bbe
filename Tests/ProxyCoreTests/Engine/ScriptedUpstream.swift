/// The upstream the harness's proxy forwards to: a real TCP listener in the test's process that the
/// test scripts step by step (take the next request, answer this head, then this body, close).
/// The proxy reaches it as it reaches any upstream (its connector, libcurl, its pool), so nothing
/// in Sources is replaced. Driven by one test at a time; its waits run on a thread of their own
/// (`onOwnThread`).
final class ScriptedUpstream {
    let port: Int
    private let listener: Int32
    /// The connections the proxy opened and has not closed, oldest first.
    private var connections: [SocketEnd] = []
    private var closed = false

    init() throws {
        (listener, port) = try LoopbackListener.open()
    }

    deinit { close() }

    var url: String { "http://127.0.0.1:\(port)" }

    /// The next connection the proxy opens.
    func accept() async throws -> SocketEnd { try await onOwnThread { try self.blockingAccept() } }

    /// The next request the proxy sends, on a connection it keeps (its pool) or a new one, with the
    /// connection to answer it on.
    func nextRequest() async throws -> (connection: SocketEnd, request: HTTPMessage) {
        try await onOwnThread { try self.blockingNextRequest() }
    }

    /// Reads the next request and answers it with `status`, `fields` and `body` (Content-Length framing).
    @discardableResult
    func answerNext(status: Int = 200, fields: [String] = [], body: String = "") async throws -> HTTPMessage {
        let (connection, request) = try await nextRequest()
        try await connection.write(Self.response(status: status, fields: fields, body: body))
        return request
    }

    private func blockingAccept() throws -> SocketEnd {
        let connection = try LoopbackListener.accept(listener)
        connections.append(connection)
        return connection
    }

    private func blockingNextRequest() throws -> (connection: SocketEnd, request: HTTPMessage) {
        while true {
            connections.removeAll { $0.closed }
            if let ready = connections.first(where: { $0.hasInput }) {
                if let request = try ready.blockingReadMessage() { return (ready, request) }
                ready.close()  // the proxy closed it (an idle connection let go)
                continue
            }
            let fd = try LoopbackListener.firstReadable([listener] + connections.map(\.fd))
            if fd == listener { _ = try blockingAccept() }
        }
    }

    static func response(status: Int, fields: [String] = [], body: String) -> String {
        var head = "HTTP/1.1 \(status) Status\r\n"
        for field in fields { head += field + "\r\n" }
        return head + "Content-Length: \(body.utf8.count)\r\n\r\n" + body
    }

    func close() {
        guard !closed else { return }
        closed = true
        for connection in connections { connection.close() }
        connections = []
        LoopbackListener.close(listener)
    }
}
