import Glibc
import Synchronization

/// Small files read whole (the configuration and its `*_file` secrets, token files, the session
/// store, cgroup limits): the one reader, with a size limit.
public enum SmallFile {
    public struct Failure: Error, Sendable, CustomStringConvertible {
        public var description: String
        /// The errno of the failed call (open or read); nil when the file was larger than the limit.
        public var code: Int32?
        /// The call that failed ("open", "read"); nil when the file was too large.
        public var call: String?
        /// Nothing at the path (ENOENT).
        public var isMissing: Bool { code == ENOENT }
    }

    /// The whole content, or a failure; a file larger than `limit` bytes is one.
    public static func read(_ path: String, limit: Int) -> Result<[UInt8], Failure> {
        let fd: Int32
        do {
            fd = Int32(try Syscall.retrying("open") { Int(open(path, O_RDONLY | O_CLOEXEC)) })
        } catch {
            return .failure(Failure(description: Syscall.describe(errno: error.errno), code: error.errno, call: "open"))
        }
        defer { Syscall.close(fd) }
        var content: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let (count, failure) = buffer.withUnsafeMutableBytes { raw in
                Syscall.uninterrupted { Glibc.read(fd, raw.baseAddress, raw.count) }
            }
            if count < 0 {
                return .failure(Failure(description: Syscall.describe(errno: failure), code: failure, call: "read"))
            }
            if count == 0 { break }
            content.append(contentsOf: buffer[0..<count])
            if content.count > limit {
                let size = limit >= 1 << 20 ? "\(limit >> 20) MiB" : "\(limit / 1024) KiB"
                return .failure(Failure(description: "larger than \(size)", code: nil, call: nil))
            }
        }
        return .success(content)
    }
}

/// What is at a path, after following symlinks (stat(2)).
public enum FileKind: Sendable, Equatable {
    case folder
    case other

    /// nil when nothing is there (or it cannot be stat'ed).
    public static func of(_ path: String) -> FileKind? {
        var info = stat()
        guard stat(path, &info) == 0 else { return nil }
        return info.st_mode & S_IFMT == S_IFDIR ? .folder : .other
    }

    /// The permission bits of what is at `path` (after symlinks); nil when nothing is there.
    public static func mode(of path: String) -> UInt32? {
        var info = stat()
        guard stat(path, &info) == 0 else { return nil }
        return UInt32(info.st_mode & 0o7777)
    }
}

/// Who may read a private key file: its permission bits and its owner, after symlinks (a Kubernetes
/// Secret's files are links into `..data`). The one rule for every private key file the configuration
/// names (CONTRACT.md "HTTPS for clients"): others may never read it, and its group only when root
/// owns it, which is what a Secret mounted with `fsGroup` gives (0440, root, the pod's group) and
/// what PostgreSQL accepts of its own key.
public struct KeyFilePermissions: Equatable, Sendable {
    public var mode: UInt32
    public var owner: UInt32

    public init(mode: UInt32, owner: UInt32) {
        self.mode = mode
        self.owner = owner
    }

    /// The permissions of what is at `path` (stat(2), so after symlinks); nil when nothing is there.
    public static func of(_ path: String) -> KeyFilePermissions? {
        var info = stat()
        guard stat(path, &info) == 0 else { return nil }
        return KeyFilePermissions(mode: UInt32(info.st_mode & 0o7777), owner: UInt32(info.st_uid))
    }

    /// Why the key is refused; nil when it is accepted.
    public var refusal: String? {
        if mode & 0o004 != 0 { return "others may read it" }
        if mode & 0o040 != 0 && owner != 0 { return "its group may read it and root does not own it" }
        return nil
    }

    /// The refusal as an error's reason, naming the file at `path`, its mode and its owner; nil when
    /// the key is accepted.
    public func reason(for path: String) -> String? {
        guard let refusal else { return nil }
        let octal = "0" + String(mode & 0o777, radix: 8)
        return "\(path) (mode \(octal), owner uid \(owner)): \(refusal); chmod 600 it "
            + "(a key owned by root may be 0440, as a Kubernetes Secret mounted with fsGroup is)"
    }

