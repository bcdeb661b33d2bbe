import Config
import Credentials
import FoundationEssentials
import HTTP1
import Logs
import Sockets
import Telemetry

/// The audit log's request and CONNECT lines (CONTRACT.md "Programs in a sandbox", "Audit log";
/// docs/ARCHITECTURE.md "The audit log"): written once per exchange, from the loop, before the
/// answer's last bytes go to the client, so that a crash loses at most the line of a request still
/// in flight. Only called when `ctx.auditing`: nothing of this runs without `audit:`.
extension Connection {
    /// Writes the exchange's line, once: where its answer's last bytes are about to be written (the
    /// proxy's own answer, a chunked answer's last chunk, a fixed-length body's last bytes), or when
    /// it ends without them (a client gone, a cut).
    func audit(_ exchange: Exchange) {
        guard exchange.record.markAudited() else { return }
        let (seconds, milliseconds) = Syscall.wallClockParts()
        let event = exchange.auditEvent(client: auditClient, seconds: seconds, milliseconds: milliseconds)
        ctx.auditBatch.append(event, on: ctx.loop)
        // With telemetry, the same event as an OTLP log record with its request's trace id.
        if let tracer = ctx.tracer { tracer.audit(event, trace: exchange.record.trace) }
    }

    /// A request refused before it had an exchange (its head could not be read).
    func auditUnparsed(_ error: ProxyError) {
        let (seconds, milliseconds) = Syscall.wallClockParts()
        var event = AuditEvent(kind: .request, seconds: seconds, milliseconds: milliseconds)
        event.decision = .refused
        event.reason = error.code
        event.client = auditClient
        event.status = error.status
        ctx.auditBatch.append(event, on: ctx.loop)
        ctx.tracer?.audit(event, trace: nil)
    }

    /// The peer's address (without its port), or on a listener that asks for client certificates the
    /// certificate's subject.
    var auditClient: String {
        if machine.speaksTLS, let subject = tls?.peerSubject { return subject }
        switch peer {
        case .unix: return "unix"
        default: return peer.host
        }
    }
}

/// A loop's audit lines of one turn, written with one write(2) rather than one per request: the
/// lines of the exchanges that end while the loop handles a batch of events are formatted into
/// `buffer`, and written by `runLoopTask` once the events are handled, before the loop waits again.
/// While lines wait, so do the bytes of every client of the loop (`Connection.flush` hands its
/// connection to `holds`): they are sent right after the lines are written, which keeps the
/// contract's order, a line written before its answer's last byte (docs/ARCHITECTURE.md, "The audit
/// log").
final class AuditBatch: LoopTask {
    private let log: AuditLog
    private let buffer = AuditLineBuffer()
    /// Connections whose bytes wait for the lines; `flushing`: those being flushed now.
    private var held: [Connection] = []
    private var flushing: [Connection] = []
    private var scheduled = false

    init(log: AuditLog) { self.log = log }

    /// Lines wait to be written: a client's bytes must wait too.
    var linesWait: Bool { !buffer.isEmpty }

    /// `event`'s line, written at the end of the turn.
    func append(_ event: AuditEvent, on loop: EventLoop) {
        log.append(event, to: buffer)
        if !scheduled {
            scheduled = true
            loop.schedule(task: self)
        }
    }

    /// `event`'s line (and those waiting before it), written now.
    func write(_ event: AuditEvent) {
        log.write(event, buffer: buffer)
    }

    /// The lines waiting, written now: a client's socket leaves its connection (`relinquishSocket`).
    func writeWaiting() {
        log.write(buffer)
    }

    /// True while lines wait: `connection` is flushed once they are written.
    func holds(_ connection: Connection) -> Bool {
        guard linesWait else { return false }
        // A connection flushed again in the turn (a body's chunks, then its end) is held once; a
        // second flush of one held further back does nothing more than the first.
        if held.last !== connection { held.append(connection) }
        return true
    }

    /// The turn's events are handled: the lines go, then the bytes held for them. A flush that
    /// ends an exchange (a client gone) may add a line, and hold the connections after it: round again.
    func runLoopTask() {
        repeat {
            log.write(buffer)
            swap(&held, &flushing)
            for connection in flushing where !connection.closed { connection.flush() }
            flushing.removeAll(keepingCapacity: true)
        } while linesWait || !held.isEmpty
        scheduled = false
    }
}

