import ArgumentParser
import Config
import Credentials
import Foundation
import Logging
import LoginListener
import Logs
import ProxyCore
import Sockets
import TLS
import Upstream

/// tokenproxy's version: declared here only; `tokenproxy --version` prints it.
enum Version {
    static let tokenproxy = "0.1.0"

    /// What `--version` prints: tokenproxy's version, then the libcurl it runs with (curl_version(3):
    /// libcurl's version and those of its TLS and other libraries).
    static var description: String {
        "tokenproxy \(tokenproxy)\n\(UpstreamConnector.libcurlVersion)"
    }
}

/// Exit statuses of CONTRACT.md "The command line".
enum Exit {
    static let runtimeFailure: Int32 = 1
    static let badConfiguration: Int32 = 2
}

struct ConfigOption: ParsableArguments {
    @Option(name: .long, help: "The configuration file (default: $TOKENPROXY_CONFIG).")
    var config: String?

    /// Loads and validates the file; a bad one ends the process with status 2 and a line per error, naming its key.
    /// The configuration file's path, from --config or TOKENPROXY_CONFIG.
    var path: String {
        guard let path = config ?? ProcessInfo.processInfo.environment["TOKENPROXY_CONFIG"], !path.isEmpty else {
            fail("no configuration: pass --config FILE or set TOKENPROXY_CONFIG", status: Exit.badConfiguration)
        }
        return path
    }

    func load() -> LoadedConfiguration {
        let environment = ProcessInfo.processInfo.environment
        let path = self.path
        do {
            return try ConfigurationLoader.load(path: path, environment: environment)
        } catch let error as ConfigurationError {
            // Every error of the file, one per line, each with its key and reason (CONTRACT: check).
            let all = error.all
            if all.count == 1 { fail("configuration error: \(error)", status: Exit.badConfiguration) }
            let lines = all.map { "\n  \($0)" }.joined()
            fail("\(all.count) configuration errors:\(lines)", status: Exit.badConfiguration)
        } catch {
            fail("configuration error: \(error)", status: Exit.badConfiguration)
        }
    }
}

func fail(_ message: String, status: Int32) -> Never {
    FileHandle.standardError.write(Data("tokenproxy: \(message)\n".utf8))
    Glibc.exit(status)
}

/// Every secret the configuration holds is known to the log redactor before the first log line.
func registerConfiguredSecrets(_ configuration: Configuration) {
    for route in configuration.routes {
        let secrets = route.credentials.source.secrets + [route.access.requireValue, route.store.redis?.password].compactMap { $0 }
        for secret in secrets { SecretRegistry.shared.register(secret.value) }
    }
}

/// `--route NAME` (CONTRACT "Several APIs in one process").
struct RouteOption: ParsableArguments {
    @Option(name: .long, help: "The route whose session to use, when the file has routes:.") var route: String?

    /// The file reduced to the route the command works on: the one named, or the only one that keeps
    /// a session (the only one at all, for `token`); otherwise the command fails naming the routes.
    func select(_ loaded: LoadedConfiguration, command: String) -> LoadedConfiguration {
        let configuration = loaded.configuration
        let names = configuration.routes.map(\.name).joined(separator: ", ")
        var chosen: Int
        if let route {
            guard let index = configuration.routeIndex(named: route) else {
                fail("\(command): no route named \(route); the routes are: \(names)", status: Exit.badConfiguration)
            }
            chosen = index
        } else if configuration.routes.count == 1 {
            chosen = 0
        } else {
            let withSession = configuration.routes.indices.filter { configuration.routes[$0].credentials.type.keepsSession }
            guard withSession.count == 1 else {
                let which =
                    withSession.isEmpty ? "" : " (routes that keep a session: \(withSession.map { configuration.routes[$0].name }.joined(separator: ", ")))"
                fail("\(command): the file has several routes; name one with --route NAME\(which); the routes are: \(names)", status: Exit.badConfiguration)
            }
            chosen = withSession[0]
        }
        var one = loaded
        one.configuration = configuration.selecting(route: chosen)
        return one
    }
}

