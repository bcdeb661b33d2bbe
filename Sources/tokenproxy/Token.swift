import ArgumentParser
import Config
import Credentials
import Foundation
import Logging

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
