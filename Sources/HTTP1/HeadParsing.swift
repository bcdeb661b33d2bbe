import Basics

// Parsing of a complete request head, held in one buffer. Works on byte ranges: the RequestHead keeps
// the buffer and where each field is in it (a FieldBlock); Strings are made for the method, the target
// and Host only. Field lines are checked by `scanFieldLine` and the framing fields read by
// `FramingFields`, as for responses.

/// The next line of a complete section, without its terminator; nil at the blank line that ends it.
/// A CR left inside the line is caught by the line parsers (bare CR, RFC 9112 §2.2).
@inline(__always)
private func nextLine(_ buffer: UnsafeRawBufferPointer, from start: inout Int) -> Range<Int>? {
    let i = indexOfLF(buffer, start..<buffer.count) ?? buffer.count
    var end = i
    if end > start && buffer[end - 1] == asciiCR { end -= 1 }
    let line = start..<end
    start = i + 1
    return line.isEmpty ? nil : line
}

/// The bytes as a String, invalid UTF-8 repaired as `String(decoding:as:)` does. Built in place:
/// up to 15 ASCII bytes (the usual target and Host) make a small String without the UTF-8 validator.
private func string(_ buffer: UnsafeRawBufferPointer, _ range: Range<Int>) -> String {
    String(unsafeUninitializedCapacity: range.count) { out in
        UnsafeMutableRawBufferPointer(out).copyMemory(from: UnsafeRawBufferPointer(rebasing: buffer[range]))
        return range.count
    }
}

/// The method as a String: the common ones as literals (no String made and checked per request).
private func method(_ buffer: UnsafeRawBufferPointer, _ range: Range<Int>) -> String {
    if bytesEqual(buffer, range, "GET") { return "GET" }
    if bytesEqual(buffer, range, "POST") { return "POST" }
    if bytesEqual(buffer, range, "HEAD") { return "HEAD" }
    if bytesEqual(buffer, range, "PUT") { return "PUT" }
    return string(buffer, range)
}

/// The bytes equal `literal` exactly (``memoryEqual(_:_:count:)``: a word at a time, not a byte).
private func bytesEqual(_ buffer: UnsafeRawBufferPointer, _ range: Range<Int>, _ literal: StaticString) -> Bool {
    guard range.count == literal.utf8CodeUnitCount, range.upperBound <= buffer.count, let base = buffer.baseAddress else {
        return false
    }
    return memoryEqual(base + range.lowerBound, literal.utf8Start, count: range.count)
}

extension FieldLineProblem {
    /// The request's 400 reason.
    var requestReason: String {
        switch self {
        case .obsoleteFolding: return "obsolete line folding"
        case .invalidName: return "invalid header name"
        case .noColon: return "header line without colon"
        case .emptyName: return "empty header name"
        case .invalidValue: return "invalid character in header value"
        }
    }
}

/// Parses the head in `bytes` (request line through the blank line). `spans` must come empty; it
/// receives where each field is, and the RequestHead shares it and `bytes`.
func parseRequestHead(_ bytes: [UInt8], spans: inout [FieldBlock.Span]) -> Result<RequestHead, RequestParseError> {
    bytes.withUnsafeBytes { parseRequestHead(bytes, $0, spans: &spans) }
}