/// Sets up logging from the `log:` section and reports the loader's warnings.
func startLogging(_ loaded: LoadedConfiguration) -> Logger {
    registerConfiguredSecrets(loaded.configuration)
    LogSetup.bootstrap(level: loaded.configuration.log.level.rawValue, format: loaded.configuration.log.format.rawValue)
    var logger = Logger(label: "tokenproxy")
    logger.logLevel = LogSetup.level(named: loaded.configuration.log.level.rawValue) ?? .info
    for warning in loaded.warnings { logger.warning("\(warning)") }
    return logger
}

@main
struct Tokenproxy: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "tokenproxy",
        abstract: "An authenticating HTTP/1.1 reverse proxy: it keeps an access token fresh and adds it to every request.",
        version: Version.description,
        subcommands: [Serve.self, Login.self, Token.self, Status.self, Logout.self, Check.self, CA.self])

    static func main() {
        do {
            var command = try parseAsRoot()
            try command.run()
        } catch {
            let code = exitCode(for: error)
            if code == .success {
                print(fullMessage(for: error))
                Glibc.exit(0)
            }
            if let exitCode = error as? ExitCode { Glibc.exit(exitCode.rawValue) }
            FileHandle.standardError.write(Data((fullMessage(for: error) + "\n").utf8))
            // A bad command line exits 2, like a bad configuration (CONTRACT).
            Glibc.exit(Exit.badConfiguration)
        }
    }
}

struct Serve: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Run the proxy in the foreground until SIGTERM or SIGINT.")
    @OptionGroup var options: ConfigOption

    func run() throws {
        let loaded = options.load()
        let configuration = loaded.configuration
        if let problem = listenerTLSProblems(configuration).first { fail("configuration error: \(problem)", status: Exit.badConfiguration) }
        if let problem = spoolFolderProblems(configuration).first { fail("configuration error: \(problem)", status: Exit.badConfiguration) }
        // Signals are taken by one thread with sigwait; block them before any other thread exists.
        var signals = sigset_t()
        sigemptyset(&signals)
        for s in [SIGTERM, SIGINT, SIGHUP, SIGUSR2] { sigaddset(&signals, s) }
        pthread_sigmask(SIG_BLOCK, &signals, nil)
        signal(SIGPIPE, SIG_IGN)

        let logger = startLogging(loaded)
        Server.announceOwnAddresses(of: configuration)
        let plan: RouteStatePlan
        do {
            plan = try RouteStatePlan(configuration, previous: nil) { try TokenManager(configuration: $0, logger: logger) }
        } catch {
            fail("cannot set up credentials: \(error)", status: Exit.badConfiguration)
        }
        for tokens in plan.created { tokens.start() }
        let stopTokens = { for state in plan.created { state.stop() } }
        let server = Server(configuration: configuration, states: plan.states, logger: logger)
        let reloader = Reloader(path: options.path, loaded: loaded, server: server, logger: logger, registerSecrets: registerConfiguredSecrets)
        server.reloadHandler = { reloader.reload() }
        do {
            try server.start()
        } catch let error as ListenerError {
            logger.error("\(error)")
            stopTokens()
            Glibc.exit(Exit.runtimeFailure)
        } catch {
            logger.error("cannot start serving: \(error)")
            stopTokens()
            Glibc.exit(Exit.runtimeFailure)
        }
        reloader.watch()
        let stop = DispatchSemaphore(value: 0)
        let waitForSignals = {
            var stopping = false
            while true {
                var received: Int32 = 0
                guard sigwait(&signals, &received) == 0 else { continue }
                switch received {
                case SIGHUP:
                    logger.info("SIGHUP: forcing a refresh")
                    if let result = server.forceRefresh() {
                        let routes = { (names: [String]) in server.configuration.hasRoutes ? " for \(names.joined(separator: ", "))" : "" }
                        if !result.withoutSession.isEmpty { logger.warning("SIGHUP: no session to refresh\(routes(result.withoutSession))") }
                        if !result.deferred.isEmpty {
                            logger.warning(
                                "SIGHUP: forced refreshes back off like failed ones: deferred\(routes(result.deferred)), done in \(result.retryAfter) s")
                        }
                    }
                case SIGUSR2:
                    logger.info("SIGUSR2: reloading the configuration")
                    DispatchQueue.global().async { _ = reloader.reload() }
                default:
                    if stopping {
                        logger.warning("second stop signal: exiting at once")
                        Glibc.exit(Exit.runtimeFailure)
                    }
                    stopping = true
                    logger.info("stop signal: draining")
                    stop.signal()
                }
            }
        }
        do {
            try OSThread.start(name: "tp-signals", waitForSignals)
        } catch {
            logger.error("cannot start the signal thread: \(error)")
            stopTokens()
            Glibc.exit(Exit.runtimeFailure)
        }
        stop.wait()
        server.drain()
        for state in server.routeStates { state.tokens.stop() }
        logger.info("stopped")
        Glibc.exit(0)
    }
}

