// Parsing of a complete request head, held in one buffer. Works on byte ranges: the RequestHead keeps
// the buffer and where each field is in it; Strings are made for the method, the target and Host only.

/// The next line of a complete section, without its terminator; nil at the blank line that ends it.
/// A CR left inside the line is caught by the line parsers (bare CR, RFC 9112 §2.2).
func nextLine(_ buffer: UnsafeBufferPointer<UInt8>, from start: inout Int) -> Range<Int>? {
    let i = indexOfLF(UnsafeRawBufferPointer(buffer), start..<buffer.count) ?? buffer.count
    var end = i
    if end > start && buffer[end - 1] == asciiCR { end -= 1 }
    let line = start..<end
    start = i + 1
    return line.isEmpty ? nil : line
}

private func string(_ buffer: UnsafeBufferPointer<UInt8>, _ range: Range<Int>) -> String {
    String(decoding: UnsafeBufferPointer(rebasing: buffer[range]), as: UTF8.self)
}

/// The bytes equal `literal` exactly.
private func bytesEqual(_ buffer: UnsafeBufferPointer<UInt8>, _ range: Range<Int>, _ literal: StaticString) -> Bool {
    guard range.count == literal.utf8CodeUnitCount else { return false }
    let p = literal.utf8Start
    var k = 0
    for index in range {
        if buffer[index] != p[k] { return false }
        k += 1
    }
    return true
}

/// The bytes equal the lowercase `literal`, ignoring ASCII case.
private func bytesEqualIgnoringCase(
    _ buffer: UnsafeBufferPointer<UInt8>, _ range: Range<Int>, _ literal: StaticString
) -> Bool {
    guard range.count == literal.utf8CodeUnitCount else { return false }
    let p = literal.utf8Start
    var k = 0
    for index in range {
        if asciiLower(buffer[index]) != p[k] { return false }
        k += 1
    }
    return true
}

private func lowercasedString(_ buffer: UnsafeBufferPointer<UInt8>, _ range: Range<Int>) -> String {
    String(unsafeUninitializedCapacity: range.count) { out in
        var k = 0
        for index in range {
            out[k] = asciiLower(buffer[index])
            k += 1
        }
        return k
    }
}

struct FieldLine {
    var name: Range<Int>
    var value: Range<Int>
    /// The name holds an underscore (see `parseHead`).
    var nameHasUnderscore = false
}

/// field-line = field-name ":" OWS field-value OWS (RFC 9112 §5).
func parseFieldLine(_ buffer: UnsafeBufferPointer<UInt8>, _ line: Range<Int>) -> Result<FieldLine, RequestParseError> {
    // RFC 9112 §5.2: obs-fold is refused in requests (400); so is whitespace before the first field
    // (RFC 9112 §2.2).
    if isOWS(buffer[line.lowerBound]) { return .failure(.badRequest("obsolete line folding")) }
    var colon = line.lowerBound
    var underscore = false
    while colon < line.upperBound && buffer[colon] != asciiColon {
        // RFC 9112 §5.1: the name is a token; no whitespace is allowed between it and the colon.
        guard isTokenByte(buffer[colon]) else { return .failure(.badRequest("invalid header name")) }
        if buffer[colon] == asciiUnderscore { underscore = true }
        colon += 1
    }
    guard colon < line.upperBound else { return .failure(.badRequest("header line without colon")) }
    guard colon > line.lowerBound else { return .failure(.badRequest("empty header name")) }
    // RFC 9112 §5.1: OWS around the value is not part of it.
    var lower = colon + 1
    var upper = line.upperBound
    while lower < upper && isOWS(buffer[lower]) { lower += 1 }
    while upper > lower && isOWS(buffer[upper - 1]) { upper -= 1 }
    for index in lower..<upper where !isFieldValueByte(buffer[index]) {
        // RFC 9110 §5.5: CR, LF, NUL and the other CTLs are invalid in values.
        return .failure(.badRequest("invalid character in header value"))
    }
    return .success(FieldLine(name: line.lowerBound..<colon, value: lower..<upper, nameHasUnderscore: underscore))
}

