import Glibc
import Testing

@testable import Sockets

@Suite("syscalls and small files")
struct SyscallTests {
    @Test("a call interrupted by a signal (EINTR) is made again; another failure is thrown with its errno")
    func retryingInterruptedCalls() throws {
        var calls = 0
        let answer = try Syscall.retrying("test") {
            calls += 1
            if calls < 3 {
                errno = EINTR
                return -1
            }
            return 7
        }
        #expect(answer == 7 && calls == 3)
        #expect(throws: SocketError.self) {
            try Syscall.retrying("test") {
                errno = EACCES
                return -1
            }
        }
        do {
            _ = try Syscall.retrying("open") {
                errno = ENOENT
                return -1
            }
        } catch {
            #expect(error.errno == ENOENT && error.call == "open")
            #expect(error.description == "open: No such file or directory")
        }
    }

    @Test("socket reads and writes: bytes, would block, closed")
    func socketReadsAndWrites() throws {
        var pair: [Int32] = [-1, -1]
        #expect(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0, &pair) == 0)
        defer { Syscall.close(pair[0]) }
        var buffer = [UInt8](repeating: 0, count: 16)
        #expect(buffer.withUnsafeMutableBytes { Syscall.read(pair[0], $0) } == .wouldBlock)
        #expect(Array("hello".utf8).withUnsafeBytes { Syscall.write(pair[1], $0) } == .done(5))
        #expect(try Syscall.waitReadable(pair[0], milliseconds: 1000))
        #expect(buffer.withUnsafeMutableBytes { Syscall.read(pair[0], $0) } == .done(5))
        #expect(Array(buffer[0..<5]) == Array("hello".utf8))
        #expect(try !Syscall.waitReadable(pair[0], milliseconds: 0))
        Syscall.close(pair[1])
        #expect(buffer.withUnsafeMutableBytes { Syscall.read(pair[0], $0) } == .closed)
        // Writing to a closed peer is `.closed`, never a SIGPIPE (which would end the test process).
        #expect(Array("x".utf8).withUnsafeBytes { Syscall.write(pair[0], $0) } == .closed)
    }

    @Test("a small file is read whole; a missing one, a folder and one over the limit are failures that say so")
    func smallFiles() throws {
        let folder = "/tmp/tokenproxy-sockets-test-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        try AtomicFile.ensureFolder(folder + "/inner", mode: 0o700)
        defer {
            _ = unlink(folder + "/inner/file")
            _ = rmdir(folder + "/inner")
            _ = rmdir(folder)
        }
        let path = folder + "/inner/file"
        let content = (0..<10_000).map { UInt8(truncatingIfNeeded: $0) }
        try AtomicFile.write(content, to: path, mode: 0o600)
        #expect(FileKind.mode(of: path) == 0o600)
        #expect(FileKind.mode(of: folder) == 0o700)
        #expect(FileKind.of(path) == .other && FileKind.of(folder) == .folder && FileKind.of(folder + "/none") == nil)
        #expect(try SmallFile.read(path, limit: 10_000).get() == content)
        guard case .failure(let large) = SmallFile.read(path, limit: 9_999) else {
            Issue.record("a file over the limit should be refused")
            return
        }
        #expect(large.code == nil && large.description == "larger than 9 KiB")
        guard case .failure(let missing) = SmallFile.read(folder + "/none", limit: 10) else {
            Issue.record("a missing file should be a failure")
            return
        }
        #expect(missing.isMissing && missing.call == "open")
        guard case .failure(let isFolder) = SmallFile.read(folder, limit: 10) else {
            Issue.record("a folder should be a failure")
            return
        }
        #expect(isFolder.code == EISDIR && isFolder.call == "read")
        let before = FileSignature.of(path)
        try AtomicFile.write([1, 2, 3], to: path)
        #expect(FileSignature.of(path) != before)
        #expect(try SmallFile.read(path, limit: 10).get() == [1, 2, 3])
        let locked = try FileLock.withExclusiveLock(folder + "/inner/file") { 42 }
        #expect(locked == 42)
        try AtomicFile.remove(path)
        try AtomicFile.remove(path)  // a missing file is fine
        #expect(FileSignature.of(path) == nil)
    }

    @Test("environment variables and the wall clock, without Foundation")
    func environmentAndClock() {
        #expect(Syscall.environment("PATH") != nil)
        #expect(Syscall.environment("TOKENPROXY_SURELY_UNSET_\(getpid())") == nil)
        let now = Syscall.wallClock()
        #expect(now > 1_700_000_000)
        let parts = Syscall.wallClockParts()
        #expect(abs(Double(parts.seconds) - now) < 5 && (0..<1000).contains(parts.milliseconds))
    }
}
