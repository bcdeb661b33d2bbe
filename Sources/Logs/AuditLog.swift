import Sockets
import Synchronization

/// The audit log's file (or stderr) and its writers: any thread may write (the event loops for
/// requests, the token threads for credential events); one write(2) per line on an `O_APPEND`
/// file keeps lines whole (docs/ARCHITECTURE.md, "The audit log").
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

    /// Writes `event`, formatted into `buffer` (kept by the caller, so a loop reuses one). False
    /// when the line could not be written.
    @discardableResult
    public func write(_ event: AuditEvent, buffer: inout [UInt8]) -> Bool {
        buffer.removeAll(keepingCapacity: true)
        event.append(to: &buffer)
        let written = buffer.withUnsafeBytes { file.append($0) }
        if !written { lost.add(1, ordering: .relaxed) }
        return written
    }

    /// Writes `event`, formatted into `buffer` (a loop's, with its timestamp cache): no allocation
    /// per line. False when the line could not be written.
    @discardableResult
    public func write(_ event: AuditEvent, buffer: AuditLineBuffer) -> Bool {
        buffer.clear()
        event.append(to: buffer)
        let written = file.append(buffer.bytes)
        if !written { lost.add(1, ordering: .relaxed) }
        return written
    }
}

/// Why the audit log's file cannot be used (`audit.path` is refused).
public struct AuditLogError: Error, Sendable, CustomStringConvertible {
    public var description: String
    public init(description: String) { self.description = description }
}
