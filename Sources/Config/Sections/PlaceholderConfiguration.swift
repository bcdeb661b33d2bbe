import FoundationEssentials
import Sockets

/// `placeholder:` of a route (CONTRACT.md "Programs in a sandbox", "Placeholders"): the values a
/// sandboxed program holds instead of the route's credential, each with the name of its caller.
public struct PlaceholderConfiguration: Sendable, Equatable {
    public enum Source: Sendable, Equatable {
        /// `value_env` or `value_file`: one value, caller `default`.
        case value(Secret)
        /// `callers_file`: one `CALLER-NAME VALUE` a line, read again when it changes.
        case callersFile(String)
    }

    /// The caller of a `value_env` or `value_file` placeholder.
    public static let defaultCaller = "default"
    /// CONTRACT.md: a placeholder is at least this long (as long as 128 random bits in base 62).
    public static let minimumLength = 22

    public var source: Source
    /// The callers as the load read them (for `callers_file`, the file's lines then).
    public var callers: [PlaceholderCaller]

    public init(source: Source, callers: [PlaceholderCaller]) {
        self.source = source
        self.callers = callers
    }

    /// `callers_file`'s path; nil for one value.
    public var callersFile: String? {
        if case .callersFile(let path) = source { return path }
        return nil
    }
}

/// One caller of a route: its name (in the audit log and the budget metrics) and its placeholder.
public struct PlaceholderCaller: Sendable, Equatable {
    public var name: String
    public var value: String
    public init(name: String, value: String) {
        self.name = name
        self.value = value
    }
}

/// A `callers_file` read and checked: `CALLER-NAME VALUE`, one a line, separated by spaces or tabs.
/// Blank lines and lines whose first non-blank character is `#` are skipped. A name is 1 to 64 of
/// `A-Z a-z 0-9 _ . @ -`; a value is at least `PlaceholderConfiguration.minimumLength` visible ASCII
/// characters. A name or a value given twice is an error naming both lines: one value for two
/// callers could not tell them apart, and two values of one name would be the same caller's.
public enum CallersFile {
    /// What is wrong with a file, one line each (`PATH line N: why`).
    public struct Problems: Error, Equatable {
        public var lines: [String]
    }

    /// The largest file read: a sandbox fleet, not a user database.
    public static let maxBytes = 1 << 20

    /// The callers of `text`, or every problem found, each `PATH line N: why`.
    public static func parse(_ text: [UInt8], path: String) -> Result<[PlaceholderCaller], CallersFile.Problems> {
        var callers: [PlaceholderCaller] = []
        var problems: [String] = []
        var lineOfName: [String: Int] = [:]
        var lineOfValue: [String: Int] = [:]
        var lineNumber = 0
        for rawLine in text.split(separator: 0x0A, omittingEmptySubsequences: false) {
            lineNumber += 1
            var line = rawLine[...]
            if line.last == 0x0D { line = line.dropLast() }
            let fields = line.split(whereSeparator: { $0 == 0x20 || $0 == 0x09 })
            if fields.isEmpty || fields[0].first == UInt8(ascii: "#") { continue }
            func problem(_ why: String) { problems.append("\(path) line \(lineNumber): \(why)") }
            guard fields.count == 2 else {
                problem("expected CALLER-NAME VALUE (two words), found \(fields.count)")
                continue
            }
            // Neither word of a bad line is echoed: with the columns swapped, it would be the value.
            let name = String(decoding: fields[0], as: UTF8.self)
            guard isCallerName(fields[0]) else {
                problem("the first word is not a caller name: 1 to 64 of A-Z a-z 0-9 _ . @ -")
                continue
            }
            if let reason = valueProblem(fields[1]) {
                problem("the second word: \(reason)")
                continue
            }
            let value = String(decoding: fields[1], as: UTF8.self)
            if let first = lineOfName[name] {
                problem("caller \(name) is already named on line \(first)")
                continue
            }
            if let first = lineOfValue[value] {
                problem("caller \(name) has the placeholder of line \(first); each caller needs its own")
                continue
            }
            lineOfName[name] = lineNumber
            lineOfValue[value] = lineNumber
            callers.append(PlaceholderCaller(name: name, value: value))
        }
        if problems.isEmpty && callers.isEmpty { problems.append("\(path): no caller (one CALLER-NAME VALUE a line)") }
        return problems.isEmpty ? .success(callers) : .failure(Problems(lines: problems))
    }

    /// Reads and parses the file at `path`.
    public static func read(_ path: String) -> Result<[PlaceholderCaller], CallersFile.Problems> {
        switch SmallFile.read(path, limit: maxBytes) {
        case .success(let bytes): return parse(bytes, path: path)
        case .failure(let failure): return .failure(Problems(lines: ["cannot read \(path): \(failure)"]))
        }
    }

    static func isCallerName(_ bytes: ArraySlice<UInt8>) -> Bool {
        (1...64).contains(bytes.count)
            && bytes.allSatisfy { b in
                (b >= 0x61 && b <= 0x7A) || (b >= 0x41 && b <= 0x5A) || (b >= 0x30 && b <= 0x39) || b == 0x5F || b == 0x2E || b == 0x40 || b == 0x2D
            }
    }

