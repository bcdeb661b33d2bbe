import Glibc

/// Replaces a file's content so that a reader sees the old content or the new, never a mix: a temp
/// file in the same folder (mode 0600 from the start), write, fsync, rename over the target, fsync the
/// folder. Used by the sink and, later, the store.
enum AtomicFile {
    struct Failure: Error, CustomStringConvertible {
        var description: String
    }

    static func write(_ bytes: [UInt8], to path: String, mode: mode_t = 0o600) throws {
        let folder = parentFolder(of: path)
        let name = String(path.split(separator: "/", omittingEmptySubsequences: false).last ?? "")
        let temporary = "\(folder)/.\(name).tmp-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        let fd = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode)
        guard fd >= 0 else { throw Failure(description: "cannot create a temporary file in \(folder): \(errnoText(errno))") }
        var renamed = false
        defer { if !renamed { unlink(temporary) } }
        do {
            defer { close(fd) }
            // The umask may have taken bits away; never more than `mode` in any case.
            guard fchmod(fd, mode) == 0 else { throw Failure(description: "chmod \(temporary): \(errnoText(errno))") }
            var offset = 0
            while offset < bytes.count {
                let written = bytes.withUnsafeBytes { buffer in
                    Glibc.write(fd, buffer.baseAddress! + offset, buffer.count - offset)
                }
                if written < 0 {
                    if errno == EINTR { continue }
                    throw Failure(description: "write \(temporary): \(errnoText(errno))")
                }
                offset += written
            }
            guard fsync(fd) == 0 else { throw Failure(description: "fsync \(temporary): \(errnoText(errno))") }
        }
        guard rename(temporary, path) == 0 else { throw Failure(description: "rename to \(path): \(errnoText(errno))") }
        renamed = true
        syncFolder(folder)
    }

    /// Removes the file and makes the removal durable; a missing file is fine.
    static func remove(_ path: String) throws {
        if unlink(path) != 0 && errno != ENOENT {
            throw Failure(description: "remove \(path): \(errnoText(errno))")
        }
        syncFolder(parentFolder(of: path))
    }

    /// Creates the folder (and its parents) with `mode` when missing; an existing folder keeps its mode.
    static func ensureFolder(_ folder: String, mode: mode_t = 0o700) throws {
        var info = stat()
        if stat(folder, &info) == 0 { return }
        let parent = parentFolder(of: folder)
        if parent != folder { try ensureFolder(parent, mode: mode) }
        if mkdir(folder, mode) != 0 && errno != EEXIST {
            throw Failure(description: "mkdir \(folder): \(errnoText(errno))")
        }
    }

    static func parentFolder(of path: String) -> String {
        guard let slash = path.lastIndex(of: "/") else { return "." }
        if slash == path.startIndex { return "/" }
        return String(path[..<slash])
    }

    private static func syncFolder(_ folder: String) {
        let fd = open(folder, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { return }
        _ = fsync(fd)
        close(fd)
    }
}
