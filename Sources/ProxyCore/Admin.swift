import Basics
import Config
import Credentials
import HTTP1
import Sockets

/// The admin listener's one-request connections: GET /healthz, /readyz, /metrics and POST /refresh
/// (CONTRACT.md "Signals, admin, logs"). Each answer closes the connection.
final class AdminConnection: EventHandler {
    let fd: Int32
    unowned let ctx: LoopContext
    unowned let service: any AdminService
    private var parser = RequestParser(limits: ParserLimits(maxHeaderBytes: 16 * 1024, maxBodyBytes: 64 * 1024))
    private var head: RequestHead?
    private var out: [UInt8] = []
    private var outStart = 0
    private var closed = false
    private let openedAt: Double

    init(fd: Int32, ctx: LoopContext, service: any AdminService) {
        self.fd = fd
        self.ctx = ctx
        self.service = service
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
        if let refusal = refusal(head) {
            reply(refusal)
            return
        }
        let parts = head.target.split(separator: "?", maxSplits: 1)
        let path = parts.first.map(String.init) ?? head.target
        // `?route=NAME` (CONTRACT "Several APIs"): names are [a-z0-9_-], so no decoding is needed.
        let route = parts.count == 2 ? parts[1].split(separator: "&").first { $0.hasPrefix("route=") }.map { String($0.dropFirst(6)) } : nil
        switch (head.method, path) {
        case ("GET", "/healthz"), ("HEAD", "/healthz"):
            reply(200, "ok\n", head: head)
        case ("GET", "/readyz"), ("HEAD", "/readyz"):
            let (ready, why) = service.readiness(route: route)
            if ready {
                reply(200, "ready\n", head: head)
            } else {
                reply(503, "not ready: \(why)\n", head: head)
            }
        case ("GET", "/metrics"), ("HEAD", "/metrics"):
            // Answered once every loop has handed over its counts (`AdminService.collectMetrics`).
            let fd = self.fd
            let loop = ctx.loop
            let me = LoopBound(self)
            let isHead = head.method == "HEAD"
            service.collectMetrics { text in
                loop.execute {
                    guard let connection = me.object, connection.fd == fd else { return }
                    connection.reply(200, text, isHead: isHead, contentType: "text/plain; version=0.0.4; charset=utf-8")
                }
            }
        case ("POST", "/refresh"):
            guard let result = service.forceRefresh(route: route) else {
                reply(404, #"{"error":"no_route","message":"no route of this name"}"# + "\n", head: head, contentType: "application/json")
                return
            }
            if !result.started.isEmpty {
                reply(202, #"{"status":"refresh started"}"# + "\n", head: head, contentType: "application/json")
            } else if !result.deferred.isEmpty {
                // Forced refreshes back off as failed ones do: this one is done when the back-off
                // allows (once for every ask deferred meanwhile). Accepted, so 202, saying when
                // (RFC 9110 §10.2.3).
                let body =
                    #"{"status":"refresh deferred","message":"forced refreshes back off like failed ones (1, 2, 4 … 60 s apart): this one is done when the back-off allows","retry_after":\#(result.retryAfter)}"#
                reply(202, body + "\n", isHead: false, contentType: "application/json", extraFields: [("Retry-After", String(result.retryAfter))])
            } else {
                let named = service.configuration.hasRoutes ? result.withoutSession.first : nil
                var bytes = ProxyError.loginRequired("no session: run `tokenproxy login`").response(keepAlive: false, isHead: false, route: named)
                replaceStatus(&bytes, 409)
                out = bytes
                flush()
            }
        case ("POST", "/reload"):
            guard let worker = service.reloadWorker else {
                reply(404, #"{"error":"not_found","message":"reload is not available"}"# + "\n", head: head, contentType: "application/json")
                return
            }
            // Answered when the new file is in effect (or refused). A reload swaps every loop's
            // routes, this one's included, so it runs on the reload worker, not on the loop.
            let fd = self.fd
            let loop = ctx.loop
            let me = LoopBound(self)
            let isHead = head.method == "HEAD"
            let submitted = worker.submit { outcome in
                loop.execute {
                    guard let connection = me.object, connection.fd == fd else { return }
                    switch outcome {
                    case .success:
                        connection.reply(200, #"{"status":"reloaded"}"# + "\n", isHead: isHead, contentType: "application/json")
                    case .failure(let errors):
                        var body = #"{"error":"invalid_configuration","message":"the configuration was not reloaded","errors":["#
                        var escaped: [UInt8] = []
                        for (i, e) in errors.enumerated() {
                            escaped.removeAll()
                            JSONString.appendEscaped(e, to: &escaped)
                            body += (i > 0 ? "," : "") + "\"" + String(decoding: escaped, as: UTF8.self) + "\""
                        }
                        body += "]}\n"
                        connection.reply(422, body, isHead: isHead, contentType: "application/json")
                    }
                }
            }
            if !submitted { reply(503, #"{"error":"overloaded","message":"no thread for the reload"}"# + "\n", head: head, contentType: "application/json") }
        case (_, "/healthz"), (_, "/readyz"), (_, "/metrics"), (_, "/refresh"), (_, "/reload"):
            reply(ProxyError.methodNotAllowed)
        default:
            reply(
                404, #"{"error":"not_found","message":"admin paths: /healthz /readyz /metrics /refresh /reload"}"# + "\n", head: head,
                contentType: "application/json")
        }
    }

    /// The proxy listener's rules (CONTRACT point 9) hold here too, or a web page could make a
    /// browser `POST /refresh` or `/reload` across sites, or read `/metrics` after DNS rebinding:
    /// `Host` must be a loopback name or the admin address (any with `allow_remote`), and a request
    /// with an `Origin` (only browsers send one) is refused.
    private func refusal(_ head: RequestHead) -> ProxyError? {
        let configuration = service.configuration
        if !configuration.allowRemote, let host = head.host, let policy = AccessPolicy.forAdmin(configuration), !policy.hostAllowed(host) {
            return .forbiddenHost
        }
        if head.first(named: "origin") != nil { return .forbiddenOrigin }
        return nil
    }

    private func replaceStatus(_ bytes: inout [UInt8], _ status: Int) {
        let line = ByteBuffer()
        ResponseWriter.appendStatusLine(line, version: .http1_1, code: status, reason: ResponseWriter.reasonPhrase(for: status))
        let end = bytes.firstIndex(of: 10)! + 1
        bytes.replaceSubrange(0..<end, with: line.bytes)
    }

    private func reply(_ status: Int, _ body: String, head: RequestHead, contentType: String = "text/plain; charset=utf-8") {
        reply(status, body, isHead: head.method == "HEAD", contentType: contentType)
    }

    private func reply(_ status: Int, _ body: String, isHead: Bool, contentType: String, extraFields: [(String, String)] = []) {
        guard !closed else { return }
        let bytes = ByteBuffer()
        ResponseWriter.appendStatusLine(bytes, version: .http1_1, code: status, reason: ResponseWriter.reasonPhrase(for: status))
        for (name, value) in extraFields { ResponseWriter.appendField(bytes, name: name, value: value) }
        ResponseWriter.appendField(bytes, name: "Content-Type", value: contentType)
        ResponseWriter.appendField(bytes, name: "Content-Length", value: String(body.utf8.count))
        ResponseWriter.appendField(bytes, name: "Connection", value: "close")
        ResponseWriter.appendEndOfHead(bytes)
        if !isHead { bytes.append(utf8: body) }
        out = bytes.bytes
        flush()
    }

    private func reply(_ error: ProxyError, status: Int? = nil) {
        var bytes = error.response(keepAlive: false, isHead: head?.method == "HEAD")
        if let status { replaceStatus(&bytes, status) }
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
