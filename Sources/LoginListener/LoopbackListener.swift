import Basics
import Config
import Credentials
import HTTP1
import Sockets

/// The one-shot listener of a browser login (RFC 8252 §7.3): binds the redirect URI's loopback
/// address, answers requests until one carries this login's `state`, and hands that one back. It runs
/// its own event loop on the calling thread; every decision is `CallbackRules`'s.
///
/// - Connections are served side by side, each with `headLimit` seconds for its request head, so an
///   idle connection (a browser's preconnect) blocks nothing.
/// - `localhost` is bound on 127.0.0.1 and ::1 with the same port (RFC 8252 §8.3: another local
///   user must not take the other family); every socket is close-on-exec (`ListeningSocket`).
/// - With `--no-browser`, lines pasted on standard input are decided like requests.
///
/// The browser login (Credentials) sees it as a `RedirectListener`; the command line hands
/// `LoopbackListener.bind` in (docs/ARCHITECTURE.md "Modules": Credentials does not depend on HTTP1).
public final class LoopbackListener: RedirectListener {
    /// The redirect URI as sent, with the bound port.
    public let redirectURI: String
    private var sockets: [ListeningSocket]

    static let headLimit: Double = 10

    typealias Outcome = RedirectOutcome

    private init(redirectURI: String, sockets: [ListeningSocket]) {
        self.redirectURI = redirectURI
        self.sockets = sockets
    }

    deinit { close() }

    public func close() {
        for socket in sockets { socket.close() }
        sockets = []
    }

    /// Binds what `redirect` names; a port taken (on either family for `localhost`) is an error
    /// naming it, before any browser is opened.
    public static func bind(_ redirect: LoopbackRedirect) throws -> any RedirectListener {
        func failure(_ host: String, _ port: Int, _ error: SocketError) -> TokenSourceError {
            .refused("cannot listen on \(Authority(host: host, port: port)) for the redirect \(redirect.text): \(error)")
        }
        switch redirect.host {
        case .ipv4, .ipv6:
            let host = redirect.host.rawValue
            do {
                let socket = try ListeningSocket.tcp(host: host, port: redirect.port ?? 0, reusePort: false, backlog: 16)
                return LoopbackListener(redirectURI: redirect.uri(port: socket.address.port ?? 0), sockets: [socket])
            } catch let error as SocketError {
                throw failure(host, redirect.port ?? 0, error)
            }
        case .localhost:
            // Without a port: one free on both families, found by binding 127.0.0.1 first.
            for _ in 0..<(redirect.port == nil ? 20 : 1) {
                let v4: ListeningSocket
                do {
                    v4 = try ListeningSocket.tcp(host: "127.0.0.1", port: redirect.port ?? 0, reusePort: false, backlog: 16)
                } catch let error as SocketError {
                    throw failure("127.0.0.1", redirect.port ?? 0, error)
                }
                let port = v4.address.port ?? 0
                do {
                    let v6 = try ListeningSocket.tcp(host: "::1", port: port, reusePort: false, backlog: 16)
                    return LoopbackListener(redirectURI: redirect.uri(port: port), sockets: [v4, v6])
                } catch let error as SocketError where error.errno == SocketErrno.addressNotAvailable || error.errno == SocketErrno.familyUnsupported {
                    // No IPv6 loopback on this machine: no one can take that family either.
                    return LoopbackListener(redirectURI: redirect.uri(port: port), sockets: [v4])
                } catch let error as SocketError {
                    v4.close()
                    if redirect.port != nil || error.errno != SocketErrno.addressInUse { throw failure("::1", port, error) }
                }
            }
            throw TokenSourceError.refused("cannot find a port free on both 127.0.0.1 and ::1 for the redirect \(redirect.text)")
        }
    }

    /// Waits for the request (or paste) that ends the login, at most `timeout` seconds.
    public func wait(rules: CallbackRules, timeout: Double, pasteFD: Int32?, say: @escaping (String) -> Void) throws -> RedirectOutcome {
        let loop: EventLoop
        do {
            loop = try EventLoop(index: 0)
        } catch {
            throw TokenSourceError.passing("cannot start the login's listener: \(error)")
        }
        let run = ListenerRun(loop: loop, rules: rules, say: say)
        for socket in sockets {
            let acceptor = Acceptor(socket: socket, run: run)
            do {
                try loop.register(socket.fd, .accept, acceptor)
            } catch {
                throw TokenSourceError.passing("cannot start the login's listener: \(error)")
            }
            run.acceptors.append(acceptor)
        }
        if let pasteFD {
            let paste = PasteReader(fd: pasteFD, run: run)
            do {
                try loop.register(pasteFD, .read, paste)
                run.paste = paste
            } catch {
                // A regular file cannot be watched (epoll_ctl: EPERM): it is all there, read it now.
                paste.readAll()
            }
        }
        loop.schedule(after: timeout) { run.finish(.timedOut) }
        if run.outcome == nil { loop.run() }
        run.closeAll()
        close()
        return run.outcome ?? .timedOut
    }
}

