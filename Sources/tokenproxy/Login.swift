import ArgumentParser
import Config
import Credentials
import Foundation
import LoginListener
import Logs

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