struct Check: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Validate the configuration and print what it resolved (secrets masked).")
    @OptionGroup var options: ConfigOption

    func run() throws {
        let loaded = options.load()
        let configuration = loaded.configuration
        // What only the credentials and TLS code can judge (a PEM that holds no usable key), and what
        // `serve` needs at start beyond the file itself (CONTRACT.md, `check`): every error at once.
        var problems = loaded.startProblems.map(\.description)
        for (index, route) in configuration.routes.enumerated() {
            if var problem = credentialFileProblem(route.credentials) {
                if configuration.hasRoutes { problem.keyPath = "routes[\(index)].\(problem.keyPath)" }
                problems.append(problem.description)
            }
        }
        problems += listenerTLSProblems(configuration) + spoolFolderProblems(configuration)
        problems += storeFolderProblems(configuration) + forwardProxyCAProblems(configuration)
        var seen: Set<String> = []
        problems = problems.filter { seen.insert($0).inserted }  // a file the loader and a check below both name
        if problems.count == 1 { fail("configuration error: \(problems[0])", status: Exit.badConfiguration) }
        if !problems.isEmpty {
            fail("\(problems.count) configuration errors:" + problems.map { "\n  \($0)" }.joined(), status: Exit.badConfiguration)
        }
        for warning in loaded.warnings { FileHandle.standardError.write(Data("warning: \(warning)\n".utf8)) }
        print(configuration.resolvedDescription(), terminator: configuration.resolvedDescription().hasSuffix("\n") ? "" : "\n")
        print("workers: \(Server.workerCount(configuration.workers)) (resolved)")
        print("configuration ok")
    }
}

/// A file store's folder must take the session file (made 0700 when missing), as the user `check`
/// runs as: a read-only configuration folder under the default `store.path` is the usual miss.
func storeFolderProblems(_ configuration: Configuration) -> [String] {
    var seen: Set<String> = []
    let environment = ProcessInfo.processInfo.environment
    return configuration.routes.enumerated().compactMap { index, route -> String? in
        guard route.credentials.keepsSession(environment: environment), route.store.redis == nil, seen.insert(route.store.path).inserted,
            let problem = FileAccess.creationProblem(route.store.path)
        else { return nil }
        let key = configuration.hasRoutes ? "routes[\(index)].store.path" : "store.path"
        return "\(key): \(route.store.path): \(problem)"
    }
}

/// The forward proxy's CA as `serve` will take it, without making it: both files readable, a key
/// `KeyFilePermissions` accepts and a CA certificate; or neither there and a folder to make them in.
func forwardProxyCAProblems(_ configuration: Configuration) -> [String] {
    guard let forward = configuration.forwardProxy else { return [] }
    let keyKey = forward.caConfigured ? "forward_proxy.ca_key_file" : "forward_proxy"
    let certificateKey = forward.caConfigured ? "forward_proxy.ca_cert_file" : "forward_proxy"
    switch (FileKind.of(forward.caCertFile) != nil, FileKind.of(forward.caKeyFile) != nil) {
    case (false, false):
        guard let problem = FileAccess.creationProblem(forward.caKeyFile) else { return [] }
        return ["\(keyKey): the CA would be made at start as \(forward.caKeyFile): \(problem)"]
    case (true, false): return ["\(keyKey): \(TLSSetupError.incompleteAuthority(missing: forward.caKeyFile))"]
    case (false, true): return ["\(certificateKey): \(TLSSetupError.incompleteAuthority(missing: forward.caCertFile))"]
    case (true, true):
        let unreadable = [(certificateKey, forward.caCertFile), (keyKey, forward.caKeyFile)].compactMap { key, path in
            FileAccess.readProblem(path).map { "\(key): \($0)" }
        }
        guard unreadable.isEmpty else { return unreadable }
        do throws(TLSSetupError) {
            _ = try CertificateAuthority.load(certificateFile: forward.caCertFile, keyFile: forward.caKeyFile)
            return []
        } catch {
            switch error {
            case .noCertificate, .notAnAuthority: return ["\(certificateKey): \(error)"]
            default: return ["\(keyKey): \(error)"]
            }
        }
    }
}