/// The socket of the request that ended the wait: it gets the page that says how the login went.
final class CallbackReply: RedirectReply {
    private var fd: Int32?

    init(fd: Int32) { self.fd = fd }

    deinit { close() }

    func send(status: Int, reason: String, title: String, message: String) {
        guard let fd else { return }
        let bytes = LoginPage.response(status: status, reason: reason, title: title, message: message)
        CallbackConnection.writeAll(fd, bytes)
        close()
    }

    func close() {
        if let fd { Syscall.close(fd) }
        fd = nil
    }
}

/// The state of one wait, shared by its handlers (all on the loop's thread).
private final class ListenerRun {
    let loop: EventLoop
    let rules: CallbackRules
    let say: (String) -> Void
    var acceptors: [Acceptor] = []
    var connections: [Int32: CallbackConnection] = [:]
    var paste: PasteReader?
    var outcome: LoopbackListener.Outcome?

    init(loop: EventLoop, rules: CallbackRules, say: @escaping (String) -> Void) {
        self.loop = loop
        self.rules = rules
        self.say = say
    }

    /// The first ending wins; later ones in the same turn of the loop change nothing.
    func finish(_ outcome: LoopbackListener.Outcome) {
        guard self.outcome == nil else { return }
        self.outcome = outcome
        loop.stop()
    }

    func closeAll() {
        for acceptor in acceptors { loop.unregister(acceptor.socket.fd, acceptor) }
        for connection in connections.values { connection.close() }
        connections = [:]
        if let paste { loop.unregister(paste.fd, paste) }
    }
}

private final class Acceptor: EventHandler {
    let socket: ListeningSocket
    unowned let run: ListenerRun

    init(socket: ListeningSocket, run: ListenerRun) {
        self.socket = socket
        self.run = run
    }

    func handleEvents(_ events: UInt32) {
        while run.outcome == nil {
            switch socket.accept() {
            case .connection(let fd, _):
                let connection = CallbackConnection(fd: fd, run: run)
                do {
                    try run.loop.register(fd, .read, connection)
                } catch {
                    Syscall.close(fd)
                    continue
                }
                run.connections[fd] = connection
                connection.timer = run.loop.schedule(after: LoopbackListener.headLimit) { [weak connection] in connection?.close() }
            case .none:
                return
            case .failed:
                // Out of descriptors (EMFILE, ENFILE) the connection stays in the backlog and the
                // socket stays readable: retrying at once would spin a core. Pause as the proxy's
                // own acceptor does, then watch again.
                pause()
                return
            }
        }
    }

    private var paused = false

    private func pause() {
        guard !paused else { return }
        paused = true
        run.loop.unregister(socket.fd, self)
        run.loop.schedule(after: FixedLimits.pauseAfterAcceptFailure) { [weak self] in self?.resume() }
    }

    private func resume() {
        guard paused, run.outcome == nil else { return }
        paused = false
        do {
            try run.loop.register(socket.fd, .accept, self)
        } catch {
            pause()
        }
    }
}

/// One connection to the listener: its request head, decided, answered, closed.
private final class CallbackConnection: EventHandler {
    let fd: Int32
    unowned let run: ListenerRun
    var timer: TimerID?
    private var parser = RequestParser(limits: ParserLimits(maxHeaderBytes: 16 << 10, maxBodyBytes: 0))
    private var open = true

    init(fd: Int32, run: ListenerRun) {
        self.fd = fd
        self.run = run
    }

    func handleEvents(_ events: UInt32) {
        var buffer = [UInt8](repeating: 0, count: 4096)
        while open, run.outcome == nil {
            let result = buffer.withUnsafeMutableBytes { Syscall.read(fd, $0) }
            switch result {
            case .done(let count):
                if feed(buffer[0..<count]) { return }
            case .wouldBlock:
                return
            case .closed:
                close()
                return
            }
        }
    }

    /// True when the connection is done with.
    private func feed(_ bytes: ArraySlice<UInt8>) -> Bool {
        var offset = bytes.startIndex
        while offset < bytes.endIndex {
            let (consumed, event) = bytes[offset...].withUnsafeBytes { parser.parse($0) }
            offset += consumed
            switch event {
            case .head(let head)?:
                answer(run.rules.decide(method: head.method, target: head.target))
                return true
            case .error?:
                respond(400, "Bad Request", "Bad request", "This is tokenproxy's login listener; the request could not be read.")
                return true
            case .body?, .end?, nil:
                if consumed == 0 { return false }
            }
        }
        return false
    }

