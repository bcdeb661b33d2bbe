import Foundation
import Glibc
import Synchronization
import Testing

@testable import Credentials

@Suite("file store")
struct FileTokenStoreTests {
    func session() -> StoredSession {
        StoredSession(
            kind: "oauth2_refresh", accessToken: "store-access", refreshToken: "store-refresh", expiresAt: 1_900_000_000,
            issuedAt: 1_899_996_400, subject: "user-1")
    }

    @Test("a saved session loads back, in a 0600 file inside a new 0700 folder")
    func roundTrip() throws {
        let folder = TemporaryFolder()
        defer { folder.remove() }
        let path = folder.file("state/tokens.json")
        let store = FileTokenStore(path: path, logger: LogCapture().logger())
        #expect(try store.load() == nil)
        try store.save(session())
        #expect(try store.load() == session())
        #expect(try FileTokenStore(path: path, logger: LogCapture().logger()).load() == session())
        var info = stat()
        #expect(stat(path, &info) == 0)
        #expect(info.st_mode & 0o777 == 0o600)
        #expect(stat(folder.file("state"), &info) == 0)
        #expect(info.st_mode & 0o777 == 0o700)
        let text = try String(contentsOfFile: path, encoding: .utf8)
        #expect(text.contains("\"refresh_token\""))
    }

    @Test("an unreadable store is moved aside and read as no session")
    func corruptStoreMovedAside() throws {
        let folder = TemporaryFolder()
        defer { folder.remove() }
        folder.write("tokens.json", "{not json")
        let logs = LogCapture()
        let store = FileTokenStore(path: folder.file("tokens.json"), logger: logs.logger(), now: { 1_800_000_000 })
        #expect(try store.load() == nil)
        #expect(FileManager.default.fileExists(atPath: folder.file("tokens.json.corrupt-1800000000")))
        #expect(!FileManager.default.fileExists(atPath: folder.file("tokens.json")))
        #expect(logs.count(level: .warning, containing: "moved to") == 1)
    }

    @Test("a change by another process is noticed, the store's own writes are not")
    func changeDetection() throws {
        let folder = TemporaryFolder()
        defer { folder.remove() }
        let path = folder.file("tokens.json")
        let mine = FileTokenStore(path: path, logger: LogCapture().logger())
        let other = FileTokenStore(path: path, logger: LogCapture().logger())
        try mine.save(session())
        #expect(!mine.hasChanged())
        var next = session()
        next.accessToken = "store-access-2"
        try other.save(next)
        #expect(mine.hasChanged())
        #expect(try mine.load()?.accessToken == "store-access-2")
        #expect(!mine.hasChanged())
        try other.remove()
        #expect(mine.hasChanged())
        #expect(try mine.load() == nil)
        #expect(!mine.hasChanged())
    }

    @Test("the exclusive lock keeps a second holder out until the first lets go")
    func exclusiveLock() throws {
        let folder = TemporaryFolder()
        defer { folder.remove() }
        let path = folder.file("tokens.json")
        let first = FileTokenStore(path: path, logger: LogCapture().logger())
        let events = Mutex<[String]>([])
        try first.withExclusiveLock {
            events.withLock { $0.append("first in") }
            Thread {
                let second = FileTokenStore(path: path, logger: LogCapture().logger())
                _ = try? second.withExclusiveLock { events.withLock { $0.append("second in") } }
            }.start()
            // A negative check needs a window: the second holder must not get in while the first holds.
            usleep(200_000)
            events.withLock { $0.append("first out") }
        }
        #expect(eventually { events.withLock { $0.count } == 3 })
        #expect(events.withLock { $0 } == ["first in", "first out", "second in"])
    }
}
