import Foundation

/// `Tests/servers/tls_client.py` (Python's ssl on raw sockets) from a test: one connection with an
/// optional CONNECT first, a TLS handshake whose SNI, ALPN, version and client certificate the test
/// chooses, then requests on it; or a loop of new connections; or failed handshakes.
public enum TLSClient {
    /// One request on the connection.
    public struct Request: Sendable {
        public var method: String
        public var target: String
        public var headers: [(String, String)]
        public var body: String

        public init(_ method: String = "GET", _ target: String, headers: [(String, String)] = [], body: String = "") {
            self.method = method
            self.target = target
            self.headers = headers
            self.body = body
        }

        var json: String {
            let object: [String: Any] = ["method": method, "target": target, "headers": headers.map { [$0.0, $0.1] }, "body": body]
            return String(decoding: (try? JSONSerialization.data(withJSONObject: object)) ?? Data(), as: UTF8.self)
        }
    }

    public struct Response: Sendable {
        public let status: Int
        public let headers: [(name: String, value: String)]
        public let body: String

        public func header(_ name: String) -> String? {
            headers.first { $0.name.caseInsensitiveCompare(name) == .orderedSame }?.value
        }

        public var json: [String: Any]? {
            (try? JSONSerialization.jsonObject(with: Data(body.utf8))) as? [String: Any]
        }
    }

    /// What one `exchange` saw.
    public struct Outcome: Sendable, CustomStringConvertible {
        /// The CONNECT answer's status (nil without `--connect`) and, when refused, its body.
        public let connectStatus: Int?
        public let connectBody: String?
        public let handshakeSucceeded: Bool?
        public let handshakeError: String?
        public let tlsVersion: String?
        public let alpn: String?
        /// SHA-256 of the certificate the server presented, lowercase hex.
        public let certificateFingerprint: String?
        public let responses: [Response]
        /// A failure after the handshake (the connection closed before an answer, ...).
        public let error: String?
        public let raw: String

        public var description: String { raw }

        init(_ text: String) throws {
            raw = text
            guard let object = (try? JSONSerialization.jsonObject(with: Data(text.utf8))) as? [String: Any] else {
                throw HarnessError("tls_client.py printed no JSON: \(text)")
            }
            let connect = object["connect"] as? [String: Any]
            connectStatus = connect?["status"] as? Int
            connectBody = connect?["body"] as? String
            let tls = object["tls"] as? [String: Any]
            handshakeSucceeded = tls?["ok"] as? Bool
            handshakeError = tls?["error"] as? String
            tlsVersion = tls?["version"] as? String
            alpn = tls?["alpn"] as? String
            certificateFingerprint = tls?["cert_sha256"] as? String
            error = object["error"] as? String
            responses = ((object["responses"] as? [[String: Any]]) ?? []).map { item in
                Response(
                    status: item["status"] as? Int ?? 0,
                    headers: ((item["headers"] as? [[String]]) ?? []).compactMap { $0.count == 2 ? (name: $0[0], value: $0[1]) : nil },
                    body: item["body"] as? String ?? "")
            }
        }

        /// The refused CONNECT's body as JSON.
        public var connectJSON: [String: Any]? {
            connectBody.flatMap { (try? JSONSerialization.jsonObject(with: Data($0.utf8))) as? [String: Any] }
        }
    }

    /// The options of `tls_client.py exchange` (see its docstring) for one connection to 127.0.0.1:`port`.
    public static func exchange(
        port: Int,
        connect: String? = nil,
        connectVersion: String = "1.1",
        connectHost: Bool = true,
        connectHeaders: [String] = [],
        plain: Bool = false,
        serverName: String? = nil,
        caFile: String? = nil,
        verify: Bool = true,
        clientCertificate: TestCA.Issued? = nil,
        alpn: [String] = [],
        tlsVersion: String? = nil,
        pipeline: Bool = false,
        requests: [Request] = []
    ) throws -> Outcome {
        var arguments = ["exchange", "--port", String(port)]
        if let connect {
            arguments += ["--connect", connect, "--connect-version", connectVersion]
            if !connectHost { arguments.append("--no-connect-host") }
            for field in connectHeaders { arguments += ["--connect-header", field] }
        }
        if plain { arguments.append("--plain") }
        if let serverName { arguments += ["--sni", serverName] }
        if let caFile { arguments += ["--cafile", caFile] }
        if !verify { arguments.append("--no-verify") }
        if let clientCertificate { arguments += ["--cert", clientCertificate.certificate, "--key", clientCertificate.key] }
        if !alpn.isEmpty { arguments += ["--alpn", alpn.joined(separator: ",")] }
        if let tlsVersion { arguments += ["--tls-version", tlsVersion] }
        if pipeline { arguments.append("--pipeline") }
        for request in requests { arguments += ["--request", request.json] }
        let result = try runCommand("python3", arguments: [script] + arguments, environment: environment, timeout: 120)
        return try Outcome(result.stdout)
    }