    private func answer(_ decision: CallbackDecision) {
        switch decision {
        case .notFound:
            respond(404, "Not Found", "Not found", "This is tokenproxy's login listener; it answers on the redirect path only.")
        case .methodNotAllowed:
            respond(405, "Method Not Allowed", "Method not allowed", "The redirect takes GET only.", extraHeaders: ["Allow: GET"])
        case .badRequest(let why):
            run.say("login: a request to the redirect address was refused (\(why)); still waiting")
            respond(400, "Bad Request", "Bad request", "This request does not belong to the login in progress (\(why)).")
        case .code(let code):
            hand { .code(code, reply: $0) }
        case .denied(let error, let description):
            hand { .denied(error: error, description: description, reply: $0) }
        }
    }

    /// The connection leaves the loop, still open, with the outcome.
    private func hand(_ outcome: (CallbackReply) -> LoopbackListener.Outcome) {
        detach()
        open = false
        run.finish(outcome(CallbackReply(fd: fd)))
    }

    private func respond(_ status: Int, _ reason: String, _ title: String, _ message: String, extraHeaders: [String] = []) {
        let bytes = LoginPage.response(status: status, reason: reason, title: title, message: message, extraHeaders: extraHeaders)
        Self.writeAll(fd, bytes)
        close()
    }

    private func detach() {
        if let timer { run.loop.cancel(timer) }
        timer = nil
        run.loop.unregister(fd, self)
        run.connections[fd] = nil
    }

    func close() {
        guard open else { return }
        open = false
        detach()
        Syscall.close(fd)
    }

    /// Small pages on a non-blocking socket: waits for room, at most a few seconds in all.
    static func writeAll(_ fd: Int32, _ bytes: [UInt8]) {
        var sent = 0
        var waits = 0
        while sent < bytes.count, waits < 50 {
            let result = bytes[sent...].withUnsafeBytes { Syscall.write(fd, $0) }
            switch result {
            case .done(let count):
                sent += count
            case .wouldBlock:
                waits += 1
                _ = try? Syscall.waitWritable(fd, milliseconds: 100)
            case .closed:
                return
            }
        }
    }
}

/// `--no-browser`: lines on standard input, each the address the browser was sent to or its query.
private final class PasteReader: EventHandler {
    let fd: Int32
    unowned let run: ListenerRun
    private var pending: [UInt8] = []

    init(fd: Int32, run: ListenerRun) {
        self.fd = fd
        self.run = run
    }

    func handleEvents(_ events: UInt32) {
        var buffer = [UInt8](repeating: 0, count: 8192)
        switch buffer.withUnsafeMutableBytes({ Syscall.read(fd, $0) }) {
        case .done(let count):
            pending += buffer[0..<count]
            lines(final: false)
        case .wouldBlock:
            return
        case .closed:
            // The end of stdin (or a failure) leaves the listener waiting.
            run.loop.unregister(fd, self)
            lines(final: true)
        }
    }

    /// A file: everything at once.
    func readAll() {
        var buffer = [UInt8](repeating: 0, count: 8192)
        while pending.count < 1 << 20 {
            guard case .done(let count) = buffer.withUnsafeMutableBytes({ Syscall.read(fd, $0) }) else { break }
            pending += buffer[0..<count]
        }
        lines(final: true)
    }

    private func lines(final: Bool) {
        while run.outcome == nil, let newline = pending.firstIndex(of: 0x0A) {
            let line = pending[..<newline]
            pending.removeSubrange(...newline)
            decide(String(decoding: line, as: UTF8.self))
        }
        if final, run.outcome == nil, !pending.isEmpty {
            let line = pending
            pending = []
            decide(String(decoding: line, as: UTF8.self))
        }
        if pending.count > 64 << 10 { pending = [] }
    }

    private func decide(_ line: String) {
        guard !line.allSatisfy({ $0.isWhitespace }) else { return }
        switch run.rules.decidePaste(line) {
        case nil:
            run.say("login: that is not the redirect address (\(run.rules.path)); paste the whole address the browser was sent to")
        case .badRequest(let why)?:
            run.say("login: the pasted address is ignored (\(why)); still waiting")
        case .code(let code)?:
            run.finish(.code(code, reply: nil))
        case .denied(let error, let description)?:
            run.finish(.denied(error: error, description: description, reply: nil))
        case .notFound?, .methodNotAllowed?:
            run.say("login: that is not the redirect address; still waiting")
        }
    }
}
