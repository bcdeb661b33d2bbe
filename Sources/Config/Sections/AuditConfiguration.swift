/// `audit:` (CONTRACT.md "Programs in a sandbox", "Audit log"): one JSON line per request, CONNECT
/// decision and credential event, appended to a file of the process's own (mode 0600), or stderr.
public struct AuditConfiguration: Sendable, Equatable {
    /// Where the lines go.
    public enum Destination: Sendable, Equatable, CustomStringConvertible {
        /// An absolute path (resolved against the configuration's folder).
        case file(String)
        /// `"-"`: the process's stderr.
        case standardError

        public var description: String {
            switch self {
            case .file(let path): return path
            case .standardError: return "- (stderr)"
            }
        }
    }

    public var destination: Destination

    public init(destination: Destination) {
        self.destination = destination
    }
}

extension AuditConfiguration {
    static let keys = ["path"]

    static func parse(_ s: YAMLSection, in load: LoadContext) -> AuditConfiguration? {
        load.found.collect { try s.rejectUnknownKeys(keys) }
        return load.found.collect {
            guard let raw = try s.nonEmptyString("path") else {
                throw ConfigurationError(keyPath: s.path("path"), reason: "required when audit: is present (a file, or \"-\" for stderr)")
            }
            if raw == "-" { return AuditConfiguration(destination: .standardError) }
            guard let path = try load.pathValue(s, "path") else { return nil }
            return AuditConfiguration(destination: .file(path))
        }
    }
}
