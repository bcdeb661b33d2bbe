import Foundation
import Testing

@testable import Sockets

/// The audit log's file (CONTRACT.md "Programs in a sandbox", "Audit log"): made 0600, appended,
/// never through a symbolic link, opened again at its path after a rotation.
@Suite struct AppendOnlyFileTests {
    static func file(_ mode: UInt32, owner: UInt32 = 1000, link: Bool = false) -> PathStatus {
        PathStatus(isSymbolicLink: link, isFolder: false, owner: owner, permissions: mode)
    }

    @Test func theProcesssOwnFileThatOnlyItWritesAndOthersCannotReadIsAccepted() {
        #expect(AppendOnlyFile.refusal(Self.file(0o600), isRegularFile: true, processOwner: 1000) == nil)
        #expect(AppendOnlyFile.refusal(Self.file(0o640), isRegularFile: true, processOwner: 1000) == nil, "logrotate's create 0640")
    }

    @Test(
        arguments: [
            (file(0o777, link: true), true, "is a symbolic link"),
            (file(0o600), false, "is not a regular file"),
            (file(0o600, owner: 0), true, "is owned by uid 0"),
            (file(0o644), true, "has mode 0644"),
            (file(0o660), true, "has mode 0660"),
        ] as [(PathStatus, Bool, String)])
    func anyOtherIsRefusedSayingWhy(_ status: PathStatus, _ regular: Bool, _ reason: String) throws {
        let refusal = try #require(AppendOnlyFile.refusal(status, isRegularFile: regular, processOwner: 1000))
        #expect(refusal.hasPrefix(reason + ": "), "\(refusal)")
    }

    @Test func linesAreAppendedTo0600AndARotatedFileIsMadeAgainAtItsPath() throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("append-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let path = folder + "/audit.jsonl"
        let file = AppendOnlyFile()
        try file.open(path)
        #expect(Array("one\n".utf8).withUnsafeBytes { file.append($0) })
        #expect(FileKind.mode(of: path) == 0o600)
        try FileManager.default.moveItem(atPath: path, toPath: path + ".1")
        #expect(Array("two\n".utf8).withUnsafeBytes { file.append($0) }, "still the moved file until it is opened again")
        try file.open(path)
        #expect(Array("three\n".utf8).withUnsafeBytes { file.append($0) })
        #expect(try String(contentsOfFile: path + ".1", encoding: .utf8) == "one\ntwo\n")
        #expect(try String(contentsOfFile: path, encoding: .utf8) == "three\n")
    }

    @Test func aSymbolicLinkIsNeverFollowed() throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("append-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        try FileManager.default.createSymbolicLink(atPath: folder + "/audit.jsonl", withDestinationPath: folder + "/elsewhere")
        #expect(throws: AtomicFile.Failure.self) { try AppendOnlyFile().open(folder + "/audit.jsonl") }
        #expect(!FileManager.default.fileExists(atPath: folder + "/elsewhere"))
        #expect(AppendOnlyFile.problem(at: folder + "/audit.jsonl")?.contains("is a symbolic link") == true)
    }
}
