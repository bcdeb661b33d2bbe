import Foundation

/// A response as a test client received it: its header fields in order and its body bytes, and
/// the questions assertions ask of them.
public protocol ReceivedResponse {
    var status: Int { get }
    var headers: [(name: String, value: String)] { get }
    var body: [UInt8] { get }
}

extension ReceivedResponse {
    /// The first value of a header (case-insensitive name).
    public func header(_ name: String) -> String? {
        headers.first { $0.name.caseInsensitiveCompare(name) == .orderedSame }?.value
    }

    /// Every value of a header (case-insensitive name).
    public func headers(named name: String) -> [String] {
        headers.filter { $0.name.caseInsensitiveCompare(name) == .orderedSame }.map(\.value)
    }

    public var bodyString: String { String(decoding: body, as: UTF8.self) }

    /// The body parsed as a JSON object, or nil.
    public var json: [String: Any]? {
        (try? JSONSerialization.jsonObject(with: Data(body))) as? [String: Any]
    }
}

/// A parsed HTTP/1.1 response, for assertions.
public struct HTTPResponse: ReceivedResponse, Sendable, CustomStringConvertible {
    public var version: String
    public var status: Int
    public var reason: String
    /// Header fields in the order received.
    public var headers: [(name: String, value: String)]
    /// The body with chunked coding removed.
    public var body: [UInt8]
    /// The chunked trailer fields, if any.
    public var trailers: [(name: String, value: String)] = []

    public var description: String {
        "HTTP \(status) \(reason) headers=\(headers.map { "\($0.name): \($0.value)" }) body=\(bodyString.prefix(500))"
    }
}

/// A small incremental parser for responses on a raw connection (RFC 9112 §6.3 message length).
public enum HTTPResponseParser {
    public enum Outcome {
        /// A whole response and how many bytes of the buffer it used.
        case complete(HTTPResponse, consumed: Int)
        /// More bytes are needed.
        case incomplete
    }

    /// Parses one response from the front of `buffer`.
    /// - Parameters:
    ///   - requestMethod: the method of the request it answers (HEAD responses have no body).
    ///   - peerClosed: the connection is closed, so a body delimited by close is complete.
    public static func parse(_ buffer: [UInt8], requestMethod: String = "GET", peerClosed: Bool = false) throws -> Outcome {
        guard let headEnd = find([13, 10, 13, 10], in: buffer, from: 0) else {
            if peerClosed && !buffer.isEmpty {
                throw HarnessError("connection closed inside a response head: \(String(decoding: buffer, as: UTF8.self).prefix(300))")
            }
            return .incomplete
        }
        let headText = String(decoding: buffer[0..<headEnd], as: UTF8.self)
        var lines = headText.components(separatedBy: "\r\n")
        let statusLine = lines.removeFirst()
        let parts = statusLine.split(separator: " ", maxSplits: 2, omittingEmptySubsequences: false)
        guard parts.count >= 2, parts[0].hasPrefix("HTTP/"), let status = Int(parts[1]) else {
            throw HarnessError("not an HTTP status line: \(statusLine.prefix(200))")
        }
        var headers: [(name: String, value: String)] = []
        for line in lines where !line.isEmpty {
            guard let colon = line.firstIndex(of: ":") else { throw HarnessError("bad header line: \(line)") }
            headers.append((String(line[..<colon]), line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)))
        }
        var response = HTTPResponse(version: String(parts[0]), status: status, reason: parts.count > 2 ? String(parts[2]) : "", headers: headers, body: [])
        let bodyStart = headEnd + 4

        // RFC 9112 §6.3: HEAD, 1xx, 204 and 304 have no body.
        if requestMethod == "HEAD" || (100..<200).contains(status) || status == 204 || status == 304 {
            return .complete(response, consumed: bodyStart)
        }
        if let te = response.header("Transfer-Encoding"), te.lowercased().contains("chunked") {
            var index = bodyStart
            var body: [UInt8] = []
            while true {
                guard let lineEnd = find([13, 10], in: buffer, from: index) else {
                    if peerClosed { throw HarnessError("connection closed inside a chunked body") }
                    return .incomplete
                }
                let sizeText = String(decoding: buffer[index..<lineEnd], as: UTF8.self).split(separator: ";").first ?? ""
                guard let size = Int(sizeText.trimmingCharacters(in: .whitespaces), radix: 16) else {
                    throw HarnessError("bad chunk size: \(sizeText)")
                }
                index = lineEnd + 2
                if size == 0 {
                    // Trailer section up to an empty line.
                    var trailers: [(name: String, value: String)] = []
                    while true {
                        guard let end = find([13, 10], in: buffer, from: index) else {
                            if peerClosed { throw HarnessError("connection closed inside chunked trailers") }
                            return .incomplete
                        }
                        if end == index {
                            response.body = body
                            response.trailers = trailers
                            return .complete(response, consumed: end + 2)
                        }
                        let line = String(decoding: buffer[index..<end], as: UTF8.self)
                        if let colon = line.firstIndex(of: ":") {
                            trailers.append((String(line[..<colon]), line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)))
                        }
                        index = end + 2
                    }
                }
                guard buffer.count >= index + size + 2 else {
                    if peerClosed { throw HarnessError("connection closed inside a chunk") }
                    return .incomplete
                }
                body.append(contentsOf: buffer[index..<(index + size)])
                index += size + 2
            }
        }
        if let cl = response.header("Content-Length") {
            guard let length = Int(cl) else { throw HarnessError("bad Content-Length: \(cl)") }
            guard buffer.count >= bodyStart + length else {
                if peerClosed { throw HarnessError("connection closed after \(buffer.count - bodyStart) of \(length) body bytes of a \(status) response") }
                return .incomplete
            }
            response.body = Array(buffer[bodyStart..<(bodyStart + length)])
            return .complete(response, consumed: bodyStart + length)
        }
        // Delimited by close.
        guard peerClosed else { return .incomplete }
        response.body = Array(buffer[bodyStart...])
        return .complete(response, consumed: buffer.count)
    }

    /// Parses every complete response in `buffer` (pipelined answers), in order.
    public static func parseAll(_ buffer: [UInt8], requestMethods: [String] = [], peerClosed: Bool = true) throws -> [HTTPResponse] {
        var rest = buffer[...]
        var responses: [HTTPResponse] = []
        while !rest.isEmpty {
            let method = responses.count < requestMethods.count ? requestMethods[responses.count] : "GET"
            switch try parse(Array(rest), requestMethod: method, peerClosed: peerClosed) {
            case .complete(let response, let consumed):
                responses.append(response)
                rest = rest.dropFirst(consumed)
            case .incomplete:
                return responses
            }
        }
        return responses
    }

    static func find(_ needle: [UInt8], in haystack: [UInt8], from start: Int) -> Int? {
        guard haystack.count >= needle.count, start <= haystack.count - needle.count else { return nil }
        var i = start
        while i <= haystack.count - needle.count {
            if haystack[i] == needle[0] {
                var j = 1
                while j < needle.count && haystack[i + j] == needle[j] { j += 1 }
                if j == needle.count { return i }
            }
            i += 1
        }
        return nil
    }
}