/// The session-backed source that `login`, `token`, `status` and `logout` share with the server.
func sessionSource(_ loaded: LoadedConfiguration, logger: Logger, command: String) -> SessionTokenSource {
    let type = loaded.configuration.credentials.type
    guard loaded.configuration.credentials.keepsSession(environment: ProcessInfo.processInfo.environment) else {
        // AWS keys from the environment or files are never stored (CONTRACT.md "AWS credentials and SigV4 signing").
        let why = type == .aws ? " (its keys are read from the environment or files, never stored)" : ""
        fail("\(command): credentials.type \(type.rawValue) keeps no session\(why)", status: 1)
    }
    do {
        return try makeSessionTokenSource(loaded.configuration, logger: logger)
    } catch {
        fail("configuration error: \(error)", status: Exit.badConfiguration)
    }
}

func say(_ text: String) {
    FileHandle.standardError.write(Data((text + "\n").utf8))
}

struct Login: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Obtain a first token set with the configured login flow and save it to the store.")
    @OptionGroup var options: ConfigOption
    @OptionGroup var route: RouteOption
    @Option(help: "The user name for a password login; the login_hint of a browser login.") var username: String?
    @Flag(help: "Read the password, then the answer to each later question, from standard input (one line each).") var passwordStdin = false
    @Flag(help: "Browser login: open no browser; print the address and accept the final address pasted on standard input.")
    var noBrowser = false
    @Option(help: "Browser login: how long to wait for the sign-in (default 5m).") var timeout: String = "5m"

    func run() throws {
        let loaded = route.select(options.load(), command: "login")
        guard let waitLimit = Units.parseDuration(timeout), waitLimit > 0 else {
            fail("login: --timeout \(timeout) is not a duration such as 90s or 5m", status: Exit.badConfiguration)
        }
        let logger = startLogging(loaded)
        let source = sessionSource(loaded, logger: logger, command: "login")
        let input: LoginInput
        if source.provider.fetchesWithoutSession {
            input = .none
        } else {
            switch loaded.configuration.credentials.source.login {
            case .device where source.provider is OAuth2Provider:
                input = .device
            case .browser where source.provider is OAuth2Provider:
                let environment = ProcessInfo.processInfo.environment
                input = .browser(
                    BrowserLoginOptions(
                        loginHint: username, openBrowser: !noBrowser, timeout: waitLimit, browser: environment["BROWSER"],
                        hasDisplay: !(environment["DISPLAY"] ?? "").isEmpty || !(environment["WAYLAND_DISPLAY"] ?? "").isEmpty,
                        pasteFD: 0,
                        showURL: { url in
                            FileHandle.standardOutput.write(Data((url + "\n").utf8))
                        }, listen: LoopbackListener.bind))
            case .none:
                fail("login: credentials.login is none: this configuration has no login flow", status: Exit.badConfiguration)
            case .password, .device, .browser, .srp:
                guard let username, !username.isEmpty else {
                    fail("login: a password login needs --username", status: Exit.badConfiguration)
                }
                let password: String
                if passwordStdin {
                    guard let line = readLine(strippingNewline: true) else {
                        fail("login: --password-stdin: standard input is empty", status: Exit.badConfiguration)
                    }
                    password = line.hasSuffix("\r") ? String(line.dropLast()) : line
                } else if isatty(0) == 1, let typed = getpass("Password for \(username): ") {
                    password = String(cString: typed)
                } else {
                    fail("login: pass the password on standard input with --password-stdin", status: Exit.badConfiguration)
                }
                SecretRegistry.shared.register(password)
                if source.provider is CognitoProvider {
                    input = .passwordWithChallenges(username: username, password: password, questions: TerminalQuestions(fromStdin: passwordStdin))
                } else {
                    input = .password(username: username, password: password)
                }
            }
        }
        do {
            let session = try source.login(input, prompt: { say($0) })
            let who = session.subject.map { " as \($0)" } ?? ""
            say("logged in\(who); the session is saved in \(storeLocation(loaded.configuration.store))")
            if session.refreshToken == nil {
                say(
                    "warning: the identity provider gave no refresh token, so the session ends when the access token expires; "
                        + "ask for one (often the scope offline_access) and log in again")
            }
        } catch let error as TokenSourceError {
            fail("login failed: \(error.reason)", status: 1)
        } catch {
            fail("login failed: \(type(of: error))", status: 1)
        }
    }
}

