import Config
import Credentials
import HTTP1
import Sockets

/// The admin listener's one-request connections: GET /healthz, /readyz, /metrics and POST /refresh
/// (CONTRACT.md "Signals, admin, logs"). Each answer closes the connection.
final class AdminConnection: EventHandler {
    let fd: Int32
    unowned let ctx: LoopContext
    unowned let server: Server
    private var parser = RequestParser(limits: ParserLimits(maxHeaderBytes: 16 * 1024, maxBodyBytes: 64 * 1024))
    private var head: RequestHead?
    private var out: [UInt8] = []
    private var outStart = 0
    private var closed = false
    private let openedAt: Double

    init(fd: Int32, ctx: LoopContext, server: Server) {
        self.fd = fd
        self.ctx = ctx
        self.server = server
        openedAt = ctx.loop.now
        // A client that never finishes its request does not keep the socket forever.
        ctx.loop.schedule(after: FixedLimits.adminRequestSeconds) { [weak self] in self?.close() }
    }

    func handleEvents(_ events: UInt32) {
        if events & ReadyEvents.readable != 0 && out.isEmpty {
            readRequest()
        } else if events & ReadyEvents.failed != 0 {
            close()
            return
        }
        if events & ReadyEvents.writable != 0 { flush() }
    }

    private func readRequest() {
        while !closed {
            switch Syscall.read(fd, ctx.readBuffer) {
            case .done(let n):
                var offset = 0
                var more = true
                while more && out.isEmpty && !closed {
                    let (consumed, event) = parser.parse(UnsafeRawBufferPointer(rebasing: ctx.readBuffer[offset..<n]))
                    offset += consumed
                    switch event {
                    case .head(let h): head = h
                    case .body: break
                    case .end: answer()
                    case .error(let e): reply(ProxyError(e))
                    case nil: more = consumed > 0 && offset < n
                    }
                }
                if !out.isEmpty { return }
            case .wouldBlock:
                return
            case .closed:
                close()
                return
            }
        }
    }

    private func answer() {
        guard let head else { return }
        let path = head.target.split(separator: "?", maxSplits: 1).first.map(String.init) ?? head.target
        switch (head.method, path) {
        case ("GET", "/healthz"), ("HEAD", "/healthz"):
            reply(200, "ok\n", head: head)
        case ("GET", "/readyz"), ("HEAD", "/readyz"):
            if server.isReady {
                reply(200, "ready\n", head: head)
            } else {
                let view = ctx.tokens.current()
                reply(503, "not ready: \(server.shared.draining.load(ordering: .relaxed) ? "draining" : (view.failure ?? "no usable token"))\n", head: head)
            }
        case ("GET", "/metrics"), ("HEAD", "/metrics"):
            reply(200, server.metricsText(), head: head, contentType: "text/plain; version=0.0.4; charset=utf-8")
        case ("POST", "/refresh"):
            if server.forceRefresh() {
                reply(202, #"{"status":"refresh started"}"# + "\n", head: head, contentType: "application/json")
            } else {
                reply(ProxyError.loginRequired("no session: run `tokenproxy login`"), status: 409)
            }
        case (_, "/healthz"), (_, "/readyz"), (_, "/metrics"), (_, "/refresh"):
            reply(ProxyError.methodNotAllowed)
        default:
            reply(404, #"{"error":"not_found","message":"admin paths: /healthz /readyz /metrics /refresh"}"# + "\n", head: head, contentType: "application/json")
        }
    }

    private func reply(_ status: Int, _ body: String, head: RequestHead, contentType: String = "text/plain; charset=utf-8") {
        var bytes: [UInt8] = []
        ResponseWriter.appendStatusLine(&bytes, version: .http1_1, code: status, reason: ResponseWriter.reasonPhrase(for: status))
        ResponseWriter.appendField(&bytes, name: "Content-Type", value: contentType)
        ResponseWriter.appendField(&bytes, name: "Content-Length", value: String(body.utf8.count))
        ResponseWriter.appendField(&bytes, name: "Connection", value: "close")
        ResponseWriter.appendEndOfHead(&bytes)
        if head.method != "HEAD" { bytes.append(contentsOf: body.utf8) }
        out = bytes
        flush()
    }

    private func reply(_ error: ProxyError, status: Int? = nil) {
        var bytes = error.response(keepAlive: false, isHead: head?.method == "HEAD")
        if let status {
            // Same body, another status (409 for POST /refresh without a session).
            var line: [UInt8] = []
            ResponseWriter.appendStatusLine(&line, version: .http1_1, code: status, reason: ResponseWriter.reasonPhrase(for: status))
            let end = bytes.firstIndex(of: 10)! + 1
            bytes.replaceSubrange(0..<end, with: line)
        }
        out = bytes
        flush()
    }

    private func flush() {
        while outStart < out.count {
            let r = out.withUnsafeBytes { Syscall.write(fd, UnsafeRawBufferPointer(rebasing: $0[outStart...])) }
            switch r {
            case .done(let n): outStart += n
            case .wouldBlock:
                ctx.loop.modify(fd, .write)
                return
            case .closed:
                close()
                return
            }
        }
        close()
    }

    func close() {
        guard !closed else { return }
        closed = true
        ctx.loop.unregister(fd, self)
        Syscall.close(fd)
    }
}
