import Sockets

/// Accepts connections on one listening socket for one loop.
final class Acceptor: EventHandler {
    let listener: ListeningSocket
    unowned let ctx: LoopContext
    let makeHandler: (Int32, SocketAddress) -> EventHandler?
    private var pausedUntil = 0.0

    init(listener: ListeningSocket, ctx: LoopContext, makeHandler: @escaping (Int32, SocketAddress) -> EventHandler?) {
        self.listener = listener
        self.ctx = ctx
        self.makeHandler = makeHandler
    }

    func handleEvents(_ events: UInt32) {
        // A bounded batch per wake-up keeps one busy listener from starving the loop's connections.
        for _ in 0..<64 {
            switch listener.accept() {
            case .none:
                return
            case .failed(let error):
                // Out of descriptors (EMFILE) and the like: stop accepting for a moment instead of spinning.
                ctx.logger.error("accept failed: \(error); pausing accepts for 100ms")
                ctx.loop.modify(listener.fd, [])
                ctx.loop.schedule(after: 0.1) { [weak self] in
                    guard let self else { return }
                    self.ctx.loop.modify(self.listener.fd, .read)
                }
                return
            case .connection(let fd, let peer):
                if makeHandler(fd, peer) == nil { Syscall.close(fd) }
            }
        }
    }
}
