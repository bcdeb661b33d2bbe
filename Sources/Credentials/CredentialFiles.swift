import Config
import FoundationEssentials
import Logging
import Sockets

// Files named by `*_file` keys that the secretless credentials read at every token request
// (CONTRACT.md "Reload without a restart": read again when they change, the last good value kept).

/// A small file read again whenever it changed (identity, size or time: a Kubernetes `..data` swap
/// changes all three); a file that vanished or is empty keeps the last good content.
final class WatchedFile {
    let path: String
    let keyPath: String
    private var signature: FileSignature?
    private var content: String?

    init(_ path: String, keyPath: String) {
        self.path = path
        self.keyPath = keyPath
    }

    /// The file's text, trimmed of surrounding white space.
    func read() throws -> String {
        let now = FileSignature.of(path)
        if let content, now == signature { return content }
        let problem: String
        switch SmallFile.read(path, limit: 1 << 20) {
        case .success(let bytes):
            let text = String(decoding: bytes, as: UTF8.self).trimmingWhitespace()
            if !text.isEmpty {
                registerSecret(text)
                content = text
                signature = now
                return text
            }
            problem = "\(path) is empty"
        case .failure(let failure):
            problem = "cannot read \(path): \(failure.description)"
        }
        guard let content else { throw TokenSourceError.passing("\(keyPath): \(problem)") }
        // CONTRACT.md "Reload without a restart": the last good value stays, with a warning (once per change).
        if now != signature {
            signature = now
            Logger(label: "tokenproxy").warning("\(keyPath): \(problem); keeping the last good value")
        }
        return content
    }
}

/// A PEM key file parsed again when it changed; a change that does not parse keeps the last good key.
final class KeyFile {
    let path: String
    let algorithm: SigningAlgorithm?
    let keyID: String?
    let keyPath: String
    private var signature: FileSignature?
    private var key: SigningKey

    init(_ path: String, algorithm: SigningAlgorithm?, keyID: String?, keyPath: String) throws {
        self.path = path
        self.algorithm = algorithm
        self.keyID = keyID
        self.keyPath = keyPath
        signature = FileSignature.of(path)
        key = try SigningKey.file(path, algorithm: algorithm, keyID: keyID, keyPath: keyPath)
    }

    /// The key, parsed again once per change of the file. A change that is no usable key (a file
    /// that vanished, is empty or holds something else) keeps the last good key with one warning,
    /// and is not parsed again until the file changes once more (CONTRACT.md "Reload without a
    /// restart").
    func current() throws -> SigningKey {
        let now = FileSignature.of(path)
        guard now != signature else { return key }
        signature = now
        do {
            guard now != nil else { throw TokenSourceError.configuration("\(path) is gone") }
            key = try SigningKey.file(path, algorithm: algorithm, keyID: keyID, keyPath: keyPath)
        } catch {
            Logger(label: "tokenproxy").warning("\(keyPath): \(Self.reason(error)); keeping the last good value")
        }
        return key
    }

    private static func reason(_ error: Error) -> String {
        switch error {
        case let error as ConfigurationError: return error.reason
        case let error as TokenSourceError: return error.reason
        default: return "\(error)"
        }
    }
}