extension Exchange {
    /// The exchange's audit line as it stands. The fields other steps fill are read from the
    /// exchange's record when they exist there; until then they carry the contract's defaults:
    /// `caller` "default", `placeholder` false, `scrubbed` 0, no `address`, no `trace_id`.
    func auditEvent(client: String, seconds: Int, milliseconds: Int) -> AuditEvent {
        let isConnect = AccessPolicy.isConnect(head.method)
        // Refused: the proxy answered with its error code before a request went up (none was sent
        // with a token); one that failed upstream (502, 504) was forwarded and keeps its code as reason.
        let refused = record.refusal != nil && sentToken == nil
        let host: String?
        let path: String?
        if isConnect {
            // The CONNECT's authority as it came (host and port), as the access log shows it.
            (host, path) = (TunnelPin.loggable(head.target), nil)
        } else if head.targetIsPlainPath {
            // A path with no query (nearly every request), as `AuditTarget.split` would give it.
            (host, path) = (head.host, head.target)
        } else {
            let target = AuditTarget.split(head.target)
            (host, path) = (target.host ?? head.first("host"), target.path)
        }
        // A caller is known only once the request's placeholder was found and replaced.
        let routeFields = route.map { (name: $0.state.name, audit: $0.audit) }
        let ofRequest = routeFields != nil && !isConnect
        // One initialization with every member (no member assigned after it).
        return AuditEvent(
            kind: isConnect ? .connect : .request, seconds: seconds, milliseconds: milliseconds,
            decision: refused ? .refused : (isConnect ? .intercepted : .forwarded), reason: record.refusal, route: routeFields?.name,
            caller: routeFields == nil ? nil : record.caller ?? PlaceholderConfiguration.defaultCaller, client: client, method: head.method,
            host: host, path: path, status: record.status, upstreamStatus: record.upstreamStatus, credential: routeFields?.audit.credential,
            placement: ofRequest ? routeFields?.audit.placement : nil, placeholder: ofRequest ? record.caller != nil : nil,
            scrubbed: ofRequest ? record.scrubbed : nil, traceID: record.trace.map { TraceParent.hex($0.traceID) })
    }
}

extension ByteTunnel {
    /// A CONNECT to a host no route names: `tunnelled` once connected, or refused with `reason`.
    /// `client`: nil when `audit:` is not set.
    /// `address`: the checked address the tunnel connected to.
    static func audit(_ ctx: LoopContext, client: String?, host: String, port: Int, status: Int, reason: String?, address: String?) {
        guard let client else { return }
        let event = auditEvent(host: host, port: port, client: client, status: status, reason: reason, address: address)
        // The tunnel answers on its own socket, not through a `Connection`: the line goes now.
        ctx.auditBatch.write(event)
        ctx.tracer?.audit(event, trace: nil)
    }

    static func auditEvent(host: String, port: Int, client: String, status: Int, reason: String?, address: String?) -> AuditEvent {
        let (seconds, milliseconds) = Syscall.wallClockParts()
        var event = AuditEvent(kind: .connect, seconds: seconds, milliseconds: milliseconds)
        event.decision = reason == nil ? .tunnelled : .refused
        event.reason = reason
        event.caller = PlaceholderConfiguration.defaultCaller
        event.client = client
        event.method = "CONNECT"
        event.host = "\(host):\(port)"
        event.status = status
        event.address = address
        return event
    }
}

extension Server {
    /// Every refresh or mint of the routes' credentials becomes a `credential` line (one per route the
    /// manager serves), and with telemetry's `logs` a log record, while `audit:` is set. Set on each manager before it starts, and again after
    /// a reload (the routes a manager serves may change).
    public func observeCredentials(_ configuration: Configuration, states: [RouteState]) {
        let audit = shared.audit
        let enabled = configuration.audit != nil
        let environment = ProcessInfo.processInfo.environment
        var seen: [ObjectIdentifier] = []
        for (index, state) in states.enumerated() where !seen.contains(ObjectIdentifier(state.tokens)) {
            seen.append(ObjectIdentifier(state.tokens))
            let credentials = configuration.routes[index].credentials
            guard enabled, let action = RouteAudit.action(credentials, environment: environment) else {
                state.tokens.onFetched = nil
                continue
            }
            let routes = states.filter { $0.tokens === state.tokens }.map(\.name)
            let type = credentials.type.rawValue
            let telemetry = state.tokens.refreshTracing
            state.tokens.onFetched = { fetched in
                let (seconds, milliseconds) = Syscall.wallClockParts()
                // The token thread's own buffer, for the lines of this one call: a few an hour.
                let buffer = AuditLineBuffer()
                for route in routes {
                    let event = AuditEvent.credential(
                        route: route, credential: type, action: action, outcome: fetched.succeeded ? .success : .failure,
                        reason: fetched.failureReason, seconds: seconds, milliseconds: milliseconds)
                    audit.append(event, to: buffer)
                    // With telemetry's logs, the same event as an OTLP log record.
                    telemetry.exportAuditEvent(event.attributes, time: event.unixNanoseconds, refresh: fetched.refresh)
                }
                audit.write(buffer)
            }
        }
    }
}

extension Server {
    /// Opens `audit.path` when it is set and differs from `previous`'s (at start, `previous` nil;
    /// at a reload, the configuration in effect). A file that cannot be opened, or that
    /// `AppendOnlyFile.refusal` refuses, throws with `audit.path` named, and nothing changes.
    public func openAuditLog(_ configuration: Configuration, previous: Configuration?) throws(AuditLogError) {
        guard let audit = configuration.audit, audit != previous?.audit else { return }
        do {
            switch audit.destination {
            case .file(let path): try shared.audit.open(path)
            case .standardError: try shared.audit.open(nil)
            }
        } catch {
            throw AuditLogError(description: "audit.path: \(error.description)")
        }
    }

    /// SIGUSR1: the audit file made again at its path (after a rotation moved it); nothing for stderr.
    public func reopenAuditLog() throws(AuditLogError) {
        try shared.audit.reopen()
    }
}