    /// The refusal of the key file at `path`; nil when it is accepted or nothing is there (a missing
    /// file is the caller's matter).
    public static func problem(_ path: String) -> String? { of(path)?.reason(for: path) }
}

/// What this process may do with a path, asked of the kernel as the user it runs as (access(2)), so
/// that `check` finds what `serve` would meet at start without opening or making anything.
public enum FileAccess {
    /// Why a file cannot be made at `path` (its folder made first when missing, as the store and the
    /// made CA are); nil when it can. A folder that exists must take new files; a missing one, its
    /// nearest existing parent.
    public static func creationProblem(_ path: String) -> String? {
        var folder = AtomicFile.parentFolder(of: path)
        var info = stat()
        while stat(folder, &info) != 0 {
            // Only a folder that is not there is made; one that cannot be reached (EACCES) stays so.
            guard errno == ENOENT else { return "cannot reach \(folder) as uid \(getuid()): \(Syscall.describe(errno: errno))" }
            let parent = AtomicFile.parentFolder(of: folder)
            if parent == folder { break }
            folder = parent
        }
        guard info.st_mode & S_IFMT == S_IFDIR else { return "\(folder) is not a folder" }
        guard access(folder, W_OK | X_OK) != 0 else { return nil }
        return "cannot create files in \(folder) as uid \(getuid()): \(Syscall.describe(errno: errno))"
    }

    /// The reason a file that is there cannot be read, for an error; nil when it can or is not there.
    public static func readProblem(_ path: String) -> String? {
        guard FileKind.of(path) != nil, access(path, R_OK) != 0 else { return nil }
        return "cannot read \(path) as uid \(getuid()): \(Syscall.describe(errno: errno))"
    }
}

/// What tells a rewritten file from an untouched one without reading it.
public struct FileSignature: Equatable, Sendable {
    var device: UInt64
    var inode: UInt64
    var size: Int64
    var modifiedSeconds: Int
    var modifiedNanoseconds: Int
    var changedSeconds: Int
    var changedNanoseconds: Int

    /// nil when the file cannot be stat'ed (missing, no permission).
    public static func of(_ path: String) -> FileSignature? {
        var info = stat()
        guard stat(path, &info) == 0 else { return nil }
        return FileSignature(
            device: UInt64(info.st_dev),
            inode: UInt64(info.st_ino),
            size: Int64(info.st_size),
            modifiedSeconds: Int(info.st_mtim.tv_sec),
            modifiedNanoseconds: Int(info.st_mtim.tv_nsec),
            changedSeconds: Int(info.st_ctim.tv_sec),
            changedNanoseconds: Int(info.st_ctim.tv_nsec)
        )
    }
}

/// Replaces a file's content so that a reader sees the old content or the new, never a mix: a temp
/// file in the same folder (mode 0600 from the start), write, fsync, rename over the target, fsync the
/// folder. Used by the sink and the file store.
public enum AtomicFile {
    public struct Failure: Error, Sendable, CustomStringConvertible {
        public var description: String
    }

