import Basics
internal import Curl
import Foundation

/// One HTTP exchange with an identity provider, made with `curl_easy_perform`. It blocks, so it runs
/// only on the token manager's own thread or in a CLI command, never on an event loop
/// (ARCHITECTURE.md: identity-provider calls run on a thread of their own).
public struct HTTPCallRequest: Sendable {
    public var url: String
    public var method: String
    /// "Name: value" lines.
    public var headers: [String]
    public var body: [UInt8]
    public var timeout: Double
    /// RFC 8705 mutual TLS (`client_auth: tls_client_auth`): the client certificate and key, PEM.
    public var clientCertificateFile: String? = nil
    public var clientKeyFile: String? = nil
    /// Trust this CA bundle instead of the system's (no configuration key sets it yet; tests use it).
    public var caFile: String? = nil
    /// Never through `HTTP_PROXY`/`HTTPS_PROXY`: a cloud metadata endpoint is on the machine's own
    /// link, and a proxy would be handed the token it answers.
    public var direct = false

    public init(url: String, method: String = "POST", headers: [String] = [], body: [UInt8] = [], timeout: Double = 30) {
        self.url = url
        self.method = method
        self.headers = headers
        self.body = body
        self.timeout = timeout
    }
}

public struct HTTPCallResponse: Sendable {
    public var status: Int
    /// Header names lowercased, in order.
    public var headers: [(name: String, value: String)]
    public var body: [UInt8]

    public func header(_ lowercasedName: String) -> String? {
        headers.first { $0.name == lowercasedName }?.value
    }

    /// The `Date` header as seconds since the epoch, for clock-skew correction.
    public var date: Double? {
        // An HTTP-date is ASCII (RFC 9110 §5.6.7; IMF-fixdate has 29 characters). Anything else is no
        // date, and must not reach DateFormatter, which traps on some non-ASCII text (a fuzzing
        // finding, docs/RELIABILITY.md).
        guard let value = header("date"), value.utf8.count <= 64, value.utf8.allSatisfy({ $0 >= 0x20 && $0 < 0x7F }) else {
            return nil
        }
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "GMT")
        formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss zzz"
        return formatter.date(from: value)?.timeIntervalSince1970
    }
}

/// Network-level failure: nothing usable came back (connection refused, timeout, TLS). Its kind is
/// a value that callers switch on (the token metrics' `reason`, docs/OBSERVABILITY.md); the message
/// is libcurl's words, for logs only.
public struct HTTPCallError: Error, Sendable, Equatable, CustomStringConvertible {
    /// What went wrong, as far as a caller may decide anything by it.
    public enum Kind: Sendable, Equatable {
        /// The request could not be set up (an option libcurl refused): nothing was sent.
        case setup
        /// The identity provider could not be reached or the exchange broke off (DNS, TCP, TLS, a
        /// connection closed early).
        case unreachable
        /// The call ran out of time (`timeout`, or the connect limit of 10 s).
        case timedOut
        /// The answer's body is over `BlockingHTTPClient.maxBody`.
        case answerTooLarge
    }

    public let kind: Kind
    public let message: String
    public var description: String { message }

    public init(_ kind: Kind, message: String) {
        self.kind = kind
        self.message = message
    }
}

public enum BlockingHTTPClient {
    /// Answers at most this much body; an identity provider's answer is small.
    static let maxBody = 1 << 20

    public static func perform(_ request: HTTPCallRequest) throws -> HTTPCallResponse {
        try perform(request, on: CurlEasy())
    }

    /// Calls made one after another through one libcurl handle, whose connections stay open between
    /// them: the telemetry exporter's posts go over one connection, not one each. One thread at a
    /// time uses it.
    // @unchecked: the handle is only used by the thread that calls `perform`, one call at a time.
    public final class Session: @unchecked Sendable {
        private let easy = CurlEasy()

        public init() {}

        public func perform(_ request: HTTPCallRequest) throws -> HTTPCallResponse {
            easy.reset()
            return try BlockingHTTPClient.perform(request, on: easy)
        }
    }

