import Foundation

/// A fresh folder under the system's temporary directory, removed on `remove()` or deinit.
public final class TempDir: Sendable {
    public let url: URL
    public var path: String { url.path }

    public init(prefix: String = "tokenproxy-test") throws {
        let base = URL(fileURLWithPath: NSTemporaryDirectory())
        var candidate: URL
        repeat {
            candidate = base.appendingPathComponent("\(prefix)-\(UUID().uuidString.prefix(8).lowercased())")
        } while FileManager.default.fileExists(atPath: candidate.path)
        try FileManager.default.createDirectory(at: candidate, withIntermediateDirectories: true)
        self.url = candidate
    }

    /// Writes `contents` to `name` inside the folder and returns its full path.
    @discardableResult
    public func write(_ name: String, _ contents: String, mode: Int? = nil) throws -> String {
        try write(name, Data(contents.utf8), mode: mode)
    }

    @discardableResult
    public func write(_ name: String, _ contents: Data, mode: Int? = nil) throws -> String {
        let file = url.appendingPathComponent(name)
        try FileManager.default.createDirectory(at: file.deletingLastPathComponent(), withIntermediateDirectories: true)
        try contents.write(to: file)
        if let mode {
            try FileManager.default.setAttributes([.posixPermissions: mode], ofItemAtPath: file.path)
        }
        return file.path
    }

    public func file(_ name: String) -> String { url.appendingPathComponent(name).path }

    public func remove() {
        try? FileManager.default.removeItem(at: url)
    }

    deinit { remove() }
}

/// Hands the file to `nobody` (uid 65534) when the tests run as root, so that a group read bit is
/// judged as on a key a service user owns: a key root owns may be group-readable (CONTRACT.md "HTTPS
/// for clients"). Run as another user, the file is the runner's own already.
public func giveToNonRootOwner(_ path: String) throws {
    guard geteuid() == 0 else { return }
    guard chown(path, 65534, 65534) == 0 else { throw HarnessError("chown \(path) to 65534 failed: errno \(errno)") }
}
