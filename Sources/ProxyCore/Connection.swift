import Credentials
import Glibc
import HTTP1
import Sockets
import Upstream

/// One client connection: reads and parses requests, checks them, forwards each one upstream with
/// the token and streams the answer back, one exchange at a time (pipelined requests wait their
/// turn, so answers leave in order, RFC 9112 §9.3.2). Everything here runs on its loop's thread.
final class Connection: EventHandler, LoopTask {
    let fd: Int32
    let peer: SocketAddress
    /// unowned(unsafe): the loop's context outlives its connections (it holds them), and a checked
    /// unowned load costs two atomic operations per access (slow ones: the context has a side table).
    unowned(unsafe) let ctx: LoopContext
    private var parser: RequestParser
    private var inBuf: [UInt8] = []
    private var inStart = 0
    private var outBuf: [UInt8] = []
    private var outStart = 0
    private var interest: Interest = .read
    private(set) var closed = false
    /// The client shut down its sending side: finish the current answer, then close.
    private var peerHalfClosed = false
    private var closeAfterWrite = false
    private var exchange: Exchange?
    /// A request has ended and its answer has not: the next pipelined request waits.
    private var parsingSuspended = false
    private var lastClientByte: Double
    /// Reused for every request's upstream header lines (no allocation per request once grown).
    private var headerLines = HeaderLines()
    private var headStartedAt: Double?

    /// Bytes of response waiting for the client above which libcurl is paused, and below which it resumes.
    static let outHighWater = 256 * 1024
    static let outLowWater = 64 * 1024
    /// Request body bytes waiting for libcurl above which the client is no longer read.
    static let bodyHighWater = 256 * 1024
    /// Unparsed client bytes above which the socket is no longer read.
    static let inHighWater = 64 * 1024

    init(fd: Int32, peer: SocketAddress, ctx: LoopContext) {
        self.fd = fd
        self.peer = peer
        self.ctx = ctx
        // The body limit is checked here, after the access checks (CONTRACT point 10), not by the parser.
        parser = RequestParser(limits: ParserLimits(maxHeaderBytes: ctx.configuration.limits.maxHeaderBytes, maxBodyBytes: 0))
        lastClientByte = ctx.loop.now
    }

    // MARK: events

    /// Scheduled by `finish` and `bodyDrained` (not from inside libcurl's callbacks): parse on.
    func runLoopTask() {
        guard !closed else { return }
        process()
    }

    func handleEvents(_ events: UInt32) {
        if events & ReadyEvents.failed != 0 && events & ReadyEvents.readable == 0 {
            close()
            return
        }
        if events & ReadyEvents.readable != 0 {
            readAvailable()
        } else if events & ReadyEvents.peerClosed != 0 {
            clientFinishedSending()
        }
        guard !closed else { return }
        if events & ReadyEvents.writable != 0 {
            flush()
            guard !closed else { return }
            if let transfer = exchange?.transfer, transfer.isReceivePaused, pendingOut < Connection.outLowWater {
                transfer.resumeReceiving()
                guard !closed else { return }
            }
        }
        updateInterest()
    }

    private var pendingOut: Int { outBuf.count - outStart }

    private func readAvailable() {
        if lingering {
            discardInput()
            return
        }
        while !closed && inBuf.count - inStart < Connection.inHighWater {
            switch Syscall.read(fd, ctx.readBuffer) {
            case .done(let n):
                lastClientByte = ctx.loop.now
                if inStart > 0 && inStart == inBuf.count {
                    inBuf.removeAll(keepingCapacity: true)
                    inStart = 0
                }
                inBuf.append(contentsOf: UnsafeRawBufferPointer(rebasing: ctx.readBuffer[0..<n]))
                if n < ctx.readBuffer.count {
                    process()
                    return
                }
            case .wouldBlock:
                process()
                return
            case .closed:
                process()
                clientFinishedSending()
                return
            }
        }
        process()
    }

