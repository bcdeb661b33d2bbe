import Foundation
import TestSupport
import Testing

/// `forward.request_buffering_path`: the folder `forward.request_buffering_disk` spools bodies in is
/// a setting of its own (docs/CONFIGURATION.md), by default `spool/` beside the store's file as it
/// always was; `check` shows it and applies the folder rules to it, `serve` spools there.
@Suite(.tags(.endToEnd), .timeLimit(.minutes(25))) struct RequestBufferingPathTests {
    /// A relative folder resolves against the configuration file's folder; the upload is spooled
    /// there, the folder made 0700, and nothing is spooled beside the store.
    @Test func aChunkedUploadBeyondMemoryIsSpooledInTheConfiguredFolder() throws {
        let f = try RequestBufferingTests.DjangoFixture(
            extra: "forward: {request_buffering: 64KiB, request_buffering_disk: 8MiB, request_buffering_path: uploads/spool}")
        let body = testBytes(count: 3_000_000, seed: 21)
        let seen = try f.upload(body)
        try seen.expectWhole(body)
        #expect(seen.content_length == String(body.count))
        let spool = f.proxy.directory.file("uploads/spool")
        let attributes = try FileManager.default.attributesOfItem(atPath: spool)
        #expect((attributes[.posixPermissions] as? Int) == 0o700)
        #expect(try FileManager.default.contentsOfDirectory(atPath: spool).isEmpty)
        #expect(!FileManager.default.fileExists(atPath: f.proxy.directory.file("state/spool")), "nothing spooled beside the store")
        try f.finish()
    }

    /// `check` refuses a configured folder that is not the process's own, naming the key that chose
    /// it, and shows the folder it takes.
    @Test func checkAppliesTheFolderRulesToTheConfiguredFolderAndShowsIt() throws {
        let dir = try TempDir()
        defer { dir.remove() }
        let bodies = dir.file("bodies")
        try FileManager.default.createDirectory(atPath: bodies, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o755])
        let config = try dir.write(
            "tokenproxy.yaml",
            """
            listen: 127.0.0.1:0
            upstream: http://127.0.0.1:9
            credentials: {type: static, token_env: E2E_TOKEN}
            forward: {request_buffering_disk: 8MiB, request_buffering_path: bodies}
            """)
        let refused = try ProxyProcess.run(args: ["check", "--config", config], env: ["E2E_TOKEN": e2eToken], timeout: 30)
        #expect(refused.status == 2, "\(refused.output)")
        #expect(refused.stderr.contains("forward.request_buffering_path: the spool folder \(bodies) has mode 0755"), "\(refused.stderr)")
        try FileManager.default.setAttributes([.posixPermissions: 0o700], ofItemAtPath: bodies)
        let accepted = try ProxyProcess.run(args: ["check", "--config", config], env: ["E2E_TOKEN": e2eToken], timeout: 30)
        #expect(accepted.status == 0, "\(accepted.output)")
        #expect(accepted.stdout.contains("forward.request_buffering_path: \(bodies)\n"), "\(accepted.stdout)")
    }

    /// Without the key, the folder is `spool/` beside the store's file, as before the key existed:
    /// with the file store and with the Redis store (beside `store.path`'s default).
    @Test(arguments: ["", "store: {backend: redis, url: \"redis://127.0.0.1:9/0\"}"])
    func checkShowsTheDefaultFolderBesideTheStore(store: String) throws {
        let dir = try TempDir()
        defer { dir.remove() }
        let config = try dir.write(
            "tokenproxy.yaml", staticTokenConfig(upstream: "http://127.0.0.1:9", workers: nil, more: "forward: {request_buffering_disk: 8MiB}\n\(store)"))
        let result = try ProxyProcess.run(args: ["check", "--config", config], env: ["E2E_TOKEN": e2eToken], timeout: 30)
        #expect(result.stdout.contains("forward.request_buffering_path: \(dir.file("state/spool"))\n"), "\(result.output)")
    }
}