/// Calls `body` with each element of a list-based field value (RFC 9110 §5.6.1), trimmed of OWS, skipping
/// empty elements; stops early when `body` returns false.
private func forEachListElement(
    _ buffer: UnsafeBufferPointer<UInt8>, _ value: Range<Int>, _ body: (Range<Int>) -> Bool
) {
    var start = value.lowerBound
    while start <= value.upperBound {
        var end = start
        while end < value.upperBound && buffer[end] != UInt8(ascii: ",") { end += 1 }
        var lower = start
        var upper = end
        while lower < upper && isOWS(buffer[lower]) { lower += 1 }
        while upper > lower && isOWS(buffer[upper - 1]) { upper -= 1 }
        if lower < upper && !body(lower..<upper) { return }
        start = end + 1
    }
}

private enum KnownField {
    case other, host, contentLength, transferEncoding, connection, expect
}

private func classify(_ buffer: UnsafeBufferPointer<UInt8>, _ name: Range<Int>) -> KnownField {
    switch name.count {
    case 4: return bytesEqualIgnoringCase(buffer, name, "host") ? .host : .other
    case 6: return bytesEqualIgnoringCase(buffer, name, "expect") ? .expect : .other
    case 10: return bytesEqualIgnoringCase(buffer, name, "connection") ? .connection : .other
    case 14: return bytesEqualIgnoringCase(buffer, name, "content-length") ? .contentLength : .other
    case 17: return bytesEqualIgnoringCase(buffer, name, "transfer-encoding") ? .transferEncoding : .other
    default: return .other
    }
}

/// Parses the head in `bytes` (request line through the blank line). `fields` must come empty; it
/// receives where each field is, and the RequestHead shares it and `bytes`.
func parseHead(_ bytes: [UInt8], fields: inout [RequestHead.FieldSpan]) -> Result<RequestHead, RequestParseError> {
    bytes.withUnsafeBufferPointer { parseHead(bytes, $0, fields: &fields) }
}