    private func clientFinishedSending() {
        peerHalfClosed = true
        guard let exchange else {
            // Nothing in flight; an unfinished request head can never complete now.
            if pendingOut > 0 || closeAfterWrite { closeAfterWrite = true } else { close() }
            return
        }
        // Cut off mid-request: the upstream can never get it whole. Otherwise answer, then close.
        if !exchange.requestBodyDone { close() }
    }

    /// The client has shut down its side and every request it sent has been taken.
    private var noMoreRequests: Bool { peerHalfClosed && inStart == inBuf.count }

    // MARK: parsing

    /// Feeds buffered client bytes to the parser while the current exchange can take them.
    private func process() {
        // The parser wants another call after every event, even with no bytes left (`.end` may be due).
        var more = true
        while more && !closed && !parsingSuspended {
            if let exchange, exchange.pendingBodyCount >= Connection.bodyHighWater { break }
            let base = inStart
            let (consumed, event) = inBuf.withUnsafeBytes { raw in
                parser.parse(UnsafeRawBufferPointer(rebasing: raw[base...]))
            }
            inStart += consumed
            if let event {
                handle(event, base: base)
            } else {
                more = consumed > 0 && inStart < inBuf.count
            }
        }
        if !closed && exchange == nil && !parser.isIdle && headStartedAt == nil {
            headStartedAt = ctx.loop.now
        }
        if inStart == inBuf.count && inStart > 0 {
            inBuf.removeAll(keepingCapacity: inBuf.capacity <= 2 * Connection.inHighWater)
            inStart = 0
        } else if inStart > Connection.inHighWater {
            inBuf.removeFirst(inStart)
            inStart = 0
        }
        updateInterest()
    }

    private func handle(_ event: ParseEvent, base: Int) {
        switch event {
        case .head(let head):
            headStartedAt = nil
            begin(head)
        case .body(let range):
            guard let exchange else { return }
            inBuf.withUnsafeBytes { raw in
                exchange.takeBody(UnsafeRawBufferPointer(rebasing: raw[(base + range.lowerBound)..<(base + range.upperBound)]))
            }
            if exchange.overBodyLimit {
                fail(.bodyTooLarge, exchange: exchange)
                return
            }
            exchange.transfer?.resumeSending()
        case .end:
            guard let exchange else { return }
            exchange.requestBodyDone = true
            parsingSuspended = true
            exchange.transfer?.resumeSending()
            if exchange.responseDone { finish(exchange) }
        case .error(let error):
            headStartedAt = nil
            fail(ProxyError(error), exchange: exchange)
        }
    }

    // MARK: one exchange

    private func begin(_ head: RequestHead) {
        let exchange = Exchange(head: head, startedAt: ctx.loop.now, draining: ctx.shared.draining.load(ordering: .relaxed))
        self.exchange = exchange
        switch ctx.policy.check(head) {
        case .failure(let error):
            respond(error, to: exchange)
        case .success(let target):
            exchange.url = ctx.forwarder.url(path: target.path, query: target.query)
            exchange.logPath = target.path
            exchange.configureLimits(maxBodyBytes: ctx.configuration.limits.maxBodyBytes, shared: ctx.shared, retryMemory: ctx.configuration.forward.retryMemory)
            let keepsClientAuthorization = ctx.forwarder.keepsClientAuthorization(head)
            exchange.prepareReplay(
                enabled: ctx.tokenCanChange && !keepsClientAuthorization, limit: ctx.configuration.forward.retryBodyLimit)
            if keepsClientAuthorization {
                send(exchange, token: nil)
            } else {
                acquireToken(for: exchange, staleGeneration: nil)
            }
        }
    }

