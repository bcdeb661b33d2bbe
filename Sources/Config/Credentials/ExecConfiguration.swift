import Yams

/// `type: exec`: a program (an argv, no shell) whose output is the token.
public struct ExecConfiguration: Sendable, Equatable {
    /// The program (resolved when it names a path) and its arguments; never empty.
    public var command: [String]
    public var timeout: Double = 10
    public init(command: [String], timeout: Double = 10) {
        self.command = command
        self.timeout = timeout
    }
}

extension Keys {
    static let exec = ["command", "exec_timeout"]
}

extension ExecConfiguration {
    static func parse(_ s: YAMLSection, errorsBefore: Int, in load: LoadContext) -> ExecConfiguration? {
        let command = load.found.collect { try ExecConfiguration.parseCommand(s, in: load) }
        let timeout = load.found.collect { try load.positiveDuration(s, "exec_timeout") }
        guard load.found.errors.count == errorsBefore else { return nil }
        guard let command else {
            load.found.record(ConfigurationError.missingCredential("command", for: .exec, " (a list: the program and its arguments)"))
            return nil
        }
        return ExecConfiguration(command: command, timeout: timeout ?? 10)
    }

    /// `credentials.command`: a list, the program (resolved when it names a path) and its arguments.
    static func parseCommand(_ s: YAMLSection, in load: LoadContext) throws -> [String]? {
        guard let node = s.node("command") else { return nil }
        guard case .sequence = node else {
            throw ConfigurationError(
                keyPath: "credentials.command",
                reason:
                    "must be a list of strings, the program and its arguments, e.g. [/usr/local/bin/get-token, --audience, api] (a single string is not split)")
        }
        guard var command = try s.stringList("command"), let program = command.first else {
            throw ConfigurationError(keyPath: "credentials.command", reason: "must not be empty: name the program to run")
        }
        guard !program.isEmpty else { throw ConfigurationError(keyPath: "credentials.command[0]", reason: "must not be empty") }
        if program.contains("/") { command[0] = load.resolve(program) }
        return command
    }
}

extension ExecConfiguration {
    func describe(_ line: (String, String?) -> Void) {
        line("command", "[" + command.map(quoted).joined(separator: ", ") + "]")
        line("exec_timeout", Units.formatDuration(timeout))
    }
}
