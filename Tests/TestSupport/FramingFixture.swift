import Foundation
import Testing

/// `framing_upstream.py` (scripted raw answers, chosen by the path's last segment) and a
/// tokenproxy in front of it, with the upstream base path `/f`.
public final class FramingFixture: UpstreamFixture, @unchecked Sendable {
    public let upstream: PythonServer
    public let proxy: ProxyProcess

    /// - Parameters:
    ///   - upstreamArguments: `--drop-reused`, `--close-after-response`.
    ///   - extra: more top-level YAML sections.
    ///   - drainTimeout: `drain_timeout`, how long a SIGTERM lets exchanges in flight finish.
    public init(
        upstreamArguments: [String] = [], extra: String = "", environment: [String: String] = [:], upstreamURL: String? = nil,
        drainTimeout: String = "2s"
    ) throws {
        let upstream = try PythonServer("framing_upstream", arguments: upstreamArguments)
        self.upstream = upstream
        var env = environment
        env["E2E_TOKEN"] = e2eToken
        proxy = try ProxyProcess(
            config: staticTokenConfig(
                upstream: upstreamURL ?? upstream.baseURL + "/f", drainTimeout: drainTimeout, logLevel: "debug", more: extra),
            environment: env)
    }

    /// One request on a client connection of its own.
    public func get(_ path: String, method: String = "GET", headers: [(String, String)] = []) throws -> HTTPResponse {
        let client = try connect()
        defer { client.close() }
        try client.send(rawRequest(method, path, host: host, headers: headers))
        return try client.readFinalResponse(method: method)
    }

    /// The upstream's counters: `connections` (that carried a proxied request), `open`,
    /// `requests`, `tags`, `closed`.
    public func stats() throws -> [String: Any] {
        let r = try curl([upstream.baseURL + "/_stats"])
        guard let json = r.json else { throw HarnessError("no stats from framing_upstream: \(r.bodyString)") }
        return json
    }

    public func connections() throws -> Int { try stats()["connections"] as? Int ?? -1 }

    /// The records of `tag`, once every upstream connection that carried it has closed (the
    /// upstream waits up to 15 s).
    public func closedRecords(_ tag: String) throws -> [[String: Any]] {
        let r = try curl([upstream.baseURL + "/_wait?tag=\(tag)"], timeout: 30)
        return r.json?["entries"] as? [[String: Any]] ?? []
    }

    /// The records of `tag` as they are now.
    public func records(_ tag: String) throws -> [[String: Any]] {
        let tags = try stats()["tags"] as? [String: Any]
        return tags?[tag] as? [[String: Any]] ?? []
    }

    /// The statuses of `count` GETs of `/ok?n=<i>`, one after the other on one client connection.
    public func statusesOfSequentialGets(_ count: Int) throws -> [Int] {
        let client = try connect()
        var statuses: [Int] = []
        for i in 0..<count {
            try client.send(rawRequest("GET", "/ok?n=\(i)", host: host))
            statuses.append(try client.readResponse().status)
        }
        return statuses
    }
}

/// `framing_upstream.py`'s body pattern.
public func framingPattern(count: Int) -> [UInt8] { echoPattern(count: count) }

/// What a client that read until the connection closed got: either a whole response
/// (`complete`), or a response whose own framing says it is unfinished.
public enum CutOutcome: CustomStringConvertible {
    case complete(HTTPResponse)
    /// The head arrived with a Content-Length the bytes fall short of, or chunked without the
    /// last chunk: a visibly cut answer.
    case visiblyCut(head: String, bodyBytes: Int)
    /// Anything else (no head at all, or a head without length: a close-delimited answer would
    /// look complete).
    case other(String)

    public var description: String {
        switch self {
        case .complete(let r): return "complete \(r)"
        case .visiblyCut(let head, let n): return "cut after \(n) bytes: \(head)"
        case .other(let s): return "other: \(s)"
        }
    }

    public static func of(_ bytes: [UInt8]) -> CutOutcome {
        // Parsed as if the connection were still open: a framed answer that falls short stays
        // incomplete; a close-delimited one can never be told apart from a whole one.
        if case .complete(let r, _)? = try? HTTPResponseParser.parse(bytes, peerClosed: false) { return .complete(r) }
        let text = String(decoding: bytes, as: UTF8.self)
        guard let end = text.range(of: "\r\n\r\n") else { return .other("no head: \(text.prefix(200))") }
        let head = String(text[..<end.lowerBound])
        let lower = head.lowercased()
        let bodyBytes = bytes.count - head.utf8.count - 4
        if lower.contains("\r\ncontent-length:") || lower.contains("transfer-encoding: chunked") {
            return .visiblyCut(head: head, bodyBytes: bodyBytes)
        }
        return .other("a head without length: \(head)")
    }
}
