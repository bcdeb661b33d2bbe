import Config
import Foundation
import Sockets

/// `type: exec`: runs `credentials.command` (an argv, no shell) and reads a token from its stdout:
/// either one bare token line, or a JSON object `{"token": …, "expires_in": N}` /
/// `{"token": …, "expires_at": epoch seconds or RFC 3339}`. A non-zero exit, a timeout, an empty or
/// unreadable output is a passing failure whose message never quotes the output (it may be a token).
/// Without a JWT `exp` or an expiry in the output, the token lives `default_lifetime`.
final class ExecTokenSource: TokenSource {
    let kind = "exec"
    let defaultLifetime: Double?
    let command: [String]
    let timeout: Double
    /// The variables that `*_env` keys name: secrets the command must not inherit.
    let withheld: Set<String>
    static let outputLimit = 64 << 10

    init(_ configuration: ExecConfiguration, defaultLifetime: Double, withholding withheld: Set<String> = []) throws {
        self.withheld = withheld
        guard let program = configuration.command.first, !program.isEmpty, !program.utf8.contains(0) else {
            throw ConfigurationError(keyPath: "credentials.command", reason: "an exec source needs a command")
        }
        guard configuration.timeout > 0 else {
            throw ConfigurationError(keyPath: "credentials.exec_timeout", reason: "must be more than 0")
        }
        self.command = configuration.command
        self.timeout = configuration.timeout
        self.defaultLifetime = defaultLifetime
    }

    private var name: String { command[0] }

    func fetch(current: TokenSnapshot?) throws -> IssuedToken {
        let outcome: ProcessRunner.Outcome
        do {
            outcome = try ProcessRunner.run(command, timeout: timeout, outputLimit: Self.outputLimit, withholding: withheld)
        } catch let error as ProcessRunner.LaunchError {
            throw TokenSourceError.passing("exec: \(error.description)")
        }
        switch outcome {
        case .timedOut:
            throw TokenSourceError.passing("exec: \(name) did not finish within \(formatSeconds(timeout)) and was killed")
        case .outputTooLarge:
            throw TokenSourceError.passing("exec: \(name) printed more than \(Self.outputLimit / 1024) KiB and was killed")
        case .finished(.signaled(let signal), _):
            throw TokenSourceError.passing("exec: \(name) was killed by signal \(signal)")
        case .finished(.exited(let status), let output):
            guard status == 0 else {
                throw TokenSourceError.passing("exec: \(name) exited with status \(status)")
            }
            switch ExecOutput.parse(output) {
            case .success(let token): return token
            case .failure(let problem): throw TokenSourceError.passing("exec: \(name) \(problem.description)")
            }
        }
    }
}

/// Reads what an exec command printed.
enum ExecOutput {
    struct Problem: Error, Equatable, CustomStringConvertible {
        var description: String
    }

    static func parse(_ output: [UInt8]) -> Result<IssuedToken, Problem> {
        let text = String(decoding: output, as: UTF8.self).trimmingWhitespace()
        if text.isEmpty { return .failure(Problem(description: "printed no token")) }
        if text.hasPrefix("{") { return parseJSON(Data(text.utf8)) }
        guard BearerToken.isUsable(text) else {
            return .failure(Problem(description: "printed no usable token (not one line without spaces or control characters, nor JSON)"))
        }
        return .success(IssuedToken(accessToken: text))
    }

    private static func parseJSON(_ data: Data) -> Result<IssuedToken, Problem> {
        let answer: Answer
        do {
            answer = try JSONDecoder().decode(Answer.self, from: data)
        } catch let problem as Problem {
            return .failure(problem)
        } catch {
            return .failure(Problem(description: "printed JSON that cannot be read"))
        }
        guard let token = answer.token else {
            return .failure(Problem(description: "printed JSON without a \"token\" string"))
        }
        let trimmed = token.trimmingWhitespace()
        guard BearerToken.isUsable(trimmed) else {
            return .failure(Problem(description: "printed a \"token\" that is empty or contains spaces or control characters"))
        }
        return .success(IssuedToken(accessToken: trimmed, expiresIn: answer.expiresIn, expiresAt: answer.expiresAt))
    }

    /// `{"token"|"access_token": String, "expires_in": Number|"Number", "expires_at": Number|"Number"|"RFC 3339"}`.
    private struct Answer: Decodable {
        var token: String?
        var expiresIn: Double?
        var expiresAt: Double?

        enum Key: String, CodingKey {
            case token
            case accessToken = "access_token"
            case expiresIn = "expires_in"
            case expiresAt = "expires_at"
        }

        init(from decoder: Decoder) throws {
            let container = try decoder.container(keyedBy: Key.self)
            token = (try? container.decodeIfPresent(String.self, forKey: .token)) ?? nil
            if token == nil { token = (try? container.decodeIfPresent(String.self, forKey: .accessToken)) ?? nil }
            if container.contains(.expiresIn), !(try container.decodeNil(forKey: .expiresIn)) {
                guard let seconds = Self.number(container, .expiresIn) else {
                    throw Problem(description: "printed an \"expires_in\" that is no number")
                }
                expiresIn = seconds
            }
            if container.contains(.expiresAt), !(try container.decodeNil(forKey: .expiresAt)) {
                if let seconds = Self.number(container, .expiresAt) {
                    expiresAt = seconds
                } else if let text = try? container.decode(String.self, forKey: .expiresAt), let seconds = RFC3339.parse(text) {
                    expiresAt = seconds
                } else {
                    throw Problem(description: "printed an \"expires_at\" that is neither epoch seconds nor RFC 3339")
                }
            }
        }

        /// A JSON number, or a string holding one ("3600"); never a boolean.
        private static func number(_ container: KeyedDecodingContainer<Key>, _ key: Key) -> Double? {
            if let value = try? container.decode(Double.self, forKey: key) { return value.isFinite ? value : nil }
            if let text = try? container.decode(String.self, forKey: key), let value = Double(text.trimmingWhitespace()) {
                return value.isFinite ? value : nil
            }
            return nil
        }
    }
}

/// "10 s", "1.5 s".
func formatSeconds(_ seconds: Double) -> String {
    if seconds == seconds.rounded() && abs(seconds) < 1e15 { return "\(Int(seconds)) s" }
    return "\(seconds) s"
}