struct Token: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Print a currently valid access token, refreshing first if needed.")
    @OptionGroup var options: ConfigOption
    @OptionGroup var route: RouteOption
    @Option(
        help: """
            token: the token (for type: aws, the container credentials endpoint's JSON); \
            credential-process: for type: aws, the JSON a credential_process of ~/.aws/config prints.
            """)
    var format: TokenFormat = .token

    func run() throws {
        let loaded = route.select(options.load(), command: "token")
        let credentials = loaded.configuration.credentials
        if format == .credentialProcess, credentials.source.awsSigning == nil {
            fail("token: --format credential-process is for AWS credentials (type: aws), not \(credentials.type.rawValue)", status: Exit.badConfiguration)
        }
        let logger = startLogging(loaded)
        let token: String
        if credentials.keepsSession(environment: ProcessInfo.processInfo.environment) {
            let source = sessionSource(loaded, logger: logger, command: "token")
            do {
                token = try source.validToken()
            } catch let error as TokenSourceError {
                switch error {
                case .loginRequired(let why), .refused(let why):
                    fail("login required: \(why)", status: 1)
                case .passing(let why, _), .configuration(let why):
                    fail("no valid token: \(why)", status: 1)
                }
            }
        } else {
            token = try managedToken(loaded, logger: logger)
        }
        switch format {
        case .token:
            print(token)
        case .credentialProcess:
            // The token of AWS credentials is their container-endpoint JSON (CONTRACT.md).
            guard let aws = AWSCredentials(containerEndpointJSON: token) else { fail("no valid token: the credentials are not AWS keys", status: 1) }
            print(aws.credentialProcessJSON)
        }
    }

    /// The sources without a session: one fetch through a manager.
    private func managedToken(_ loaded: LoadedConfiguration, logger: Logger) throws -> String {
        let tokens: TokenManager
        do {
            tokens = try TokenManager(configuration: loaded.configuration, logger: logger)
        } catch {
            fail("configuration error: \(error)", status: Exit.badConfiguration)
        }
        tokens.start()
        defer { tokens.stop() }
        let done = DispatchSemaphore(value: 0)
        // Safe: the token thread writes it once, before `done.signal()`; it is read only after a wait
        // that did not time out (the semaphore orders the two), never while a late answer may land.
        nonisolated(unsafe) var result: RefreshOutcome?
        tokens.refresh(staleGeneration: nil, reason: .expiry) { outcome in
            result = outcome
            done.signal()
        }
        let answered = done.wait(timeout: .now() + loaded.configuration.limits.refreshWait) == .success
        switch answered ? result : nil {
        case .token(let snapshot):
            return snapshot.accessToken
        case .loginRequired(let why):
            fail("login required: \(why)", status: 1)
        case .unavailable(let why, _):
            fail("no valid token: \(why)", status: 1)
        case nil:
            fail("no valid token: the refresh did not finish in time", status: 1)
        }
    }
}

/// What `tokenproxy token` prints (CONTRACT.md, command line).
enum TokenFormat: String, ExpressibleByArgument, CaseIterable {
    case token
    case credentialProcess = "credential-process"
}

