import Config

/// The decisions of a reload (CONTRACT.md "Reload without a restart", docs/ROUTES.md "Reload"),
/// without files, threads or a server: `Reloader` performs them.
enum ReloadRules {
    /// The keys whose sockets and threads are made once: a reload keeps their old values (CONTRACT:
    /// they wait for a restart). Returns `new` with them restored, and the keys that changed.
    static func keepingRestartOnly(_ new: Configuration, old: Configuration) -> (configuration: Configuration, waiting: [String]) {
        var kept = new
        var waiting: [String] = []
        if new.workers != old.workers {
            kept.workers = old.workers
            waiting.append("workers")
        }
        if new.admin != old.admin {
            kept.admin = old.admin
            waiting.append("admin")
        }
        return (kept, waiting)
    }

    /// A refused file's errors, one line each (`key: reason`): logged, and `POST /reload`'s `errors`.
    static func errorLines(_ error: ConfigurationError) -> [String] {
        error.all.map { $0.keyPath.isEmpty ? $0.reason : "\($0.keyPath): \($0.reason)" }
    }
}

/// What the file watcher compares once a second: the configuration file (with `watch_config`) and
/// every `*_file` of the configuration in effect, by a signature of each (`FileSignature`: `stat`,
/// which follows symlinks, so a Kubernetes volume that swaps its `..data` link is a change). Generic
/// over the signature so that its decisions are tested without files.
struct FileWatch<Signature: Equatable & Sendable>: Sendable {
    enum Change: Equatable, Sendable {
        case none
        /// The configuration file changed: reload it.
        case configuration
        /// Only `*_file`s changed: the configuration in effect, its files read again.
        case files
    }

    let watchesConfiguration: Bool
    /// The configuration file's signature when it was last read.
    private(set) var configuration: Signature?
    /// The signature of each `*_file` when it was last read; nil: it could not be seen then.
    private(set) var files: [String: Signature?]

    init(watchesConfiguration: Bool, configuration: Signature?, files: [String], signature: (String) -> Signature?) {
        self.watchesConfiguration = watchesConfiguration
        self.configuration = configuration
        self.files = Self.signatures(files, signature)
    }

    /// The configuration file is being read again (any reload, whoever asked).
    mutating func configurationRead(_ signature: Signature?) {
        configuration = signature
    }

    /// A new configuration is in effect: these are the files it read.
    mutating func filesRead(_ paths: [String], signature: (String) -> Signature?) {
        files = Self.signatures(paths, signature)
    }

    /// One look. A configuration file that cannot be seen now (being replaced) is no change; a
    /// changed one wins over changed `*_file`s (the reload reads those too). Changed files are
    /// taken as seen, so one change makes one reread, even when that reread is refused.
    mutating func look(configuration now: Signature?, signature: (String) -> Signature?) -> Change {
        let configurationChanged = watchesConfiguration && now.map { $0 != configuration } ?? false
        let filesChanged = files.contains { path, last in signature(path) != last }
        if filesChanged { files = Self.signatures(Array(files.keys), signature) }
        if configurationChanged { return .configuration }
        return filesChanged ? .files : .none
    }

    private static func signatures(_ paths: [String], _ signature: (String) -> Signature?) -> [String: Signature?] {
        var all: [String: Signature?] = [:]
        for path in paths { all[path] = signature(path) }
        return all
    }
}
