import Sockets
import Synchronization

/// The audit log's file (or stderr) and its writers: any thread may write (the event loops for
/// requests, the token threads for credential events), each from its own `AuditLineBuffer`; one
/// write(2) of whole lines on an `O_APPEND` file keeps lines whole (docs/ARCHITECTURE.md, "The
/// audit log").
public final class AuditLog: Sendable {
    private let file = AppendOnlyFile()
    /// Lines that could not be written (`tokenproxy_audit_lines_lost_total`).
    public let lost = Atomic<Int>(0)
    /// What `open` last opened: nil before, `.some(nil)` for stderr.
    private let opened = Mutex<String??>(nil)

    public init() {}

    /// Opens `path` (nil: stderr), replacing the file written so far: at start, after a reload that
    /// changed `audit.path`, and on SIGUSR1 (the same path again, after a rotation moved the old file).
    public func open(_ path: String?) throws(AuditLogError) {
        do {
            try file.open(path)
        } catch {
            throw AuditLogError(description: error.description)
        }
        opened.withLock { $0 = .some(path) }
    }

    /// SIGUSR1: the file at the path last opened, made again when a rotation moved it away; lines
    /// written from now on go there. Nothing to do for stderr or before the first `open`.
    public func reopen() throws(AuditLogError) {
        guard case .some(.some(let path)) = opened.withLock({ $0 }) else { return }
        try open(path)
    }

    /// Writes `event` now, with the lines `buffer` held before it. False when they could not be written.
    @discardableResult
    public func write(_ event: AuditEvent, buffer: AuditLineBuffer) -> Bool {
        append(event, to: buffer)
        return write(buffer)
    }

    /// Formats `event` into `buffer` (a loop's, with its timestamp cache: no allocation per line),
    /// after the lines it holds; `write(_:)` writes them all.
    public func append(_ event: AuditEvent, to buffer: AuditLineBuffer) {
        event.append(to: buffer)
    }

    /// Writes the lines `buffer` holds with one write(2) (whole lines on an `O_APPEND` file), and
    /// empties it. False when they could not be written: each is counted lost.
    @discardableResult
    public func write(_ buffer: AuditLineBuffer) -> Bool {
        guard !buffer.isEmpty else { return true }
        let written = file.append(buffer.bytes)
        if !written { lost.add(buffer.lines, ordering: .relaxed) }
        buffer.clear()
        return written
    }
}

/// Why the audit log's file cannot be used (`audit.path` is refused).
public struct AuditLogError: Error, Sendable, CustomStringConvertible {
    public var description: String
    public init(description: String) { self.description = description }
}