struct Status: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Print the store's state without secrets (every route's, without --route).")
    @OptionGroup var options: ConfigOption
    @OptionGroup var route: RouteOption
    @Flag(help: "Print one JSON object (keyed by route name when the file has routes: and no --route is given).") var json = false

    func run() throws {
        let all = options.load()
        let logger = startLogging(all)
        guard all.configuration.hasRoutes, route.route == nil else {
            let loaded = route.select(all, command: "status")
            let (fields, usable) = statusFields(loaded, logger: logger)
            if json {
                print(object(fields))
            } else {
                for (name, value) in fields where value != nil || name != "ended_reason" { print("\(name): \(value ?? "-")") }
            }
            if !usable { Glibc.exit(1) }
            return
        }
        // Every route (CONTRACT "Several APIs"): text blocks, or one object keyed by route name.
        var members: [String] = []
        var anyUnusable = false
        for i in all.configuration.routes.indices {
            var one = all
            one.configuration = all.configuration.selecting(route: i)
            let name = one.configuration.routes[0].name
            let (fields, usable) = statusFields(one, logger: logger)
            if !usable { anyUnusable = true }
            if json {
                members.append("\(TokenproxyLogHandler.jsonString(name)):\(object(fields))")
            } else {
                print("route \(name):")
                for (key, value) in fields where value != nil || key != "ended_reason" { print("  \(key): \(value ?? "-")") }
            }
        }
        if json { print("{" + members.joined(separator: ",") + "}") }
        if anyUnusable { Glibc.exit(1) }
    }

    private func object(_ fields: [(String, String?)]) -> String {
        let members = fields.map { name, value in "\(TokenproxyLogHandler.jsonString(name)):\(value.map(TokenproxyLogHandler.jsonString) ?? "null")" }
        return "{" + members.joined(separator: ",") + "}"
    }

    /// The fields `status` prints for one route, and whether it can serve without a login (exit 0).
    private func statusFields(_ loaded: LoadedConfiguration, logger: Logger) -> (fields: [(String, String?)], usable: Bool) {
        let credentials = loaded.configuration.credentials
        // A fixed credential has no session to show: nothing is stored, nobody logs in.
        if needsNoSession(credentials, environment: ProcessInfo.processInfo.environment) {
            return ([("kind", credentials.type.rawValue), ("session", SessionStatus.notNeeded)], true)
        }
        let source = sessionSource(loaded, logger: logger, command: "status")
        let status: SessionStatus
        do {
            status = try source.status()
        } catch let error as TokenSourceError {
            fail("status: \(error.reason)", status: 1)
        } catch {
            fail("status: \(error)", status: 1)
        }
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime]
        func time(_ value: Double?) -> String? { value.map { formatter.string(from: Date(timeIntervalSince1970: $0)) } }
        let fields: [(String, String?)] = [
            ("kind", status.kind), ("session", status.sessionText), ("subject", status.subject),
            ("issued_at", time(status.issuedAt)), ("expires_at", time(status.expiresAt)),
            ("refreshable", status.refreshable.map { $0 ? "yes" : "no" }),
            ("last_refresh_at", time(status.lastRefreshAt)), ("last_refresh_outcome", status.lastRefreshOutcome),
            ("ended_reason", status.endedReason),
        ]
        return (fields, status.isUsable)
    }
}

struct Logout: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Delete the stored tokens (and revoke the refresh token where configured).")
    @OptionGroup var options: ConfigOption
    @OptionGroup var route: RouteOption

    func run() throws {
        let loaded = route.select(options.load(), command: "logout")
        let logger = startLogging(loaded)
        let source = sessionSource(loaded, logger: logger, command: "logout")
        do {
            if let warning = try source.logout() { logger.warning("logout: \(warning)") }
            say("logged out; the stored tokens are deleted")
        } catch let error as TokenSourceError {
            fail("logout: \(error.reason)", status: 1)
        }
    }
}

/// Answers to a login's challenges (CONTRACT "Logging in a person"): the question on stderr, the
/// answer from the next line of stdin (`--password-stdin`, read only now: an SMS code exists only
/// once the challenge was sent) or from the terminal, without echo for secrets.
final class TerminalQuestions: LoginQuestions {
    private let fromStdin: Bool