    public static func write(_ bytes: [UInt8], to path: String, mode: UInt32 = 0o600) throws {
        let folder = parentFolder(of: path)
        let name = String(path.split(separator: "/", omittingEmptySubsequences: false).last ?? "")
        let temporary = "\(folder)/.\(name).tmp-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        func failure(_ what: String, _ error: SocketError) -> Failure {
            Failure(description: "\(what): \(Syscall.describe(errno: error.errno))")
        }
        let fd: Int32
        do {
            fd = Int32(try Syscall.retrying("open") { Int(open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode_t(mode))) })
        } catch {
            throw failure("cannot create a temporary file in \(folder)", error)
        }
        var renamed = false
        defer { if !renamed { unlink(temporary) } }
        do {
            defer { Syscall.close(fd) }
            // The umask may have taken bits away; never more than `mode` in any case.
            do { _ = try Syscall.retrying("fchmod") { Int(fchmod(fd, mode_t(mode))) } } catch { throw failure("chmod \(temporary)", error) }
            let written = bytes.withUnsafeBytes { buffer in Result { () throws(SocketError) in try Syscall.writeAll(fd, buffer) } }
            if case .failure(let error) = written { throw failure("write \(temporary)", error) }
            do { _ = try Syscall.retrying("fsync") { Int(fsync(fd)) } } catch { throw failure("fsync \(temporary)", error) }
        }
        do { _ = try Syscall.retrying("rename") { Int(rename(temporary, path)) } } catch { throw failure("rename to \(path)", error) }
        renamed = true
        syncFolder(folder)
    }

    /// Removes the file and makes the removal durable; a missing file is fine.
    public static func remove(_ path: String) throws {
        if unlink(path) != 0 && errno != ENOENT {
            throw Failure(description: "remove \(path): \(Syscall.describe(errno: errno))")
        }
        syncFolder(parentFolder(of: path))
    }

    /// Moves `path` to `target` (rename(2)); the text of the failure otherwise.
    public static func move(_ path: String, to target: String) -> String? {
        rename(path, target) == 0 ? nil : Syscall.describe(errno: errno)
    }

    /// Creates the folder (and its parents) with `mode` when missing; an existing folder keeps its mode.
    public static func ensureFolder(_ folder: String, mode: UInt32 = 0o700) throws {
        var info = stat()
        if stat(folder, &info) == 0 { return }
        let parent = parentFolder(of: folder)
        if parent != folder { try ensureFolder(parent, mode: mode) }
        if mkdir(folder, mode_t(mode)) != 0 && errno != EEXIST {
            throw Failure(description: "mkdir \(folder): \(Syscall.describe(errno: errno))")
        }
    }

    public static func parentFolder(of path: String) -> String {
        guard let slash = path.lastIndex(of: "/") else { return "." }
        if slash == path.startIndex { return "/" }
        return String(path[..<slash])
    }

    private static func syncFolder(_ folder: String) {
        guard let fd = try? Syscall.retrying("open", { Int(open(folder, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) }) else { return }
        _ = try? Syscall.retrying("fsync") { Int(fsync(Int32(fd))) }
        Syscall.close(Int32(fd))
    }
}

/// An exclusive `flock` on a lock file, held while a body runs: the file store's cross-process lock.
public enum FileLock {
    /// Runs `body` holding the lock on `path` (created 0600 when missing); waits for another holder.
    /// Throws `SocketError` when the file cannot be opened or locked, and what `body` throws.
    public static func withExclusiveLock<T>(_ path: String, _ body: () throws -> T) throws -> T {
        let fd = Int32(try Syscall.retrying("open") { Int(open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)) })
        defer { Syscall.close(fd) }
        _ = try Syscall.retrying("flock") { Int(flock(fd, LOCK_EX)) }
        defer { _ = flock(fd, LOCK_UN) }
        return try body()
    }
}

/// What `lstat` finds at a path, for the check of a folder that must be the process's own.
public struct PathStatus: Equatable, Sendable {
    public var isSymbolicLink: Bool
    public var isFolder: Bool
    /// The owner's user id.
    public var owner: UInt32
    /// The permission bits (`0o7777` of `st_mode`).
    public var permissions: UInt32

    public init(isSymbolicLink: Bool, isFolder: Bool, owner: UInt32, permissions: UInt32) {
        self.isSymbolicLink = isSymbolicLink
        self.isFolder = isFolder
        self.owner = owner
        self.permissions = permissions
    }

    /// The path itself, a symbolic link not followed; nil when nothing is there.
    public static func of(_ path: String) -> PathStatus? {
        var info = stat()
        guard lstat(path, &info) == 0 else { return nil }
        let kind = info.st_mode & S_IFMT
        return PathStatus(isSymbolicLink: kind == S_IFLNK, isFolder: kind == S_IFDIR, owner: info.st_uid, permissions: info.st_mode & 0o7777)
    }

    /// The user id the process acts as (its files are created as this user).
    public static var processOwner: UInt32 { geteuid() }
}

