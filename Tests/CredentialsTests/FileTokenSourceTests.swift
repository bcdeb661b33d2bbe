import Config
import Foundation
import Testing

@testable import Credentials

@Suite("file source")
struct FileTokenSourceTests {
    func source(_ path: String) throws -> FileTokenSource {
        try FileTokenSource(FileTokenConfiguration(path: path))
    }

    @Test("the token is the file's content without surrounding whitespace")
    func trimmedContent() throws {
        let folder = TemporaryFolder()
        defer { folder.remove() }
        folder.write("token", "  file-token-1\r\n\n")
        #expect(try source(folder.file("token")).fetch(current: nil) == IssuedToken(accessToken: "file-token-1"))
    }

    @Test("a rewritten file is noticed, an untouched one is not")
    func changeDetection() throws {
        let folder = TemporaryFolder()
        defer { folder.remove() }
        folder.write("token", "one")
        let source = try source(folder.file("token"))
        #expect(!source.inputChanged())
        folder.write("token", "two-two")
        #expect(source.inputChanged())
        #expect(!source.inputChanged())
        try FileManager.default.removeItem(atPath: folder.file("token"))
        #expect(source.inputChanged())
        #expect(!source.inputChanged())
    }

    @Test("a vanished file is a passing failure")
    func vanishedFile() throws {
        let folder = TemporaryFolder()
        defer { folder.remove() }
        let source = try source(folder.file("absent"))
        #expect(throws: TokenSourceError.self) { try source.fetch(current: nil) }
    }

    @Test("an empty file or one with a broken token is a passing failure that does not quote it")
    func emptyOrBrokenFile() throws {
        let folder = TemporaryFolder()
        defer { folder.remove() }
        let source = try source(folder.file("token"))
        for content in ["", " \n ", "secret one\n", "secret\u{1}"] {
            folder.write("token", content)
            do {
                _ = try source.fetch(current: nil)
                Issue.record("expected a failure for \(content.debugDescription)")
            } catch let error as TokenSourceError {
                guard case .passing(let reason, _) = error else {
                    Issue.record("expected a passing failure")
                    continue
                }
                #expect(!reason.contains("secret"))
            }
        }
    }

    @Test("a file source with an empty path is a configuration error")
    func missingPath() {
        #expect(throws: ConfigurationError.self) { try FileTokenSource(FileTokenConfiguration(path: "")) }
    }
}