    init(fromStdin: Bool) { self.fromStdin = fromStdin }

    func answer(_ question: LoginQuestion) -> String? {
        say(question.text)
        var answer: String?
        if fromStdin {
            answer = readLine(strippingNewline: true).map { $0.hasSuffix("\r") ? String($0.dropLast()) : $0 }
        } else if isatty(0) == 1 {
            if question.secret {
                answer = getpass("> ").map { String(cString: $0) }
            } else {
                FileHandle.standardError.write(Data("> ".utf8))
                answer = readLine(strippingNewline: true)
            }
        }
        if question.secret, let answer { SecretRegistry.shared.register(answer) }
        return answer
    }
}

/// `tokenproxy ca` (CONTRACT.md "HTTPS for clients"): the forward proxy's CA certificate on stdout,
/// the CA made first when neither of its files exists. Its key never leaves its file.
struct CA: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ca",
        abstract: "Print the certificate (PEM) of the CA that forward_proxy signs host certificates with, making it when it does not exist yet.")
    @OptionGroup var options: ConfigOption

    func run() throws {
        let loaded = options.load()
        guard let forward = loaded.configuration.forwardProxy else {
            fail("ca: the configuration has no forward_proxy section, so there is no CA", status: Exit.badConfiguration)
        }
        do {
            let authority = try ForwardProxyAuthority.prepare(certificateFile: forward.caCertFile, keyFile: forward.caKeyFile)
            FileHandle.standardOutput.write(Data(authority.certificatePEM))
        } catch {
            fail("ca: \(error)", status: Exit.runtimeFailure)
        }
    }
}

/// What `check` and `serve` find wrong with a listener's files beyond what the loader sees (a file
/// that holds no certificate, a key that is not the certificate's, a client CA file without a CA), by
/// key path: the listener's context is set up once here as it will be at start.
func listenerTLSProblems(_ configuration: Configuration) -> [String] {
    var settings: [(keyPath: String, tls: ListenerTLSConfiguration)] = []
    if let tls = configuration.listenTLS { settings.append(("tls", tls)) }
    for (index, route) in configuration.routes.enumerated() {
        if let tls = route.ownListenerTLS { settings.append(("routes[\(index)].tls", tls)) }
    }
    return settings.compactMap { keyPath, tls -> String? in
        do throws(TLSSetupError) {
            _ = try TLSServerContext(certificateFile: tls.certFile, keyFile: tls.keyFile, clientCAFile: tls.clientCAFile)
            return nil
        } catch {
            return "\(keyPath).\(listenerTLSKey(at: error, tls)): \(error)"
        }
    }
}

/// What `check` and `serve` find wrong with the spool folder of a route that spools bodies (CONTRACT
/// `forward.request_buffering_disk`: the process's own, mode 0700, not a symbolic link), by key path:
/// `request_buffering_path` when it names the folder.
func spoolFolderProblems(_ configuration: Configuration) -> [String] {
    configuration.routes.enumerated().compactMap { index, route -> String? in
        guard route.forward.requestBufferingDisk > 0, let problem = PrivateFolder.problem(at: route.spoolFolder) else { return nil }
        let key = route.forward.requestBufferingPath == nil ? "request_buffering_disk" : "request_buffering_path"
        return (configuration.hasRoutes ? "routes[\(index)]." : "") + "forward.\(key): the spool folder \(problem)"
    }
}

/// The key of `tls:` whose file `error` is about.
func listenerTLSKey(at error: TLSSetupError, _ tls: ListenerTLSConfiguration) -> String {
    func key(naming path: String) -> String {
        if path == tls.keyFile { return "key_file" }
        return path == tls.clientCAFile ? "client_ca_file" : "cert_file"
    }
    switch error {
    case .unreadableFile(let path, _), .keyFileNotPrivate(let path, _), .noCertificate(let path), .noPrivateKey(let path),
        .unusableClientCA(let path), .cannotWrite(let path, _), .notAnAuthority(let path), .incompleteAuthority(let path):
        return key(naming: path)
    case .keyDoesNotMatchCertificate: return "key_file"
    case .invalidHostName, .openSSL: return "cert_file"
    }
}