    /// Sends with the current token, or waits (bounded by `refresh_wait`) for a refresh to give one.
    private func acquireToken(for exchange: Exchange, staleGeneration: UInt64?) {
        let view = ctx.tokens.current()
        if let snapshot = view.snapshot, snapshot.isValid(at: wallClock()), staleGeneration == nil || snapshot.generation != staleGeneration {
            send(exchange, token: snapshot)
            return
        }
        switch view.session {
        case .ended:
            respond(.loginRequired(view.failure ?? "the session ended: run `tokenproxy login`"), to: exchange)
            return
        case .none where ctx.sessionNeedsLogin:
            respond(.loginRequired("no session: run `tokenproxy login`"), to: exchange)
            return
        case .none, .active:
            break
        }
        ctx.metrics.waitedForToken()
        exchange.waitingForToken = true
        let loop = ctx.loop
        exchange.tokenTimer = loop.schedule(after: ctx.configuration.limits.refreshWait) { [weak self, weak exchange] in
            guard let self, let exchange, exchange.waitingForToken, !self.closed else { return }
            exchange.waitingForToken = false
            self.tokenWaitEnded(exchange, outcome: nil)
        }
        ctx.tokens.refresh(staleGeneration: staleGeneration ?? view.snapshot?.generation, reason: staleGeneration == nil ? .expiry : .unauthorized) { outcome in
            loop.execute { [weak self, weak exchange] in
                guard let self, let exchange, exchange.waitingForToken, !self.closed else { return }
                exchange.waitingForToken = false
                if let timer = exchange.tokenTimer { loop.cancel(timer) }
                self.tokenWaitEnded(exchange, outcome: outcome)
            }
        }
    }

    private func tokenWaitEnded(_ exchange: Exchange, outcome: RefreshOutcome?) {
        let retrying = exchange.held401 != nil
        switch outcome {
        case .token(let snapshot) where snapshot.isValid(at: wallClock()):
            if retrying && snapshot.generation == exchange.sentGeneration {
                // The source gave back the token the upstream refused: pass its answer on as it came.
                releaseHeld401(exchange)
            } else {
                if retrying { ctx.metrics.retriedAfter401() }
                send(exchange, token: snapshot)
            }
        case .loginRequired(let why):
            respond(.loginRequired(why), to: exchange)
        case .token, .unavailable, nil:
            if retrying {
                releaseHeld401(exchange)
            } else {
                let view = ctx.tokens.current()
                let why: String
                if case .unavailable(let message, _) = outcome { why = message } else { why = view.failure ?? "no valid token yet" }
                respond(.tokenUnavailable("no valid token: \(why)", retryAfter: view.retryAfter), to: exchange)
            }
        }
    }

    private func send(_ exchange: Exchange, token: TokenSnapshot?) {
        let head = exchange.head
        exchange.sentGeneration = token?.generation
        exchange.injectedToken = token != nil
        let body: UpstreamRequest.Body
        if exchange.held401 != nil, let replay = exchange.replay {
            exchange.readingReplay = true
            exchange.replayOffset = 0
            body = head.framing == .none ? .none : .length(replay.count)
        } else {
            switch head.framing {
            case .none: body = .none
            case .contentLength(let n): body = .length(n)
            case .chunked: body = .streamed
            }
        }
        exchange.held401 = nil
        ctx.forwarder.headerLines(into: &headerLines, for: head, authorization: token?.authorizationValue, peerHost: peer.host)
        let request = UpstreamRequest(url: exchange.url, method: head.method, headerLines: headerLines, body: body)
        exchange.upstreamStartedAt = ctx.loop.now
        do {
            exchange.transfer = try ctx.upstream.start(request, delegate: exchange)
            exchange.connection = self
        } catch {
            respond(.badGateway("the upstream request could not be made: \(error)"), to: exchange)
            return
        }
        // RFC 9110 §10.1.1: the client waits for 100 before sending the body; send it only now that the body is wanted.
        if head.expectContinue && head.version == .http1_1 && head.framing != .none && !exchange.requestBodyDone
            && !exchange.continueSent && !exchange.responseStarted
        {
            exchange.continueSent = true
            outBuf.append(contentsOf: "HTTP/1.1 100 Continue\r\n\r\n".utf8)
            flush()
        }
    }

