/// `log:` (CONTRACT.md "The configuration file").
public struct LogConfiguration: Sendable, Equatable {
    public enum Level: String, Sendable, Equatable, CaseIterable { case error, warn, info, debug }
    public enum Format: String, Sendable, Equatable, CaseIterable { case text, json }
    public var level: Level = .info
    public var format: Format = .text
    public var accessLog: Bool = false
    public init() {}
}

extension LogConfiguration {
    static func parse(_ s: YAMLSection, in load: LoadContext) -> LogConfiguration {
        load.found.collect { try s.rejectUnknownKeys(Keys.sections["log"]!) }
        var l = LogConfiguration()
        if let value = load.found.collect({ try s.choice("level", LogConfiguration.Level.self) }) { l.level = value }
        if let value = load.found.collect({ try s.choice("format", LogConfiguration.Format.self) }) { l.format = value }
        if let value = load.found.collect({ try s.bool("access_log") }) { l.accessLog = value }
        return l
    }
}
