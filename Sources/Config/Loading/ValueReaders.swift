import FoundationEssentials
import Sockets

/// What every section's parser shares while one file (or one entry of `routes:`) is read: the
/// file's folder, the environment, the errors and warnings found so far, and the readers of single
/// values that every section uses: addresses, URLs, paths, durations and secrets. A reference type,
/// so that each section's `parse` records into the same lists, in the order the keys are read.
final class LoadContext {
    let baseDirectory: String
    let environment: [String: String]
    var warnings: [String] = []
    let found = ErrorList()
    /// What `serve` needs at start that the load itself lets pass (a seed's variable that is not
    /// set, a file read only later that is there but unreadable): `check` reports each as an error
    /// (CONTRACT.md, `check`), while `serve` starts and meets it when it reads.
    let startProblems = ErrorList()

    init(baseDirectory: String, environment: [String: String]) {
        self.baseDirectory = baseDirectory
        self.environment = environment
    }

    func resolve(_ path: String) -> String { Paths.resolve(path, against: baseDirectory) }

    /// A non-empty environment value, or nil.
    func env(_ name: String) -> String? {
        guard let value = environment[name], !value.isEmpty else { return nil }
        return value
    }

    func parseUpstream(_ value: String, keyPath: String) throws -> UpstreamURL {
        do {
            return try AddressParser.upstream(value)
        } catch let problem {
            throw ConfigurationError(keyPath: keyPath, reason: problem.reason)
        }
    }

    func parseListen(_ value: String, keyPath: String, allowRemote: Bool) throws -> ListenAddress {
        let address: ListenAddress
        do {
            address = try AddressParser.listen(value, baseDirectory: baseDirectory)
        } catch let problem {
            throw ConfigurationError(keyPath: keyPath, reason: problem.reason)
        }
        if !allowRemote, !AddressParser.isLoopback(address) {
            throw ConfigurationError(
                keyPath: keyPath,
                reason: "\(address) is not a loopback address; set allow_remote: true to accept connections from other machines")
        }
        return address
    }

    func checkURL(_ section: YAMLSection, _ key: String) throws -> String? {
        guard let value = try section.string(key) else { return nil }
        do {
            try AddressParser.checkEndpoint(value)
        } catch let problem {
            throw ConfigurationError(keyPath: section.path(key), reason: problem.reason)
        }
        return value.trimmingWhitespace()
    }

    func pathValue(_ section: YAMLSection, _ key: String) throws -> String? {
        guard let value = try section.nonEmptyString(key) else { return nil }
        guard !value.contains("\0") else { throw ConfigurationError(keyPath: section.path(key), reason: "contains a NUL byte") }
        return resolve(value)
    }

    func positiveDuration(_ section: YAMLSection, _ key: String) throws -> Double? {
        guard let value = try section.duration(key) else { return nil }
        guard value > 0 else { throw ConfigurationError(keyPath: section.path(key), reason: "must be more than 0") }
        return value
    }

    /// A path that must name a readable file now (a key or certificate read at start).
    func existingFile(_ section: YAMLSection, _ key: String) throws -> String? {
        guard let path = try pathValue(section, key) else { return nil }
        guard let kind = Paths.kind(of: path) else {
            throw ConfigurationError(keyPath: section.path(key), reason: "cannot read \(path): no such file")
        }
        guard kind != .folder else { throw ConfigurationError(keyPath: section.path(key), reason: "cannot read \(path): it is a folder") }
        try readable(path, section, key)
        return path
    }

    /// A path read only after start (a token or assertion a platform writes, a CA bundle): it need not
    /// be there yet, but one that is there and cannot be read is a start problem.
    func laterFile(_ section: YAMLSection, _ key: String) throws -> String? {
        guard let path = try pathValue(section, key) else { return nil }
        if let problem = FileAccess.readProblem(path) { startProblems.record(ConfigurationError(keyPath: section.path(key), reason: problem)) }
        return path
    }

