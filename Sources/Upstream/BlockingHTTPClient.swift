internal import CCurl
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

/// Network-level failure: nothing usable came back (connection refused, timeout, TLS).
public struct HTTPCallError: Error, Sendable, CustomStringConvertible {
    public let message: String
    public var description: String { message }
}

public enum BlockingHTTPClient {
    /// Answers at most this much body; an identity provider's answer is small.
    static let maxBody = 1 << 20

    public static func perform(_ request: HTTPCallRequest) throws -> HTTPCallResponse {
        let easy = CurlEasy()
        let state = CallState(body: request.body)
        let box = Unmanaged.passRetained(state)
        defer { box.release() }
        do {
            try easy.set(CURLOPT_NOSIGNAL, 1)
            try easy.set(CURLOPT_PROTOCOLS_STR, "http,https")
            try easy.set(CURLOPT_FOLLOWLOCATION, 0)
            try easy.set(CURLOPT_URL, request.url)
            try easy.set(CURLOPT_TIMEOUT_MS, Int(request.timeout * 1000))
            try easy.set(CURLOPT_CONNECTTIMEOUT_MS, Int(min(request.timeout, 10) * 1000))
            try easy.setDataCallback(CURLOPT_WRITEFUNCTION, callWriteCallback)
            try easy.setDataCallback(CURLOPT_HEADERFUNCTION, callHeaderCallback)
            try easy.set(CURLOPT_WRITEDATA, pointer: box.toOpaque())
            try easy.set(CURLOPT_HEADERDATA, pointer: box.toOpaque())
            if request.method == "POST" || !request.body.isEmpty {
                try easy.set(CURLOPT_POST, 1)
                try easy.setDataCallback(CURLOPT_READFUNCTION, callReadCallback)
                try easy.set(CURLOPT_READDATA, pointer: box.toOpaque())
                try easy.set(CURLOPT_POSTFIELDSIZE_LARGE, int64: Int64(request.body.count))
            }
            if request.method != "POST" && request.method != "GET" {
                try easy.set(CURLOPT_CUSTOMREQUEST, request.method)
            }
            // No Expect: 100-continue round trip, and only the headers asked for.
            var lines = HeaderLines()
            for line in request.headers { lines.append(line: line) }
            lines.appendRemoval("Expect")
            try easy.setHeaders(lines)
        } catch {
            throw HTTPCallError(message: "cannot set up the request: \(error)")
        }
        let rc = curl_easy_perform(easy.handle)
        guard rc == CURLE_OK else {
            throw HTTPCallError(message: String(cString: curl_easy_strerror(rc)))
        }
        if state.tooLarge { throw HTTPCallError(message: "the answer is larger than \(maxBody) bytes") }
        return HTTPCallResponse(status: easy.responseCode(), headers: state.headers, body: state.response)
    }
}

private final class CallState {
    let body: [UInt8]
    var sent = 0
    var response: [UInt8] = []
    var headers: [(name: String, value: String)] = []
    var tooLarge = false
    init(body: [UInt8]) { self.body = body }
}

private let callWriteCallback: @convention(c) (UnsafeMutablePointer<CChar>?, Int, Int, UnsafeMutableRawPointer?) -> Int = { ptr, size, count, user in
    let state = Unmanaged<CallState>.fromOpaque(user!).takeUnretainedValue()
    let n = size * count
    if state.response.count + n > BlockingHTTPClient.maxBody {
        state.tooLarge = true
        return 0
    }
    state.response.append(contentsOf: UnsafeRawBufferPointer(start: ptr, count: n))
    return n
}

private let callHeaderCallback: @convention(c) (UnsafeMutablePointer<CChar>?, Int, Int, UnsafeMutableRawPointer?) -> Int = { ptr, size, count, user in
    let state = Unmanaged<CallState>.fromOpaque(user!).takeUnretainedValue()
    let n = size * count
    let line = String(decoding: UnsafeRawBufferPointer(start: ptr, count: n), as: UTF8.self)
    if line.hasPrefix("HTTP/") {
        state.headers.removeAll()  // a new (possibly final) response head
    } else if let colon = line.firstIndex(of: ":") {
        let name = line[..<colon].lowercased()
        let value = line[line.index(after: colon)...].trimmingCharacters(in: .whitespacesAndNewlines)
        state.headers.append((name, value))
    }
    return n
}

private let callReadCallback: @convention(c) (UnsafeMutablePointer<CChar>?, Int, Int, UnsafeMutableRawPointer?) -> Int = { ptr, size, count, user in
    let state = Unmanaged<CallState>.fromOpaque(user!).takeUnretainedValue()
    let n = min(size * count, state.body.count - state.sent)
    guard n > 0, let ptr else { return 0 }
    state.body.withUnsafeBytes { raw in
        UnsafeMutableRawPointer(ptr).copyMemory(from: raw.baseAddress! + state.sent, byteCount: n)
    }
    state.sent += n
    return n
}