    /// `exchange` started with `--pause-after`: the test does something between the answers
    /// (`resume()` lets the rest go) on one open connection.
    public final class Paused: Sendable {
        private let child: ChildProcess

        /// `connect`: a CONNECT to this `host:port` first, the handshake then in its tunnel.
        public init(
            port: Int, connect: String? = nil, caFile: String, serverName: String = "localhost", requests: [Request], pauseAfter: Int
        ) throws {
            var arguments = ["exchange", "--port", String(port), "--cafile", caFile, "--sni", serverName, "--pause-after", String(pauseAfter)]
            if let connect { arguments += ["--connect", connect] }
            for request in requests { arguments += ["--request", request.json] }
            child = try ChildProcess("python3", arguments: [script] + arguments, environment: environment, withStdin: true)
            let paused = child.stdout.wait(until: Date().addingTimeInterval(60)) { $0.contains("PAUSED\n") ? true : nil }
            guard paused == true else {
                child.stop(grace: 1)
                throw HarnessError("tls_client.py did not pause: \(child.stdout.text) \(child.stderr.text)")
            }
        }

        /// Lets the remaining requests go and returns what the whole connection saw.
        public func resume() throws -> Outcome {
            child.writeStdin(Array("go\n".utf8))
            child.closeStdin()
            guard child.wait(timeout: 120) != nil else { throw HarnessError("tls_client.py did not finish") }
            child.stdout.waitForEnd(until: Date().addingTimeInterval(5))
            let text = child.stdout.text
            return try Outcome(String(text[(text.range(of: "PAUSED\n")?.upperBound ?? text.startIndex)...]))
        }
    }

    /// What a `loop` of new TLS connections saw.
    public struct LoopOutcome: Sendable, CustomStringConvertible {
        public let succeeded: Int
        public let failed: Int
        public let errors: [String]
        /// Distinct certificates presented, in the order first seen.
        public let fingerprints: [String]
        public let description: String
    }

    /// A loop of GETs, each on a new TLS connection, `count` times or until `finish()`.
    public final class Loop: Sendable {
        private let child: ChildProcess

        public init(port: Int, caFile: String, serverName: String = "localhost", count: Int? = nil) throws {
            child = try ChildProcess(
                "python3",
                arguments: [script, "loop", "--port", String(port), "--cafile", caFile, "--sni", serverName] + (count.map { ["--count", String($0)] } ?? []),
                environment: environment, withStdin: true)
        }

        /// Whether the loop is still going.
        public var isRunning: Bool { child.isRunning }

        /// Waits until the loop's first request has succeeded (false: none within `timeout`).
        public func waitForFirst(timeout: TimeInterval = 60) -> Bool {
            child.stdout.wait(until: Date().addingTimeInterval(timeout)) { $0.contains("FIRST\n") ? true : nil } ?? false
        }

        /// Waits until the loop has had a handshake that presented the certificate with `fingerprint`.
        public func waitForCertificate(_ fingerprint: String, timeout: TimeInterval = 60) -> Bool {
            child.stdout.wait(until: Date().addingTimeInterval(timeout)) { $0.contains("SEEN \(fingerprint)\n") ? true : nil } ?? false
        }

        /// Stops the loop (or waits for its `count`) and returns what it saw.
        public func finish() throws -> LoopOutcome {
            child.closeStdin()
            guard child.wait(timeout: 600) != nil else { throw HarnessError("tls_client.py loop did not finish") }
            child.stdout.waitForEnd(until: Date().addingTimeInterval(5))
            let text = child.stdout.text.split(separator: "\n").last.map(String.init) ?? ""
            guard let object = (try? JSONSerialization.jsonObject(with: Data(text.utf8))) as? [String: Any] else {
                throw HarnessError("tls_client.py loop printed no JSON: \(text) \(child.stderr.text)")
            }
            return LoopOutcome(
                succeeded: object["ok"] as? Int ?? 0, failed: object["failed"] as? Int ?? -1, errors: object["errors"] as? [String] ?? [],
                fingerprints: object["fingerprints"] as? [String] ?? [], description: text)
        }
    }

    /// `count` connections to 127.0.0.1:`port` that each fail their handshake (plain HTTP, a
    /// TLS 1.0/1.1-only ClientHello, a TLS record of garbage, in turn), one after the other.
    public static func failHandshakes(port: Int, count: Int) throws -> CommandResult {
        try runCommand("python3", arguments: [script, "bad", "--port", String(port), "--count", String(count)], environment: environment, timeout: 600)
    }

    static var script: String { RepositoryPaths.servers.appendingPathComponent("tls_client.py").path }

    static var environment: [String: String] { childEnvironment(["PYTHONDONTWRITEBYTECODE": "1"]) }
}