private func parseHead(
    _ bytes: [UInt8], _ buffer: UnsafeBufferPointer<UInt8>, fields: inout [RequestHead.FieldSpan]
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
    while i < requestLine.upperBound && buffer[i] > asciiSP && buffer[i] < 0x7F { i += 1 }
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
    var contentLength: Int? = nil
    var sawTransferEncoding = false
    var codingCount = 0
    var chunkedCount = 0
    var connectionOptions: [String] = []
    var closeRequested = false
    var keepAliveRequested = false
    var expectContinue = false
    var droppedFields = 0

    while let line = nextLine(buffer, from: &cursor) {
        let field: FieldLine
        switch parseFieldLine(buffer, line) {
        case .failure(let error): return .failure(error)
        case .success(let parsed): field = parsed
        }
        // A name with an underscore is dropped (nginx's `underscores_in_headers off`): WSGI and CGI
        // servers map `X_Forwarded_For` and `X-Forwarded-For` onto one variable (HTTP_X_FORWARDED_FOR),
        // so forwarding it would let a client spoof a field the proxy sets.
        if field.nameHasUnderscore {
            droppedFields += 1
            continue
        }
        switch classify(buffer, field.name) {
        case .other:
            break
        case .host:
            hostCount += 1
            hostValue = field.value
        case .contentLength:
            // RFC 9112 §6.3: a list of identical values may be taken as one; anything else is invalid.
            var invalid = false
            var conflicting = false
            var sawElement = false
            forEachListElement(buffer, field.value) { element in
                var value = 0
                for index in element {
                    let b = buffer[index]
                    guard b >= UInt8(ascii: "0") && b <= UInt8(ascii: "9") else { invalid = true; return false }
                    let (times10, o1) = value.multipliedReportingOverflow(by: 10)
                    let (sum, o2) = times10.addingReportingOverflow(Int(b &- UInt8(ascii: "0")))
                    guard !o1 && !o2 else { invalid = true; return false }
                    value = sum
                }
                sawElement = true
                if let existing = contentLength, existing != value { conflicting = true; return false }
                contentLength = value
                return true
            }
            if invalid || !sawElement { return .failure(.badRequest("invalid Content-Length")) }
            if conflicting { return .failure(.badRequest("conflicting Content-Length values")) }
        case .transferEncoding:
            sawTransferEncoding = true
            forEachListElement(buffer, field.value) { element in
                // A coding may carry parameters (RFC 9112 §7); its name is the token before them.
                var end = element.lowerBound
                while end < element.upperBound && isTokenByte(buffer[end]) { end += 1 }
                codingCount += 1
                if bytesEqualIgnoringCase(buffer, element.lowerBound..<end, "chunked") { chunkedCount += 1 }
                return true
            }
        case .connection:
            forEachListElement(buffer, field.value) { element in
                if bytesEqualIgnoringCase(buffer, element, "close") { closeRequested = true }
                if bytesEqualIgnoringCase(buffer, element, "keep-alive") { keepAliveRequested = true }
                connectionOptions.append(lowercasedString(buffer, element))
                return true
            }
        case .expect:
            forEachListElement(buffer, field.value) { element in
                if bytesEqualIgnoringCase(buffer, element, "100-continue") { expectContinue = true }
                return true
            }
        }
        fields.append(
            RequestHead.FieldSpan(
                start: field.name.lowerBound, colon: field.name.upperBound, valueStart: field.value.lowerBound,
                valueEnd: field.value.upperBound))
    }

    // RFC 9112 §3.2: a client MUST send Host in HTTP/1.1; a server MUST answer 400 when it is missing
    // or appears more than once.
    if hostCount > 1 { return .failure(.badRequest("multiple Host headers")) }
    if hostCount == 0 && version == .http1_1 { return .failure(.badRequest("missing Host header")) }

    let framing: BodyFraming
    if sawTransferEncoding {
        // RFC 9112 §6.1: Transfer-Encoding with Content-Length is a smuggling attempt; refuse it.
        if contentLength != nil { return .failure(.badRequest("both Content-Length and Transfer-Encoding")) }
        // RFC 9112 §6.1: a server MUST NOT trust Transfer-Encoding on an HTTP/1.0 message.
        if version == .http1_0 { return .failure(.badRequest("Transfer-Encoding on HTTP/1.0")) }
        if codingCount == 0 { return .failure(.badRequest("empty Transfer-Encoding")) }
        // RFC 9112 §6.1: a server that does not understand a transfer coding answers 501. This also covers
        // a final coding other than chunked (RFC 9112 §6.3 would allow 400; the connection closes either way).
        if chunkedCount < codingCount { return .failure(.notImplemented("unsupported transfer coding")) }
        // RFC 9112 §7: chunked MUST NOT be applied more than once.
        if chunkedCount > 1 { return .failure(.badRequest("chunked applied more than once")) }
        framing = .chunked
    } else if let contentLength {
        framing = .contentLength(contentLength)
    } else {
        // RFC 9112 §6.3: a request with neither field has no body.
        framing = .none
    }

    // RFC 9112 §9.3: persistence is the default in 1.1; in 1.0 it needs "keep-alive"; "close" always wins.
    let keepAlive = !closeRequested && (version == .http1_1 || keepAliveRequested)

    return .success(
        RequestHead(
            method: string(buffer, methodRange), target: string(buffer, targetRange), version: version,
            bytes: bytes, fields: fields, host: hostValue.map { string(buffer, $0) }, framing: framing,
            keepAlive: keepAlive, expectContinue: expectContinue, connectionOptions: connectionOptions,
            droppedFieldCount: droppedFields))
}