    private static func perform(_ request: HTTPCallRequest, on easy: CurlEasy) throws -> HTTPCallResponse {
        let state = CallState(body: request.body)
        do {
            try easy.set(.noSignal, true)
            try easy.set(.protocols, "http,https")
            try easy.set(.followLocation, false)
            try easy.set(.url, request.url)
            try easy.set(.total, milliseconds: Int(request.timeout * 1000))
            try easy.set(.connect, milliseconds: Int(min(request.timeout, 10) * 1000))
            try easy.setTransferDelegate(state)
            if let caFile = request.caFile { try easy.set(.caFile, caFile) }
            if request.direct {
                try easy.set(.proxy, "")
            } else if let environment = passingOverOwnAddresses(request.url) {
                try easy.set(.proxy, environment.proxy)
                try easy.set(.noProxy, environment.noProxy)
            }
            if let certificate = request.clientCertificateFile, let key = request.clientKeyFile {
                try easy.set(.clientCertFile, certificate)
                try easy.set(.clientKeyFile, key)
            }
            if request.method == "POST" || !request.body.isEmpty {
                try easy.set(.post, true)
                try easy.setRequestBodySize(Int64(request.body.count))
            }
            if request.method != "POST" && request.method != "GET" {
                try easy.set(.customRequest, request.method)
            }
            // No Expect: 100-continue round trip, and only the headers asked for.
            var lines = HeaderLines()
            for line in request.headers { lines.append(line: line) }
            lines.appendRemoval("Expect")
            try easy.setHeaders(lines)
        } catch {
            throw HTTPCallError(.setup, message: "cannot set up the request: \(error)")
        }
        do {
            try easy.perform()
        } catch {
            // A body over the limit stops the transfer from the write callback: say that, not
            // libcurl's "Failed writing received data".
            if state.tooLarge { throw HTTPCallError(.answerTooLarge, message: "the answer is larger than \(maxBody) bytes") }
            throw HTTPCallError(error.timedOut ? .timedOut : .unreachable, message: error.message)
        }
        return HTTPCallResponse(status: easy.responseCode(), headers: state.headers, body: state.response)
    }
}

/// The proxy for `url` when a proxy variable names one of tokenproxy's own listen addresses
/// (CONTRACT.md: such a variable is ignored); nil when none does, and libcurl reads the variables
/// itself, as curl does.
private func passingOverOwnAddresses(_ url: String) -> ProxyEnvironment? {
    let own = OwnListenAddresses.current
    guard !own.isEmpty else { return nil }
    let scheme = url.prefix { $0 != ":" }.lowercased()
    // getenv for the few names read, not ProcessInfo's dictionary of every variable (made anew
    // on each call: hundreds of thousands of instructions, once per telemetry export).
    let environment = ProxyEnvironment(scheme: scheme, environment: { getenv($0).map { String(cString: $0) } }, own: own)
    return environment.ignored.isEmpty ? nil : environment
}

/// One call's bytes, as libcurl's callbacks deliver and ask for them.
private final class CallState: CurlTransferDelegate {
    let body: [UInt8]
    var sent = 0
    var response: [UInt8] = []
    var headers: [(name: String, value: String)] = []
    var tooLarge = false
    init(body: [UInt8]) { self.body = body }

    func curlReceived(body bytes: UnsafeRawBufferPointer) -> Bool {
        if response.count + bytes.count > BlockingHTTPClient.maxBody {
            tooLarge = true
            return false
        }
        response.append(contentsOf: bytes)
        return true
    }

    func curlReceived(headerLine bytes: UnsafeRawBufferPointer) {
        let line = String(decoding: bytes, as: UTF8.self)
        if line.hasPrefix("HTTP/") {
            headers.removeAll()  // a new (possibly final) response head
        } else if let colon = line.firstIndex(of: ":") {
            let name = line[..<colon].lowercased()
            let value = line[line.index(after: colon)...].trimmingCharacters(in: .whitespacesAndNewlines)
            headers.append((name, value))
        }
    }

    func curlSend(into buffer: UnsafeMutableRawBufferPointer) -> Int {
        let n = min(buffer.count, body.count - sent)
        guard n > 0 else { return 0 }
        body.withUnsafeBytes { raw in
            buffer.baseAddress!.copyMemory(from: raw.baseAddress! + sent, byteCount: n)
        }
        sent += n
        return n
    }
}