private func parseRequestHead(
    _ bytes: [UInt8], _ buffer: UnsafeRawBufferPointer, spans: inout [FieldBlock.Span]
) -> Result<RequestHead, RequestParseError> {
    var cursor = 0
    guard let requestLine = nextLine(buffer, from: &cursor) else {
        return .failure(.badRequest("invalid request line"))
    }

    // RFC 9112 §3: request-line = method SP request-target SP HTTP-version, with single spaces.
    var i = requestLine.lowerBound
    while i < requestLine.upperBound && isTokenByte(buffer[i]) { i += 1 }
    let methodRange = requestLine.lowerBound..<i
    guard !methodRange.isEmpty, i < requestLine.upperBound, buffer[i] == asciiSP else {
        return .failure(.badRequest("invalid request line"))
    }
    i += 1
    let targetStart = i
    // RFC 9112 §3.2: the request-target holds no whitespace or control bytes; we also refuse non-ASCII.
    // The same pass sees whether it is a plain path (`RequestTarget.isPlainPath`).
    var plainPath = i < requestLine.upperBound && buffer[i] == UInt8(ascii: "/")
    while i < requestLine.upperBound && buffer[i] > asciiSP && buffer[i] < 0x7F {
        let b = buffer[i]
        if b == UInt8(ascii: "?") || b == UInt8(ascii: "#") || b == UInt8(ascii: "%") || b == UInt8(ascii: ".") {
            plainPath = false
        }
        i += 1
    }
    let targetRange = targetStart..<i
    guard !targetRange.isEmpty, i < requestLine.upperBound, buffer[i] == asciiSP else {
        return .failure(.badRequest("invalid request line"))
    }
    let versionRange = (i + 1)..<requestLine.upperBound
    // RFC 9112 §2.3: HTTP-version = "HTTP/" DIGIT "." DIGIT. We speak 1.0 and 1.1; a higher minor
    // version of HTTP/1 is processed as 1.1 (RFC 9110 §2.5), any other major version is refused.
    let version: HTTPVersion
    if bytesEqual(buffer, versionRange, "HTTP/1.1") {
        version = .http1_1
    } else if bytesEqual(buffer, versionRange, "HTTP/1.0") {
        version = .http1_0
    } else if versionRange.count == 8, bytesEqual(buffer, versionRange.lowerBound..<(versionRange.lowerBound + 7), "HTTP/1."),
        buffer[versionRange.lowerBound + 7] >= UInt8(ascii: "0"), buffer[versionRange.lowerBound + 7] <= UInt8(ascii: "9")
    {
        version = .http1_1
    } else {
        return .failure(.badRequest("unsupported HTTP version"))
    }

    var hostCount = 0
    var hostValue: Range<Int>? = nil
    var framingFields = FramingFields()
    var droppedFields = 0

    while let line = nextLine(buffer, from: &cursor) {
        let parts: FieldLineParts
        switch scanFieldLine(UnsafeRawBufferPointer(rebasing: buffer[line])) {
        case .failure(let problem): return .failure(.badRequest(problem.requestReason))
        case .success(let found): parts = found
        }
        // A name with an underscore is dropped (nginx's `underscores_in_headers off`): WSGI and CGI
        // servers map `X_Forwarded_For` and `X-Forwarded-For` onto one variable (HTTP_X_FORWARDED_FOR),
        // so forwarding it would let a client spoof a field the proxy sets.
        if parts.nameHasUnderscore {
            droppedFields += 1
            continue
        }
        let name = line.lowerBound..<(line.lowerBound + parts.colon)
        let value = (line.lowerBound + parts.value.lowerBound)..<(line.lowerBound + parts.value.upperBound)
        let kind = FramingFields.Kind(name: name, in: buffer)
        if case .host = kind {
            hostCount += 1
            hostValue = value
        } else {
            framingFields.take(kind, value: value, in: buffer)
        }
        spans.append(FieldBlock.Span(start: name.lowerBound, colon: name.upperBound, valueStart: value.lowerBound, valueEnd: value.upperBound))
    }

    // RFC 9112 §3.2: a client MUST send Host in HTTP/1.1; a server MUST answer 400 when it is missing
    // or appears more than once. A CONNECT without one is served (CONTRACT "HTTPS for clients"): its
    // target is the authority, and clients that send none exist.
    if hostCount > 1 { return .failure(.badRequest("multiple Host headers")) }
    if hostCount == 0 && version == .http1_1 && !bytesEqual(buffer, methodRange, "CONNECT") {
        return .failure(.badRequest("missing Host header"))
    }
    if let problem = framingFields.contentLengthProblem { return .failure(.badRequest(problem)) }

    let framing: BodyFraming
    if framingFields.sawTransferEncoding {
        // RFC 9112 §6.1: Transfer-Encoding with Content-Length is a smuggling attempt; refuse it.
        if framingFields.contentLength != nil { return .failure(.badRequest("both Content-Length and Transfer-Encoding")) }
        // RFC 9112 §6.1: a server MUST NOT trust Transfer-Encoding on an HTTP/1.0 message.
        if version == .http1_0 { return .failure(.badRequest("Transfer-Encoding on HTTP/1.0")) }
        switch framingFields.transferCodingProblem {
        case nil:
            framing = .chunked
        case .unsupported:
            // RFC 9112 §6.1: a server that does not understand a transfer coding answers 501. This also
            // covers a final coding other than chunked (RFC 9112 §6.3 would allow 400; the connection
            // closes either way).
            return .failure(.notImplemented(FramingFields.TransferCodingProblem.unsupported.reason))
        case let problem?:
            return .failure(.badRequest(problem.reason))
        }
    } else if let contentLength = framingFields.contentLength {
        framing = .contentLength(contentLength)
    } else {
        // RFC 9112 §6.3: a request with neither field has no body.
        framing = .none
    }

    return .success(
        RequestHead(
            method: method(buffer, methodRange), target: string(buffer, targetRange), targetIsPlainPath: plainPath, version: version,
            fields: FieldBlock(bytes: bytes, spans: spans), host: hostValue.map { string(buffer, $0) }, framing: framing,
            keepAlive: framingFields.persists(isHTTP10: version == .http1_0), expectContinue: framingFields.expectContinue,
            // Nearly always none: the empty literal then shares no buffer with `framingFields` (no retain).
            connectionOptions: framingFields.connectionOptions.isEmpty ? [] : framingFields.connectionOptions,
            droppedFieldCount: droppedFields))
}
