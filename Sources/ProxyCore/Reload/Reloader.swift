import Config
import Credentials
import Dispatch
import FoundationEssentials
import Logging
import Sockets
import Synchronization

/// Reads the configuration file again and puts it in effect (CONTRACT.md "Reload without a
/// restart", docs/ROUTES.md): SIGUSR2, `POST /reload` and `watch_config`; and reads every `*_file`
/// again when one changes, with the file's text in effect (not a newer file). An invalid file
/// changes nothing; routes whose credentials did not change keep their token managers. Its
/// decisions are `ReloadRules` and `FileWatch`.
public final class Reloader: Sendable {
    let path: String
    let server: Server
    let logger: Logger
    /// Hands the configuration's secrets to the log redactor, as at start-up, before anything logs.
    let registerSecrets: @Sendable (Configuration) -> Void

    /// What the file in effect was read from and what the watcher compares. The lock also
    /// serialises reloads (SIGUSR2, `POST /reload` and the watcher may ask together).
    private struct State: Sendable {
        /// The text and folder of the file in effect: what a `*_file` change is applied to.
        var text: String
        var folder: String
        var watch: FileWatch<FileSignature>
    }
    private let state: Mutex<State>

    public init(
        path: String, loaded: LoadedConfiguration, server: Server, logger: Logger,
        registerSecrets: @escaping @Sendable (Configuration) -> Void
    ) {
        self.path = path
        self.server = server
        self.logger = logger
        self.registerSecrets = registerSecrets
        let watch = FileWatch(
            watchesConfiguration: loaded.configuration.watchConfig, configuration: FileSignature.of(path),
            files: loaded.configuration.watchedFiles, signature: FileSignature.of)
        state = Mutex(State(text: loaded.sourceText, folder: loaded.sourceFolder, watch: watch))
    }

    /// SIGUSR2, POST /reload, watch_config: the configuration file, read again.
    public func reload() -> ReloadOutcome {
        state.withLock { state in
            state.watch.configurationRead(FileSignature.of(path))
            let outcome = apply(fromFile: true, &state)
            server.countReload(succeeded: { if case .success = outcome { return true } else { return false } }())
            return outcome
        }
    }

    /// A `*_file` changed: the configuration in effect with its files read again. A file that
    /// vanished or is empty keeps the last good value (nothing changes), with a warning.
    func rereadFiles() {
        state.withLock { state in _ = apply(fromFile: false, &state) }
    }

    private func apply(fromFile: Bool, _ state: inout State) -> ReloadOutcome {
        let loaded: LoadedConfiguration
        let environment = ProcessInfo.processInfo.environment
        do {
            if fromFile {
                loaded = try ConfigurationLoader.load(path: path, environment: environment)
            } else {
                var again = try ConfigurationLoader.parse(yaml: state.text, baseDirectory: state.folder, environment: environment)
                again.sourceText = state.text
                again.sourceFolder = state.folder
                loaded = again
            }
        } catch let error as ConfigurationError {
            let all = ReloadRules.errorLines(error)
            for line in all {
                if fromFile {
                    logger.error("reload refused: \(line)")
                } else {
                    logger.warning("\(line); keeping the last good value")
                }
            }
            return .failure(all)
        } catch {
            logger.error("reload refused: \(error)")
            return .failure(["\(error)"])
        }
        let old = server.configuration
        // The loops and the admin listener are made once (CONTRACT: they wait for a restart).
        let (new, waiting) = ReloadRules.keepingRestartOnly(loaded.configuration, old: old)
        for key in waiting { logger.warning("reload: \(key) changed; it takes effect after a restart") }
        registerSecrets(new)
        if fromFile { for warning in loaded.warnings { logger.warning("\(warning)") } }
        let plan: RouteStatePlan
        do {
            plan = try RouteStatePlan(new, previous: (old, server.routeStates)) { [logger] in try TokenManager(configuration: $0, logger: logger) }
        } catch {
            logger.error("reload refused: cannot set up credentials: \(error)")
            return .failure(["cannot set up credentials: \(error)"])
        }
        server.observeCredentials(new, states: plan.states)
        for tokens in plan.created { tokens.start() }
        do {
            try server.reload(configuration: new, states: plan.states)
        } catch {
            for tokens in plan.created { tokens.stop() }
            logger.error("reload refused: \(error)")
            return .failure(["\(error)"])
        }
        // Stopped off this thread: a retired manager may be inside a slow identity-provider call,
        // and the reload is in effect already.
        let retired = plan.retired
        if !retired.isEmpty { DispatchQueue.global().async { for tokens in retired { tokens.stop() } } }
        state.text = loaded.sourceText
        state.folder = loaded.sourceFolder
        state.watch.filesRead(new.watchedFiles, signature: FileSignature.of)
        if fromFile {
            logger.info("configuration reloaded: \(new.routes.count) route(s), \(plan.created.count) new token manager(s)")
        } else {
            logger.info("a credential or certificate file changed: read again (\(plan.created.count) new token manager(s))")
        }
        return .success
    }

    /// Once a second on a thread of its own: `FileWatch` decides, this reloads.
    public func watch() {
        do {
            try OSThread.start(name: "tp-watch-files") { [self] in
                while true {
                    Syscall.sleep(1)
                    let change = state.withLock { $0.watch.look(configuration: FileSignature.of(path), signature: FileSignature.of) }
                    switch change {
                    case .configuration:
                        logger.info("the configuration file changed: reloading")
                        _ = reload()
                    case .files:
                        rereadFiles()
                    case .none:
                        break
                    }
                }
            }
        } catch {
            logger.error("cannot watch the configuration's files: \(error)")
        }
    }
}
