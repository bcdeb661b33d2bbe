import Config
import Logging
import Sockets

/// What the server made of a connection an `Acceptor` took.
enum Admission {
    /// A handler now owns the descriptor (and has registered it with the loop).
    case served
    /// Turned away with this answer (503 `overloaded`), sent with a lingering close.
    case refused(answer: [UInt8])
    /// Nothing could be done with it: the acceptor closes it.
    case dropped
}

/// Accepts connections on one listening socket for one loop.
///
/// Touched only on its loop's thread (or before that thread starts). `@unchecked Sendable` only so
/// that `Server` can hand it to its loop through `EventLoop.execute`, which runs the task on that
/// thread; no other thread ever calls it.
final class Acceptor: EventHandler, @unchecked Sendable {
    let listener: ListeningSocket
    let interest: Interest
    unowned let ctx: LoopContext
    let admit: (Int32, SocketAddress) -> Admission
    private var state = State.idle
    /// Failed accepts (EMFILE and the like) since the backlog was last caught up with: the first is
    /// logged, the rest are counted and reported in one line once nothing waits any more. (One that
    /// works in between ends nothing: while descriptors are short, the next one fails again.)
    private var failures = 0
    private var failingSince = 0.0
    private var lastFailure: SocketError?
    /// Refused connections of this acceptor still lingering.
    private var lingering = 0

    private enum State { case idle, watching, paused, stopped }

    static let pauseAfterFailure = FixedLimits.pauseAfterAcceptFailure

    init(listener: ListeningSocket, interest: Interest, ctx: LoopContext, admit: @escaping (Int32, SocketAddress) -> Admission) {
        self.listener = listener
        self.interest = interest
        self.ctx = ctx
        self.admit = admit
    }

    /// Starts watching the listener; throws when epoll refuses it.
    func watch() throws {
        try ctx.loop.register(listener.fd, interest, self)
        state = .watching
    }

    /// Stops accepting for good (drain). The listener itself is closed by the server once no loop
    /// watches it any more.
    func stop() {
        if state == .watching { ctx.loop.unregister(listener.fd, self) }
        state = .stopped
    }

    func handleEvents(_ events: UInt32) {
        guard state == .watching else { return }
        // A bounded batch per wake-up keeps one busy listener from starving the loop's connections.
        for _ in 0..<64 {
            switch listener.accept() {
            case .none:
                if failures > 0 { recovered() }
                return
            case .failed(let error):
                failed(error)
                return
            case .connection(let fd, let peer):
                switch admit(fd, peer) {
                case .served: break
                case .refused(let answer): refuse(fd, answer: answer)
                case .dropped: Syscall.close(fd)
                }
            }
        }
    }

    // MARK: failed accepts

    private func failed(_ error: SocketError) {
        if failures == 0 {
            failingSince = ctx.loop.now
            ctx.logger.error(
                "cannot accept on \(listener.address): \(error); accepting pauses for \(Int(Acceptor.pauseAfterFailure * 1000)) ms at a time until it works again (not logged again until then)"
            )
        }
        failures += 1
        lastFailure = error
        pause()
    }

    /// An EPOLLEXCLUSIVE registration cannot be modified (epoll_ctl(2)), so a pause unregisters the
    /// listener and registers it again afterwards.
    private func pause() {
        if state == .watching { ctx.loop.unregister(listener.fd, self) }
        state = .paused
        ctx.loop.schedule(after: Acceptor.pauseAfterFailure) { [weak self] in self?.resume() }
    }

    private func resume() {
        guard state == .paused else { return }
        do {
            try watch()
        } catch let error as SocketError {
            failures += 1
            lastFailure = error
            pause()
        } catch {
            pause()
        }
    }

    private func recovered() {
        let seconds = ((ctx.loop.now - failingSince) * 10).rounded() / 10
        let last = lastFailure.map { "\($0)" } ?? "unknown"
        ctx.logger.info("accepting again on \(listener.address) after \(failures) failed attempt(s) over \(seconds) s (last: \(last))")
        failures = 0
        lastFailure = nil
    }

    // MARK: refused connections

    static let maxLingering = FixedLimits.maxLingeringRefused

    private func refuse(_ fd: Int32, answer: [UInt8]) {
        guard lingering < Acceptor.maxLingering else {
            answer.withUnsafeBytes { _ = Syscall.write(fd, $0) }
            Syscall.close(fd)
            return
        }
        lingering += 1
        RefusedConnection.start(fd: fd, answer: answer, loop: ctx.loop) { [weak self] in self?.lingering -= 1 }
    }
}

/// A connection turned away with an answer of the proxy's own (503 `overloaded`).
///
/// Closing at once would make the kernel reset the connection as soon as request bytes are unread
/// or still arriving, and a reset can destroy the answer at the client before it is read (RFC 9112
/// §9.6). So this is a lingering close: the answer, a half-close, then everything the client sends
/// is read and dropped until it closes its side too, or `lingerSeconds` pass.
final class RefusedConnection: EventHandler {
    static let lingerSeconds = FixedLimits.lingerSeconds
    private let fd: Int32
    private let loop: EventLoop
    private let done: () -> Void
    private var timer: TimerID?
    private var closed = false

    private init(fd: Int32, loop: EventLoop, done: @escaping () -> Void) {
        self.fd = fd
        self.loop = loop
        self.done = done
    }

    static func start(fd: Int32, answer: [UInt8], loop: EventLoop, done: @escaping () -> Void) {
        let connection = RefusedConnection(fd: fd, loop: loop, done: done)
        answer.withUnsafeBytes { _ = Syscall.write(fd, $0) }
        Syscall.shutdownWrite(fd)
        do {
            try loop.register(fd, .read, connection)
        } catch {
            connection.close()
            return
        }
        connection.timer = loop.schedule(after: lingerSeconds) { [weak connection] in connection?.close() }
        // Whatever already arrived is read now; later bytes wake the loop.
        connection.handleEvents(ReadyEvents.readable)
    }

    func handleEvents(_ events: UInt32) {
        guard !closed else { return }
        var scratch = [UInt8](repeating: 0, count: 4096)
        while true {
            let result = scratch.withUnsafeMutableBytes { Syscall.read(fd, $0) }
            switch result {
            case .done: continue
            case .wouldBlock:
                if events & ReadyEvents.failed != 0 { close() }
                return
            case .closed:
                close()
                return
            }
        }
    }

    private func close() {
        guard !closed else { return }
        closed = true
        if let timer { loop.cancel(timer) }
        loop.unregister(fd, self)
        Syscall.close(fd)
        done()
    }
}
