import Config
import Sockets

/// `type: file`: the token is the content of `credentials.path`, trimmed of spaces and newlines. The
/// file is stat'ed about once a second on the token thread and re-read when its identity, size or
/// modification time changes; a 401 re-reads it too. A vanished or empty file keeps the last good
/// token (the manager keeps serving it and logs the reason once per change).
final class FileTokenSource: TokenSource {
    let kind = "file"
    let defaultLifetime: Double? = nil
    let pollInterval: Double? = 1
    let path: String
    /// Past this size the file is no token file.
    static let sizeLimit = 64 << 10

    private var lastSignature: FileSignature?

    init(_ configuration: FileTokenConfiguration) throws {
        let path = configuration.path
        guard !path.isEmpty else {
            throw ConfigurationError(keyPath: "credentials.path", reason: "a file source needs path")
        }
        self.path = path
        self.lastSignature = FileSignature.of(path)
    }

    func inputChanged() -> Bool {
        let signature = FileSignature.of(path)
        guard signature != lastSignature else { return false }
        lastSignature = signature
        return true
    }

    func fetch(current: TokenSnapshot?) throws -> IssuedToken {
        let bytes: [UInt8]
        switch SmallFile.read(path, limit: Self.sizeLimit) {
        case .success(let content):
            bytes = content
        case .failure(let error):
            throw TokenSourceError.passing("credentials file \(path): \(error.description); keeping the last good token")
        }
        let token = String(decoding: bytes, as: UTF8.self).trimmingWhitespace()
        if token.isEmpty {
            throw TokenSourceError.passing("credentials file \(path) is empty; keeping the last good token")
        }
        guard BearerToken.isUsable(token) else {
            throw TokenSourceError.passing(
                "credentials file \(path) does not hold a usable token (spaces or control characters); keeping the last good token"
            )
        }
        return IssuedToken(accessToken: token)
    }
}