    /// Why `value` cannot be a placeholder, or nil: too short, or a byte outside visible ASCII (a
    /// placeholder goes in a header field and a query, where those would not survive).
    public static func valueProblem<Bytes: Collection<UInt8>>(_ value: Bytes) -> String? {
        guard value.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else {
            return "a placeholder may hold only visible ASCII characters (no space, no control character)"
        }
        guard value.count >= PlaceholderConfiguration.minimumLength else {
            return "a placeholder must be at least \(PlaceholderConfiguration.minimumLength) characters long, this one has \(value.count)"
        }
        return nil
    }
}

extension Keys {
    static let placeholder = ["value_env", "value_file", "callers_file"]
}

extension PlaceholderConfiguration {
    /// `placeholder:` of `route` (nil when absent); `placeholder` and the route's credentials are read.
    static func parse(_ s: YAMLSection, in load: LoadContext) throws -> PlaceholderConfiguration? {
        guard let section = try s.section("placeholder") else { return nil }
        load.found.collect { try section.rejectUnknownKeys(Keys.placeholder) }
        let present = Keys.placeholder.filter { section.has($0) }
        guard present.count == 1 else {
            let reason =
                present.isEmpty
                ? "needs one of value_env, value_file or callers_file"
                : "set only one of value_env, value_file and callers_file; \(present.joined(separator: " and ")) are set"
            throw ConfigurationError(keyPath: "placeholder", reason: reason)
        }
        if present[0] == "callers_file" {
            let keyPath = section.path("callers_file")
            let path = try load.pathValue(section, "callers_file")!
            switch CallersFile.read(path) {
            case .success(let callers): return PlaceholderConfiguration(source: .callersFile(path), callers: callers)
            case .failure(let problems):
                throw ConfigurationError(every: problems.lines.map { ConfigurationError(keyPath: keyPath, reason: $0) })!
            }
        }
        guard let secret = try load.readSecret(section, "value", literal: false) else { return nil }
        if let reason = CallersFile.valueProblem(Array(secret.value.utf8)) {
            throw ConfigurationError(keyPath: section.path(present[0]), reason: reason)
        }
        return PlaceholderConfiguration(source: .value(secret), callers: [PlaceholderCaller(name: defaultCaller, value: secret.value)])
    }

    /// `check`'s line: never a value.
    var resolvedDescription: String {
        switch source {
        case .value(let secret): return secret.description
        case .callersFile(let path): return "callers_file \(path) (\(callers.count) caller\(callers.count == 1 ? "" : "s"), values masked)"
        }
    }
}

extension RouteConfiguration {
    /// Reads `placeholder` and `scrub` of a route (or of the one-API file).
    static func parseSandbox(_ s: YAMLSection, into route: inout RouteConfiguration, in load: LoadContext) {
        route.placeholder = load.found.collect { try PlaceholderConfiguration.parse(s, in: load) }
        if let scrub = load.found.collect({ try s.bool("scrub") }) { route.scrubSetting = scrub }
    }

    /// The values a placeholder must not equal: the route's real credentials as the load knows
    /// them (a static token, a client secret, a seed refresh token, the access value, AWS keys read
    /// from the environment or a file).
    func knownCredentialValues(environment: [String: String]) -> [String] {
        var values = credentials.source.secrets.map(\.value)
        if let value = access.requireValue?.value { values.append(value) }
        if case .aws(let aws) = credentials.source {
            let origins: [(AWSConfiguration.ValueOrigin?, String)] = [
                (aws.accessKeyID, "AWS_ACCESS_KEY_ID"), (aws.secretAccessKey, "AWS_SECRET_ACCESS_KEY"), (aws.sessionToken, "AWS_SESSION_TOKEN"),
            ]
            for (origin, variable) in origins {
                switch origin {
                case .env(let name)?: if let value = environment[name] { values.append(value) }
                case .file(let path)?:
                    if case .success(let bytes) = SmallFile.read(path, limit: 1 << 16) {
                        values.append(String(decoding: bytes, as: UTF8.self).trimmingWhitespace())
                    }
                case nil: if let value = environment[variable] { values.append(value) }
                }
            }
        }
        return values.filter { !$0.isEmpty }
    }
}

extension Configuration {
    /// The placeholders' errors that need the whole file: one equal to a real credential of any
    /// route (the sandbox would hold the secret itself), and one value on two routes that send
    /// different credentials (a placeholder opens its own route only; two routes that send the same
    /// credential, as GitHub's API and git over HTTPS with one token, may share it: it stands for
    /// that one secret).
    static func placeholderProblems(_ routes: [RouteConfiguration], hasRoutes: Bool, environment: [String: String]) -> [ConfigurationError] {
        var problems: [ConfigurationError] = []
        let secrets = Set(routes.flatMap { $0.knownCredentialValues(environment: environment) })
        var routeOfValue: [String: Int] = [:]
        for (i, route) in routes.enumerated() {
            guard let placeholder = route.placeholder else { continue }
            let keyPath = (hasRoutes ? "routes[\(i)]." : "") + "placeholder"
            for caller in placeholder.callers {
                let who = placeholder.callersFile == nil ? "the placeholder" : "the placeholder of caller \(caller.name)"
                if secrets.contains(caller.value) {
                    problems.append(
                        ConfigurationError(keyPath: keyPath, reason: "\(who) is a real credential of this file; give the sandbox a placeholder instead"))
                }
                if let first = routeOfValue[caller.value], first != i, routes[first].credentials != route.credentials {
                    problems.append(
                        ConfigurationError(keyPath: keyPath, reason: "\(who) is also a placeholder of routes[\(first)]; a placeholder opens one route only"))
                } else {
                    routeOfValue[caller.value] = i
                }
            }
        }
        return problems
    }
}
