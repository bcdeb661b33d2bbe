import Foundation

/// Where things are, found from this file's own path (`Tests/TestSupport/Paths.swift`).
public enum RepositoryPaths {
    /// The repository's root folder.
    public static let root: URL = {
        URL(fileURLWithPath: #filePath)
            .deletingLastPathComponent()  // TestSupport
            .deletingLastPathComponent()  // Tests
            .deletingLastPathComponent()
    }()

    /// `Tests/servers`, home of the Python test servers.
    public static var servers: URL { root.appendingPathComponent("Tests/servers") }

    /// The tokenproxy binary under test: `$TOKENPROXY_BIN`, else `.build/debug/tokenproxy`.
    public static var tokenproxyBinary: URL {
        if let path = ProcessInfo.processInfo.environment["TOKENPROXY_BIN"], !path.isEmpty {
            return URL(fileURLWithPath: path, relativeTo: root).standardizedFileURL
        }
        return root.appendingPathComponent(".build/debug/tokenproxy")
    }
}
