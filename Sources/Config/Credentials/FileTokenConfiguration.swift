/// `type: file`: the token is the content of a file, re-read when it changes.
public struct FileTokenConfiguration: Sendable, Equatable {
    public var path: String
    public init(path: String) { self.path = path }
}

extension Keys {
    static let file = ["path"]
}

extension Builder {
    mutating func parseFileToken(_ s: YAMLSection, errorsBefore: Int) -> FileTokenConfiguration? {
        let path = found.collect { try pathValue(s, "path") }
        guard found.errors.count == errorsBefore else { return nil }
        guard let path else {
            found.record(missingCredential("path", for: .file, " (the file that holds the token)"))
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
