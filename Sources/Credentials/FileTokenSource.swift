import Config
import Glibc

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

    init(_ credentials: CredentialsConfiguration) throws {
        guard let path = credentials.path, !path.isEmpty else {
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
        switch FileReader.read(path, limit: Self.sizeLimit) {
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

/// What tells a rewritten file from an untouched one without reading it.
struct FileSignature: Equatable {
    var device: UInt64
    var inode: UInt64
    var size: Int64
    var modifiedSeconds: Int
    var modifiedNanoseconds: Int
    var changedSeconds: Int
    var changedNanoseconds: Int

    /// nil when the file cannot be stat'ed (missing, no permission).
    static func of(_ path: String) -> FileSignature? {
        var info = stat()
        guard stat(path, &info) == 0 else { return nil }
        return FileSignature(
            device: UInt64(info.st_dev),
            inode: UInt64(info.st_ino),
            size: Int64(info.st_size),
            modifiedSeconds: Int(info.st_mtim.tv_sec),
            modifiedNanoseconds: Int(info.st_mtim.tv_nsec),
            changedSeconds: Int(info.st_ctim.tv_sec),
            changedNanoseconds: Int(info.st_ctim.tv_nsec)
        )
    }
}

/// Reads small files whole with plain syscalls.
enum FileReader {
    struct Failure: Error, CustomStringConvertible {
        var description: String
        /// The errno of a failed call; nil when the file was too large.
        var code: Int32?
    }

    static func read(_ path: String, limit: Int) -> Result<[UInt8], Failure> {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return .failure(Failure(description: errnoText(errno), code: errno)) }
        defer { close(fd) }
        var content: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = buffer.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
            if count < 0 {
                if errno == EINTR { continue }
                return .failure(Failure(description: errnoText(errno), code: errno))
            }
            if count == 0 { break }
            content.append(contentsOf: buffer[0..<count])
            if content.count > limit { return .failure(Failure(description: "larger than \(limit / 1024) KiB", code: nil)) }
        }
        return .success(content)
    }
}

/// `strerror` as a Swift string, for messages.
func errnoText(_ code: Int32) -> String {
    guard let text = strerror(code) else { return "errno \(code)" }
    return String(cString: text)
}
