import ArgumentParser
import Config
import Credentials
import Foundation
import Logging
import Logs
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
        for caller in route.placeholder?.callers ?? [] { SecretRegistry.shared.register(caller.value) }
    }
    for header in configuration.telemetry?.headers ?? [] { SecretRegistry.shared.register(header.value.value) }
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

/// The command tree; the last line of this file runs it.
struct Tokenproxy: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "tokenproxy",
        abstract: "An authenticating HTTP/1.1 reverse proxy: it keeps an access token fresh and adds it to every request.",
        version: Version.description,
        subcommands: [Serve.self, Login.self, Token.self, Status.self, Logout.self, Check.self, CA.self, Placeholder.self])

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

// The entry point: the one statement of this file (main.swift's top-level code), so the commands in
// the other files of this module are plain declarations.
Tokenproxy.main()