/// A folder only the process's user may enter (the spool, CONTRACT `forward.request_buffering_disk`):
/// a symbolic link could lead to a folder others write in, and another owner or a wider mode lets
/// others see or replace what is put there.
public enum PrivateFolder {
    /// What is wrong with the folder `path` as `status` describes it (nil: nothing is there, and it
    /// is made 0700 when first needed; or it is fine).
    public static func problem(_ path: String, _ status: PathStatus?, processOwner: UInt32) -> String? {
        guard let status else { return nil }
        let rule = "it must be a folder of the user tokenproxy runs as (uid \(processOwner)), mode 0700"
        if status.isSymbolicLink { return "\(path) is a symbolic link: \(rule)" }
        if !status.isFolder { return "\(path) is not a folder: \(rule)" }
        if status.owner != processOwner { return "\(path) is owned by uid \(status.owner): \(rule)" }
        if status.permissions != 0o700 { return "\(path) has mode 0\(String(status.permissions, radix: 8)): \(rule)" }
        return nil
    }

    /// The same for what is at `path` now.
    public static func problem(at path: String) -> String? {
        problem(path, PathStatus.of(path), processOwner: PathStatus.processOwner)
    }
}

/// A file that holds one request body for a while (`forward.request_buffering_disk`): created 0600
/// in a 0700 folder and unlinked at once, so that nothing of it stays on disk after its descriptor
/// closes, whatever way the process ends. Written at its end, read from any offset.
public final class SpoolFile {
    private let fd: Int32
    public private(set) var size = 0

    /// A new, empty, already unlinked file in `folder` (made 0700 when missing); refused when the
    /// folder is not the process's own (`PrivateFolder`: it may have changed since `serve` checked it).
    public init(folder: String) throws {
        try AtomicFile.ensureFolder(folder, mode: 0o700)
        if let problem = PrivateFolder.problem(at: folder) { throw AtomicFile.Failure(description: problem) }
        let path = "\(folder)/body-\(getpid())-\(UInt64.random(in: 0...UInt64.max))"
        fd = Int32(try Syscall.retrying("open") { Int(open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, mode_t(0o600))) })
        unlink(path)
    }

    deinit { Syscall.close(fd) }

    /// Appends `bytes` (a short write is continued; a full disk throws).
    public func append(_ bytes: UnsafeRawBufferPointer) throws(SocketError) {
        var done = 0
        while done < bytes.count {
            let offset = off_t(size + done)
            let n = try Syscall.retrying("pwrite") { pwrite(fd, bytes.baseAddress! + done, bytes.count - done, offset) }
            done += n
        }
        size += bytes.count
    }

    /// Up to `count` bytes from `offset` (fewer only at the end).
    public func read(at offset: Int, count: Int) throws(SocketError) -> [UInt8] {
        let wanted = max(0, min(count, size - offset))
        var out = [UInt8](repeating: 0, count: wanted)
        var done = 0
        while done < wanted {
            let (n, code) = out.withUnsafeMutableBytes { buffer in
                Syscall.uninterrupted { pread(fd, buffer.baseAddress! + done, wanted - done, off_t(offset + done)) }
            }
            if n < 0 { throw SocketError("pread", errno: code) }
            if n == 0 { break }
            done += n
        }
        if done < wanted { out.removeLast(wanted - done) }
        return out
    }
}

/// A log file lines are appended to from several threads (the audit log, CONTRACT.md "Programs in a
/// sandbox"): opened `O_APPEND` (each write(2) lands whole at the file's end, whichever thread
/// makes it), never through a symbolic link, made 0600. `open`
/// again puts the new file under the same descriptor number (dup2), so a writer on another thread
/// never holds a number that was closed and given to something else (log rotation: `mv`, then
/// SIGUSR1).
public final class AppendOnlyFile: Sendable {
    /// -1 until `open` succeeded.
    private let fd = Atomic<Int32>(-1)

    public init() {}

    /// Why an audit-like file at `status` is refused (nil: accepted). A security reviewer's rule: a
    /// symbolic link could lead the lines anywhere; another owner, or a group or others who may
    /// write it, could change what was recorded; others who may read it learn every client's
    /// requests. Its group may read it (0640, as logrotate's `create 0640 user adm` leaves it).
    public static func refusal(_ status: PathStatus, isRegularFile: Bool, processOwner: UInt32) -> String? {
        let rule =
            "it must be a regular file of the user tokenproxy runs as (uid \(processOwner)) that only it may write and others may not read (0600 or 0640)"
        if status.isSymbolicLink { return "is a symbolic link: \(rule)" }
        if !isRegularFile { return "is not a regular file: \(rule)" }
        if status.owner != processOwner { return "is owned by uid \(status.owner): \(rule)" }
        if status.permissions & 0o037 != 0 { return "has mode 0\(String(status.permissions & 0o777, radix: 8)): \(rule)" }
        return nil
    }