    // MARK: from the upstream (called by Exchange, on this loop)

    /// libcurl took enough of the buffered body: read the client again (not from inside libcurl's callback).
    func bodyDrained() {
        ctx.loop.schedule(task: self)  // runLoopTask: process() on the next turn
    }

    func upstreamHead(_ exchange: Exchange, _ response: ResponseHead) {
        ctx.metrics.upstreamLatency(ctx.loop.now - exchange.upstreamStartedAt)
        exchange.lastUpstreamByte = ctx.loop.now
        if response.status == 401 && exchange.injectedToken {
            if exchange.retried {
                // A freshly refreshed token was refused too (CONTRACT point 3): no refresh storm.
                ctx.shared.upstreamRefusedFreshToken(now: ctx.loop.now)
            } else if exchange.replayComplete && ctx.tokenCanChange && !ctx.shared.refusingGoodTokens(now: ctx.loop.now) {
                exchange.held401 = Held401(head: response)
                return
            }
        }
        writeHead(exchange, response)
    }

    private func writeHead(_ exchange: Exchange, _ response: ResponseHead) {
        let head = exchange.head
        let status = response.status
        exchange.status = status
        exchange.responseStarted = true
        var upstreamConnectionOptions: [String] = []
        var contentLength: Int?
        var upstreamChunked = false
        for i in 0..<response.count {
            if response.nameEquals(i, "connection") {
                if response.valueEquals(i, "keep-alive") {
                    continue  // the usual value; Keep-Alive is hop-by-hop anyway
                } else if response.valueEquals(i, "close") {
                    upstreamConnectionOptions.append("close")
                } else {
                    upstreamConnectionOptions += response.value(i).split(separator: ",").map { $0.trimmingSpaces().lowercased() }
                }
            } else if response.nameEquals(i, "transfer-encoding") {
                upstreamChunked = true
            } else if response.nameEquals(i, "content-length") {
                contentLength = response.decimalValue(i)
            }
        }
        let noBody = head.method == "HEAD" || status == 204 || status == 304 || status < 200
        if noBody {
            exchange.framing = .none
        } else if let contentLength, !upstreamChunked {
            exchange.framing = .length(contentLength)
        } else if head.version == .http1_1 {
            exchange.framing = .chunked
        } else {
            exchange.framing = .close
            exchange.keepAlive = false
        }
        let reason = response.reason
        ResponseWriter.appendStatusLine(&outBuf, version: .http1_1, code: status, reason: reason.isEmpty ? ResponseWriter.reasonPhrase(for: status) : reason)
        var dropsContentLength = false
        switch exchange.framing {
        case .chunked, .close: dropsContentLength = true
        case .none, .length: break
        }
        for i in 0..<response.count {
            if response.isHopByHop(i, connectionOptions: upstreamConnectionOptions) { continue }
            if dropsContentLength && response.nameEquals(i, "content-length") { continue }
            if response.nameEquals(i, "location"),
                let rewritten = ctx.forwarder.rewrittenLocation(response.value(i), clientHost: head.first("host"))
            {
                ResponseWriter.appendField(&outBuf, name: response.name(i), value: rewritten)
                continue
            }
            response.copyField(i, to: &outBuf)
        }
        if case .chunked = exchange.framing { ResponseWriter.appendField(&outBuf, name: "Transfer-Encoding", value: "chunked") }
        if !exchange.keepAlive || noMoreRequests {
            ResponseWriter.appendField(&outBuf, name: "Connection", value: "close")
        } else if head.version == .http1_0 {
            ResponseWriter.appendField(&outBuf, name: "Connection", value: "keep-alive")
        }
        ResponseWriter.appendEndOfHead(&outBuf)
        // Not flushed here: the body usually follows within the same libcurl call, and head and
        // body then leave in one write; `upstreamCallbacksEnded` (or the body, or the end) flushes.
    }

