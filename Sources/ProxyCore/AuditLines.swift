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
        ctx.shared.audit.write(event, buffer: ctx.auditBuffer)
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
        ctx.shared.audit.write(event, buffer: ctx.auditBuffer)
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

extension Exchange {
    /// The exchange's audit line as it stands. The fields other steps fill are read from the
    /// exchange's record when they exist there; until then they carry the contract's defaults:
    /// `caller` "default", `placeholder` false, `scrubbed` 0, no `address`, no `trace_id`.
    func auditEvent(client: String, seconds: Int, milliseconds: Int) -> AuditEvent {
        let isConnect = AccessPolicy.isConnect(head.method)
        var event = AuditEvent(kind: isConnect ? .connect : .request, seconds: seconds, milliseconds: milliseconds)
        // Refused: the proxy answered with its error code before a request went up (none was sent
        // with a token); one that failed upstream (502, 504) was forwarded and keeps its code as reason.
        let refused = record.refusal != nil && sentToken == nil
        event.decision = refused ? .refused : (isConnect ? .intercepted : .forwarded)
        event.reason = record.refusal
        event.client = client
        event.method = head.method
        event.status = record.status
        event.upstreamStatus = record.upstreamStatus
        if let trace = record.trace { event.traceID = TraceParent.hex(trace.traceID) }
        if isConnect {
            // The CONNECT's authority as it came (host and port), as the access log shows it.
            event.host = TunnelPin.loggable(head.target)
        } else {
            let target = AuditTarget.split(head.target)
            event.host = target.host ?? head.first("host")
            event.path = target.path
        }
        if let route {
            event.route = route.state.name
            event.caller = record.caller ?? PlaceholderConfiguration.defaultCaller
            event.credential = route.audit.credential
            if !isConnect {
                event.placement = route.audit.placement
                // A caller is known only once the request's placeholder was found and replaced.
                event.placeholder = record.caller != nil
                event.scrubbed = record.scrubbed
            }
        }
        return event
    }
}

extension ByteTunnel {
    /// A CONNECT to a host no route names: `tunnelled` once connected, or refused with `reason`.
    /// `client`: nil when `audit:` is not set.
    /// `address`: the checked address the tunnel connected to.
    static func audit(_ ctx: LoopContext, client: String?, host: String, port: Int, status: Int, reason: String?, address: String?) {
        guard let client else { return }
        let event = auditEvent(host: host, port: port, client: client, status: status, reason: reason, address: address)
        ctx.shared.audit.write(event, buffer: ctx.auditBuffer)
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
                var buffer: [UInt8] = []
                for route in routes {
                    let event = AuditEvent.credential(
                        route: route, credential: type, action: action, outcome: fetched.succeeded ? .success : .failure,
                        reason: fetched.failureReason, seconds: seconds, milliseconds: milliseconds)
                    audit.write(event, buffer: &buffer)
                    // With telemetry's logs, the same event as an OTLP log record.
                    telemetry.exportAuditEvent(event.attributes, time: event.unixNanoseconds, refresh: fetched.refresh)
                }
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