    /// What `check` finds wrong with `path` before `serve` opens it: the file as `refusal` judges
    /// it, or, when it is not there yet, a folder that cannot be made or takes no new file.
    public static func problem(at path: String) -> String? {
        var info = stat()
        if lstat(path, &info) == 0 {
            let kind = info.st_mode & S_IFMT
            let status = PathStatus(isSymbolicLink: kind == S_IFLNK, isFolder: kind == S_IFDIR, owner: info.st_uid, permissions: info.st_mode & 0o7777)
            return refusal(status, isRegularFile: kind == S_IFREG, processOwner: geteuid()).map { "\(path) \($0)" }
        }
        // Not there yet: `open` makes it, and its folder (0700) when missing, as the store's.
        return FileAccess.creationProblem(path)
    }

    /// Opens `path` (nil: a copy of stderr) and puts it under this file's descriptor; the file it
    /// had before (if any) is closed by that. Throws the reason when the file is refused or cannot
    /// be opened; then nothing changes.
    public func open(_ path: String?) throws(AtomicFile.Failure) {
        let opened: Int32
        if let path {
            do {
                try AtomicFile.ensureFolder(AtomicFile.parentFolder(of: path))
            } catch {
                throw AtomicFile.Failure(description: "cannot open \(path): \(error)")
            }
            let (r, code) = Syscall.uninterrupted {
                Int(Glibc.open(path, O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_CLOEXEC, mode_t(0o600)))
            }
            if r < 0 {
                let why = code == ELOOP ? "is a symbolic link" : Syscall.describe(errno: code)
                throw AtomicFile.Failure(description: "cannot open \(path): \(why)")
            }
            opened = Int32(r)
            var info = stat()
            guard fstat(opened, &info) == 0 else {
                Syscall.close(opened)
                throw AtomicFile.Failure(description: "cannot stat \(path)")
            }
            let kind = info.st_mode & S_IFMT
            let status = PathStatus(isSymbolicLink: false, isFolder: kind == S_IFDIR, owner: info.st_uid, permissions: info.st_mode & 0o7777)
            if let refusal = AppendOnlyFile.refusal(status, isRegularFile: kind == S_IFREG, processOwner: geteuid()) {
                Syscall.close(opened)
                throw AtomicFile.Failure(description: "\(path) \(refusal)")
            }
        } else {
            let (r, code) = Syscall.uninterrupted { Int(fcntl(2, F_DUPFD_CLOEXEC, Int32(3))) }
            guard r >= 0 else { throw AtomicFile.Failure(description: "cannot use stderr: \(Syscall.describe(errno: code))") }
            opened = Int32(r)
        }
        let current = fd.load(ordering: .acquiring)
        guard current >= 0 else {
            fd.store(opened, ordering: .releasing)
            return
        }
        // The same number from now on: a writer that loaded it writes to the old file or the new one.
        let (r, code) = Syscall.uninterrupted { Int(dup2(opened, current)) }
        Syscall.close(opened)
        if r < 0 { throw AtomicFile.Failure(description: "cannot reopen: \(Syscall.describe(errno: code))") }
        // dup2 clears close-on-exec (Glibc's Swift module has no dup3); a command started in between keeps it open.
        try? Syscall.setCloseOnExec(current)
    }

    /// Appends `line` with one write(2) (a second one only after a short write, as on a full disk).
    /// False when it could not be written (or nothing is open).
    public func append(_ line: UnsafeRawBufferPointer) -> Bool {
        let descriptor = fd.load(ordering: .relaxed)
        guard descriptor >= 0 else { return false }
        do {
            try Syscall.writeAll(descriptor, line)
            return true
        } catch {
            return false
        }
    }
}