    /// libcurl returned after delivering a head: send what is buffered.
    func upstreamCallbacksEnded() {
        guard !closed, pendingOut > 0 else { return }
        flush()
    }

    /// Returns false when the client cannot take more now (libcurl pauses and delivers again later).
    func upstreamBody(_ exchange: Exchange, _ bytes: UnsafeRawBufferPointer) -> Bool {
        exchange.lastUpstreamByte = ctx.loop.now
        if let held = exchange.held401 {
            if held.body.count + bytes.count <= Held401.maxBody {
                held.body.append(contentsOf: bytes)
                return true
            }
            // Too big to hold for a retry: give up the retry and pass the answer on.
            exchange.held401 = nil
            writeHead(exchange, held.head)
            _ = held.body.withUnsafeBytes { writeBody(exchange, $0) }
        }
        if closed { return true }
        if pendingOut >= Connection.outHighWater { return false }
        return writeBody(exchange, bytes)
    }

    private func writeBody(_ exchange: Exchange, _ bytes: UnsafeRawBufferPointer) -> Bool {
        guard bytes.count > 0 else { return true }
        exchange.bytesOut += bytes.count
        switch exchange.framing {
        case .none:
            return true
        case .chunked:
            ResponseWriter.appendChunkHeader(&outBuf, size: bytes.count)
            outBuf.append(contentsOf: bytes)
            ResponseWriter.appendChunkEnd(&outBuf)
        case .length, .close:
            if pendingOut == 0 {
                // Straight from libcurl's buffer to the socket; keep only what did not fit.
                switch Syscall.write(fd, bytes) {
                case .done(let n):
                    if n < bytes.count { outBuf.append(contentsOf: UnsafeRawBufferPointer(rebasing: bytes[n...])) }
                case .wouldBlock:
                    outBuf.append(contentsOf: bytes)
                case .closed:
                    close()
                    return true
                }
                updateInterest()
                return true
            }
            outBuf.append(contentsOf: bytes)
        }
        flush()
        return true
    }

    func upstreamComplete(_ exchange: Exchange, _ failure: UpstreamFailure?) {
        exchange.transfer = nil
        guard !closed else { return }
        if let held = exchange.held401 {
            if failure != nil || !exchange.requestBodyDone {
                exchange.held401 = nil
                if failure == nil {
                    releaseHeld(exchange, held)
                } else {
                    respond(.badGateway("the upstream connection failed"), to: exchange)
                }
                return
            }
            exchange.retried = true
            acquireToken(for: exchange, staleGeneration: exchange.sentGeneration)
            return
        }
        if let failure {
            if exchange.responseStarted {
                // Once a response has started, a failure can only close the connection (CONTRACT).
                ctx.logger.warning("upstream failed mid-response: \(failure)")
                exchange.status = 502
                recordFinished(exchange)
                close()
                return
            }
            switch failure {
            case .timedOut: respond(.upstreamTimeout, to: exchange)
            case .unreachable(let why): respond(.badGateway("the upstream could not be reached: \(why)"), to: exchange)
            case .badResponse(let why): respond(.badGateway("the upstream answered badly: \(why)"), to: exchange)
            }
            return
        }
        if case .chunked = exchange.framing { ResponseWriter.appendLastChunk(&outBuf) }
        responseDone(exchange)
    }

    private func releaseHeld401(_ exchange: Exchange) {
        guard let held = exchange.held401 else { return }
        exchange.held401 = nil
        releaseHeld(exchange, held)
    }

    private func releaseHeld(_ exchange: Exchange, _ held: Held401) {
        // The framing of what we hold is known exactly now.
        var response = ResponseHead()
        response.status = held.head.status
        response.reason = held.head.reason
        for i in 0..<held.head.count where !held.head.nameEquals(i, "content-length") && !held.head.nameEquals(i, "transfer-encoding") {
            response.append(fieldAt: i, of: held.head)
        }
        response.append(name: "Content-Length", value: String(held.body.count))
        writeHead(exchange, response)
        _ = held.body.withUnsafeBytes { writeBody(exchange, $0) }
        responseDone(exchange)
    }

