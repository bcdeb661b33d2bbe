import HTTP1
import Logging

/// One line of the access log (`log.access_log: true`; fields in docs/OBSERVABILITY.md), as
/// metadata that the log handler writes as `key=value` pairs or JSON members (`log.format`). Holds
/// the token's generation, never the token.
struct AccessRecord {
    /// `request`; `client_gone` when the client closed (or `client_send_timeout` cut it) before the
    /// answer's end; `tunnel_closed` when a tunnel that began with a 101 ends.
    var event = "request"
    var route: String?
    var method: String
    /// The path without its query (queries may carry secrets).
    var path: String
    var status: Int
    var upstreamStatus = 0
    var bytesIn = 0
    var bytesOut = 0
    var seconds = 0.0
    var upstreamSeconds: Double?
    var tokenWaitSeconds = 0.0
    var retriedAfter401 = false
    /// The contract's error code of the proxy's own answer.
    var error: String?
    var tokenGeneration: UInt64?
    var traceID: String?
    /// The host of the forward-proxy tunnel the request came through, or of a CONNECT.
    var tunnel: String?

    /// The human part of the line, as it was before the fields came (`GET /x 200 3ms 120B`).
    var message: Logger.Message {
        "\(method) \(path) \(status) \(Int((seconds * 1000).rounded()))ms \(bytesOut)B"
    }

    var metadata: Logger.Metadata {
        var m: Logger.Metadata = [
            "access": .string(event),
            "method": .string(method),
            "path": .string(path),
            "status": .stringConvertible(status),
            "bytes_in": .stringConvertible(bytesIn),
            "bytes_out": .stringConvertible(bytesOut),
            "duration_ms": .string(AccessRecord.milliseconds(seconds)),
            "token_wait_ms": .string(AccessRecord.milliseconds(tokenWaitSeconds)),
            "retried_401": .string(retriedAfter401 ? "true" : "false"),
        ]
        if let route { m["route"] = .string(route) }
        if upstreamStatus > 0 { m["upstream_status"] = .stringConvertible(upstreamStatus) }
        if let upstreamSeconds { m["upstream_ms"] = .string(AccessRecord.milliseconds(upstreamSeconds)) }
        if let error { m["error"] = .string(error) }
        if let tokenGeneration { m["token_generation"] = .stringConvertible(tokenGeneration) }
        if let traceID { m["trace_id"] = .string(traceID) }
        if let tunnel { m["tunnel"] = .string(tunnel) }
        return m
    }

    /// Milliseconds with microsecond precision: `0.250`.
    static func milliseconds(_ seconds: Double) -> String {
        let micros = Int((max(seconds, 0) * 1_000_000).rounded())
        let fraction = String(micros % 1000)
        return "\(micros / 1000)." + String(repeating: "0", count: 3 - fraction.count) + fraction
    }

    /// What the log shows of a target the checks refused (no normalised path was made): the target
    /// up to its query or fragment, without userinfo (each may carry a secret: a refused
    /// `/cb#access_token=…`, `http://user:password@host/`).
    static func refusedPath(_ target: String) -> String {
        var shown = String(target.prefix { $0 != "?" && $0 != "#" })
        if let scheme = shown.range(of: "://") {
            let authority = shown[scheme.upperBound...].prefix { $0 != "/" }
            if let at = authority.lastIndex(of: "@") {
                shown = String(shown[..<scheme.upperBound]) + String(shown[shown.index(after: at)...])
            }
        }
        return shown
    }

    /// The trace id of a W3C `traceparent` field (Trace Context §3.2: `version-traceid-parentid-flags`,
    /// lowercase hex, 2-32-16-2 digits; an all-zero trace id is invalid), or nil.
    static func traceID(fromTraceparent value: String?) -> String? {
        guard let value else { return nil }
        let parts = value.utf8.split(separator: UInt8(ascii: "-"), omittingEmptySubsequences: false)
        guard parts.count >= 4, parts[0].count == 2, parts[1].count == 32, parts[2].count == 16, parts[3].count == 2 else { return nil }
        func isHex(_ b: UInt8) -> Bool { (b >= 0x30 && b <= 0x39) || (b >= 0x61 && b <= 0x66) }
        guard parts[0].elementsEqual("ff".utf8) == false, parts.prefix(4).allSatisfy({ $0.allSatisfy(isHex) }) else { return nil }
        // Version 00 has exactly four parts; later versions may add more (§3.2.4).
        if parts[0].elementsEqual("00".utf8) && parts.count != 4 { return nil }
        guard parts[1].contains(where: { $0 != UInt8(ascii: "0") }) else { return nil }
        return String(decoding: parts[1], as: UTF8.self)
    }
}

extension Exchange {
    /// Its access-log line (docs/OBSERVABILITY.md "Access log"): the request, or a tunnel's end, or a
    /// client gone before its answer's end.
    func accessRecord(event: String, seconds: Double) -> AccessRecord {
        var line = AccessRecord(
            event: event, route: route?.state.name, method: head.method,
            path: path.isEmpty ? AccessRecord.refusedPath(head.target) : path, status: record.status)
        line.upstreamStatus = record.upstreamStatus
        line.bytesIn = bodyBytesSeen
        line.bytesOut = record.bytesOut
        line.seconds = seconds
        line.upstreamSeconds = record.upstreamSeconds
        line.tokenWaitSeconds = record.tokenWaitSeconds
        line.retriedAfter401 = record.retriedAfter401
        line.error = record.refusal
        line.tokenGeneration = sentToken?.generation
        line.traceID = AccessRecord.traceID(fromTraceparent: head.first("traceparent"))
        line.tunnel = tunnelHost
        return line
    }
}