    /// A file that is there must be readable by the user this process runs as (a Secret that only
    /// root may read; CONTRACT.md `check`); one that is not there yet is the caller's matter.
    func readable(_ path: String, _ section: YAMLSection, _ key: String) throws {
        if let problem = FileAccess.readProblem(path) { throw ConfigurationError(keyPath: section.path(key), reason: problem) }
    }

    /// The path of a private key (signing, DPoP, a TLS key, a store key): refused when
    /// `KeyFilePermissions` refuses it, since the key is then as good as others' (as `ssh` refuses
    /// such a key). `mustExist`: a missing file is an error too; otherwise only an existing one is checked.
    func privateKeyFile(_ section: YAMLSection, _ key: String, mustExist: Bool = true) throws -> String? {
        guard let path = try mustExist ? existingFile(section, key) : pathValue(section, key) else { return nil }
        if let problem = KeyFilePermissions.problem(path) { throw ConfigurationError(keyPath: section.path(key), reason: problem) }
        try readable(path, section, key)
        return path
    }

    // MARK: - Secrets

    /// Reads `<base>` (literal, only when `literal` is true), `<base>_env` or `<base>_file`; at most one may be set.
    /// An unset or empty variable is an error unless `unsetEnvIsAbsent`; a named file must be readable.
    func readSecret(_ section: YAMLSection, _ base: String, literal: Bool, unsetEnvIsAbsent: Bool = false) throws -> Secret? {
        let keys = (literal ? [base] : []) + ["\(base)_env", "\(base)_file"]
        let present = keys.filter { section.has($0) }
        if present.count > 1 {
            throw ConfigurationError(
                keyPath: section.path(present[1]),
                reason: "set only one of \(keys.joined(separator: ", ")); \(present.joined(separator: " and ")) are both set")
        }
        guard let key = present.first else { return nil }
        let keyPath = section.path(key)
        if key == base {
            guard let value = try section.string(key), !value.isEmpty else {
                throw ConfigurationError(keyPath: keyPath, reason: "must not be empty")
            }
            warnings.append("\(keyPath): a literal secret in the config file; prefer \(base)_env or \(base)_file")
            return Secret(value: value, origin: .literal)
        }
        if key.hasSuffix("_env") {
            let name = try section.nonEmptyString(key)!.trimmingWhitespace()
            guard !name.contains("="), !name.contains("\0") else {
                throw ConfigurationError(keyPath: keyPath, reason: "is not a valid environment variable name")
            }
            guard let value = environment[name], !value.isEmpty else {
                let state = environment[name] == nil ? "is not set" : "is empty"
                let problem = ConfigurationError(keyPath: keyPath, reason: "the environment variable \(name) \(state)")
                guard unsetEnvIsAbsent else { throw problem }
                startProblems.record(problem)
                return nil
            }
            return Secret(value: value, origin: .env(name))
        }
        let path = try pathValue(section, key)!
        return Secret(value: try readSecretFile(path, keyPath: keyPath), origin: .file(path))
    }

    /// The file's text without one trailing newline (LF or CRLF).
    func readSecretFile(_ path: String, keyPath: String) throws -> String {
        func fail(_ why: String) -> ConfigurationError {
            ConfigurationError(keyPath: keyPath, reason: "cannot read \(path): \(why)")
        }
        guard let kind = Paths.kind(of: path) else { throw fail("no such file") }
        guard kind != .folder else { throw fail("it is a folder") }
        var bytes: [UInt8]
        switch SmallFile.read(path, limit: 1 << 20) {
        case .success(let content): bytes = content
        case .failure(let failure) where failure.code == nil: throw fail("larger than 1MiB, too large for a secret")
        case .failure(let failure) where failure.call == "open": throw fail("permission denied or unreadable")
        case .failure: throw fail("read failed")
        }
        if bytes.last == 0x0A {
            bytes.removeLast()
            if bytes.last == 0x0D { bytes.removeLast() }
        }
        guard let text = String(bytes: bytes, encoding: .utf8) else { throw fail("not UTF-8 text") }
        guard !text.isEmpty else { throw ConfigurationError(keyPath: keyPath, reason: "the file \(path) is empty") }
        return text
    }
}