    // MARK: ending an exchange

    /// Answers with one of the proxy's own errors.
    private func respond(_ error: ProxyError, to exchange: Exchange) {
        exchange.transfer?.cancel()
        exchange.transfer = nil
        // A body we will not read leaves the framing in doubt unless it is already all here.
        if error.closesConnection || (exchange.head.framing != .none && !exchange.requestBodyDone) {
            exchange.keepAlive = false
        }
        exchange.status = error.status
        exchange.responseStarted = true
        let bytes = error.response(keepAlive: exchange.keepAlive && !noMoreRequests, isHead: exchange.head.method == "HEAD")
        exchange.bytesOut += bytes.count
        outBuf.append(contentsOf: bytes)
        responseDone(exchange)
    }

    /// A request that could not even be parsed (or a timeout): answer, then close.
    private func fail(_ error: ProxyError, exchange: Exchange?) {
        if let exchange {
            if exchange.responseStarted && !exchange.responseDone {
                close()
                return
            }
            exchange.keepAlive = false
            if !exchange.responseDone {
                respond(error, to: exchange)
                return
            }
        }
        let bytes = error.response(keepAlive: false, isHead: false)
        outBuf.append(contentsOf: bytes)
        ctx.metrics.requestFinished(status: error.status, bytesIn: 0, bytesOut: bytes.count)
        closeAfterWrite = true
        parsingSuspended = true
        flush()
    }

    private func responseDone(_ exchange: Exchange) {
        exchange.responseDone = true
        recordFinished(exchange)
        if !exchange.keepAlive || noMoreRequests {
            closeAfterWrite = true
            parsingSuspended = true
        }
        if exchange.requestBodyDone || closeAfterWrite {
            finish(exchange)
        }
        flush()
    }

    private func recordFinished(_ exchange: Exchange) {
        guard !exchange.recorded else { return }
        exchange.recorded = true
        exchange.releaseReplay()
        ctx.metrics.requestFinished(status: exchange.status, bytesIn: exchange.bodyBytesSeen, bytesOut: exchange.bytesOut)
        if ctx.configuration.log.accessLog {
            let ms = Int(((ctx.loop.now - exchange.startedAt) * 1000).rounded())
            ctx.logger.info("\(exchange.head.method) \(exchange.logPath) \(exchange.status) \(ms)ms \(exchange.bytesOut)B")
        }
    }

    /// Both halves of the exchange are over: go on with the next pipelined request.
    private func finish(_ exchange: Exchange) {
        guard self.exchange === exchange else { return }
        exchange.connection = nil
        self.exchange = nil
        if closeAfterWrite { return }
        parsingSuspended = false
        lastClientByte = ctx.loop.now
        if noMoreRequests {
            closeAfterWrite = true
            return
        }
        ctx.loop.schedule(task: self)  // runLoopTask: process() on the next turn
    }

    // MARK: writing and closing

    private func flush() {
        while outStart < outBuf.count {
            let result = outBuf.withUnsafeBytes { raw in Syscall.write(fd, UnsafeRawBufferPointer(rebasing: raw[outStart...])) }
            switch result {
            case .done(let n):
                outStart += n
            case .wouldBlock:
                updateInterest()
                return
            case .closed:
                close()
                return
            }
        }
        outBuf.removeAll(keepingCapacity: outBuf.capacity <= 2 * Connection.outHighWater)
        outStart = 0
        if closeAfterWrite {
            if peerHalfClosed {
                close()
            } else {
                startLingering()
            }
            return
        }
        updateInterest()
    }

