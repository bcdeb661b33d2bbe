import Config
import Logging
import Sockets

/// Keeps the current access token in `sink.path` for tools that read a token file: replaced
/// atomically with mode 0600 whenever the token changes, removed when the session ends. Runs on the
/// token thread only.
public final class SinkWriter {
    public let path: String
    private let logger: Logger
    private var writtenToken: String?
    private var lastError: String?

    public init(_ configuration: SinkConfiguration, logger: Logger) {
        self.path = configuration.path
        self.logger = logger
    }

    /// Writes `token` unless it is what the file already holds; nil removes the file.
    public func update(token: String?) {
        guard token != writtenToken || lastError != nil else { return }
        do {
            if let token {
                try AtomicFile.ensureFolder(AtomicFile.parentFolder(of: path))
                try AtomicFile.write(Array(token.utf8) + [0x0A], to: path)
            } else {
                try AtomicFile.remove(path)
            }
            writtenToken = token
            if lastError != nil { logger.info("token sink \(path) written again") }
            lastError = nil
        } catch {
            let message = String(describing: error)
            if message != lastError { logger.warning("token sink \(path) not written: \(message)") }
            lastError = message
        }
    }
}
