import Config
import Testing

@testable import ProxyCore

/// A reload's decisions (CONTRACT.md "Reload without a restart"): what waits for a restart, how a
/// refused file is reported, and when the file watcher reloads; without files or a server.
@Suite struct ReloadRulesTests {
    static func configuration(_ yaml: String) throws -> Configuration {
        try ConfigurationLoader.parse(
            yaml: "upstream: https://api.example.com\ncredentials: {type: static, token_env: T}\n" + yaml, baseDirectory: "/", environment: ["T": "t"]
        ).configuration
    }

    @Test func workersAndAdminKeepTheirOldValuesAndAreNamed() throws {
        let old = try Self.configuration("listen: 127.0.0.1:8080\nworkers: 2\nadmin: {listen: 127.0.0.1:9901}\n")
        let new = try Self.configuration("listen: 127.0.0.1:8081\nworkers: 4\nadmin: {listen: 127.0.0.1:9902}\n")
        let (kept, waiting) = ReloadRules.keepingRestartOnly(new, old: old)
        #expect(waiting == ["workers", "admin"])
        #expect(kept.workers == 2)
        #expect(kept.admin == old.admin)
        // Everything else is the new file's.
        #expect(kept.listen == new.listen)
    }

    @Test func aFileThatChangesNeitherWaitsForNothing() throws {
        let old = try Self.configuration("listen: 127.0.0.1:8080\nworkers: 2\n")
        let new = try Self.configuration("listen: 127.0.0.1:8081\nworkers: 2\n")
        let (kept, waiting) = ReloadRules.keepingRestartOnly(new, old: old)
        #expect(waiting.isEmpty)
        #expect(kept.listen == new.listen && kept.admin == nil)
    }

    @Test func aRefusedFileGivesOneLinePerErrorWithItsKey() {
        var error = ConfigurationError(keyPath: "listen", reason: "is not host:port")
        error.further = [ConfigurationError(keyPath: "", reason: "the file is empty")]
        #expect(ReloadRules.errorLines(error) == ["listen: is not host:port", "the file is empty"])
    }

    /// Signatures are plain numbers here: a test's "file system" is a dictionary.
    @Test func aChangedConfigurationFileReloadsOnlyWithWatchConfig() {
        let disk: [String: Int] = ["/secret": 1]
        for watches in [true, false] {
            var watch = FileWatch<Int>(watchesConfiguration: watches, configuration: 10, files: ["/secret"], signature: { disk[$0] })
            #expect(watch.look(configuration: 10, signature: { disk[$0] }) == FileWatch.Change.none)
            #expect(watch.look(configuration: 11, signature: { disk[$0] }) == (watches ? .configuration : FileWatch.Change.none))
        }
    }

    @Test func aConfigurationFileThatCannotBeSeenIsNoChange() {
        var watch = FileWatch<Int>(watchesConfiguration: true, configuration: 10, files: [], signature: { _ in nil })
        #expect(watch.look(configuration: nil, signature: { _ in nil }) == FileWatch.Change.none)
    }

    @Test func theConfigurationIsComparedWithItsLastReadNotItsLastLook() {
        var watch = FileWatch<Int>(watchesConfiguration: true, configuration: 10, files: [], signature: { _ in nil })
        #expect(watch.look(configuration: 11, signature: { _ in nil }) == .configuration)
        // Until a reload reads it, the same change is seen again.
        #expect(watch.look(configuration: 11, signature: { _ in nil }) == .configuration)
        watch.configurationRead(11)
        #expect(watch.look(configuration: 11, signature: { _ in nil }) == FileWatch.Change.none)
    }

    @Test func aChangedSecretFileRereadsOnceEvenWhenItVanished() {
        var disk: [String: Int] = ["/a": 1, "/b": 2]
        var watch = FileWatch<Int>(watchesConfiguration: false, configuration: 10, files: ["/a", "/b"], signature: { disk[$0] })
        disk["/b"] = 3
        #expect(watch.look(configuration: 10, signature: { disk[$0] }) == .files)
        #expect(watch.look(configuration: 10, signature: { disk[$0] }) == FileWatch.Change.none)
        disk["/a"] = nil
        #expect(watch.look(configuration: 10, signature: { disk[$0] }) == .files)
        #expect(watch.look(configuration: 10, signature: { disk[$0] }) == FileWatch.Change.none)
        // It comes back: a change again.
        disk["/a"] = 4
        #expect(watch.look(configuration: 10, signature: { disk[$0] }) == .files)
    }

    @Test func aChangedConfigurationWinsOverChangedFiles() {
        var disk: [String: Int] = ["/a": 1]
        var watch = FileWatch<Int>(watchesConfiguration: true, configuration: 10, files: ["/a"], signature: { disk[$0] })
        disk["/a"] = 2
        #expect(watch.look(configuration: 11, signature: { disk[$0] }) == .configuration)
    }

    @Test func aReloadWatchesTheFilesOfTheNewConfiguration() {
        var disk: [String: Int] = ["/a": 1, "/c": 5]
        var watch = FileWatch<Int>(watchesConfiguration: false, configuration: 10, files: ["/a"], signature: { disk[$0] })
        watch.filesRead(["/c"], signature: { disk[$0] })
        disk["/a"] = 2
        #expect(watch.look(configuration: 10, signature: { disk[$0] }) == FileWatch.Change.none)
        disk["/c"] = 6
        #expect(watch.look(configuration: 10, signature: { disk[$0] }) == .files)
    }
}
