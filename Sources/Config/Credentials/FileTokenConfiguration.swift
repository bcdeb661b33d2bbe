/// `type: file`: the token is the content of a file, re-read when it changes.
public struct FileTokenConfiguration: Sendable, Equatable {
    public var path: String
    public init(path: String) { self.path = path }
}

extension Keys {
    static let file = ["path"]
}

extension FileTokenConfiguration {
    static func parse(_ s: YAMLSection, errorsBefore: Int, in load: LoadContext) -> FileTokenConfiguration? {
        let path = load.found.collect { try load.laterFile(s, "path") }
        guard load.found.errors.count == errorsBefore else { return nil }
        guard let path else {
            load.found.record(ConfigurationError.missingCredential("path", for: .file, " (the file that holds the token)"))
            return nil
        }
        return FileTokenConfiguration(path: path)
    }
}

extension FileTokenConfiguration {
    func describe(_ line: (String, String?) -> Void) {
        line("path", path)
    }
}