    private func updateInterest() {
        guard !closed, !lingering else { return }
        var wanted: Interest = []
        if !closeAfterWrite && inBuf.count - inStart < Connection.inHighWater && !peerHalfClosed {
            wanted.insert(.read)
        }
        if pendingOut > 0 { wanted.insert(.write) }
        if wanted != interest {
            interest = wanted
            ctx.loop.modify(fd, wanted)
        }
    }

    /// Closing with unread client bytes makes the kernel send a reset that can destroy the answer
    /// still in flight (a 413 or 400 the client never reads). So: stop sending, read and drop what
    /// the client still sends for a moment, then close (nginx's lingering close).
    private var lingering = false

    private func startLingering() {
        guard !lingering else { return }
        lingering = true
        Syscall.shutdownWrite(fd)
        interest = .read
        ctx.loop.modify(fd, .read)
        ctx.loop.schedule(after: 2) { [weak self] in self?.close() }
        discardInput()
    }

    private func discardInput() {
        while !closed {
            switch Syscall.read(fd, ctx.readBuffer) {
            case .done: continue
            case .wouldBlock: return
            case .closed:
                close()
                return
            }
        }
    }

    func close() {
        guard !closed else { return }
        closed = true
        if let exchange {
            exchange.transfer?.cancel()
            exchange.transfer = nil
            exchange.waitingForToken = false
            exchange.connection = nil
            if exchange.responseStarted && !exchange.responseDone { exchange.status = exchange.status == 0 ? 499 : exchange.status }
            exchange.releaseReplay()
        }
        exchange = nil
        ctx.loop.unregister(fd, self)
        Syscall.close(fd)
        ctx.connections[fd] = nil
        ctx.shared.openConnections.subtract(1, ordering: .relaxed)
    }

    // MARK: timeouts and drain

    func checkTimeouts(now: Double) {
        guard !closed, !lingering else { return }
        let limits = ctx.configuration.limits
        if let exchange {
            // The upstream head timeout lives here, not in a loop timer per request.
            if let transfer = exchange.transfer, transfer.checkHeadTimeout(now: now) { return }
            // Silence counts only while we are reading: not while the body waits for the upstream to take it.
            let readingClient = !exchange.requestBodyDone && exchange.pendingBodyCount < Connection.bodyHighWater
            if readingClient && !exchange.responseStarted && !exchange.waitingForToken
                && now - lastClientByte > limits.clientIdleTimeout
            {
                fail(.requestTimeout, exchange: exchange)
            } else if readingClient && exchange.responseStarted && now - lastClientByte > limits.clientIdleTimeout {
                close()
            } else if let transfer = exchange.transfer, transfer.headDelivered, !transfer.isReceivePaused,
                now - exchange.lastUpstreamByte > limits.upstreamIdleTimeout
            {
                ctx.logger.warning("upstream went silent mid-body for \(Int(limits.upstreamIdleTimeout))s: closing")
                close()
            }
            return
        }
        if let started = headStartedAt, now - started > limits.clientHeaderTimeout {
            fail(.requestTimeout, exchange: nil)
        } else if headStartedAt != nil && now - lastClientByte > limits.clientIdleTimeout {
            fail(.requestTimeout, exchange: nil)
        } else if headStartedAt == nil && now - lastClientByte > limits.clientIdleTimeout {
            close()  // idle keep-alive connection
        }
    }

    /// Drain: idle connections close now; busy ones close after their current answer.
    func beginDrain() {
        if exchange == nil && parser.isIdle && inStart == inBuf.count {
            close()
        } else {
            exchange?.keepAlive = false
        }
    }
}

private func wallClock() -> Double {
    var ts = timespec()
    clock_gettime(CLOCK_REALTIME, &ts)
    return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
}

extension Substring {
    fileprivate func trimmingSpaces() -> String {
        var s = self
        while s.first == " " || s.first == "\t" { s = s.dropFirst() }
        while s.last == " " || s.last == "\t" { s = s.dropLast() }
        return String(s)
    }
}
