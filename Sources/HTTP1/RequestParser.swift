/// An incremental HTTP/1.1 request parser (RFC 9112): bytes in, events out, no I/O.
///
/// The head is accumulated internally until the blank line that ends it; body bytes are reported as
/// ranges of the caller's buffer. Pipelined requests are parsed one after another.
public struct RequestParser {
    private enum State {
        /// Between messages; empty lines are skipped (RFC 9112 §2.2).
        case idle
        case head
        /// `.end` is due on the next call.
        case endPending
        case fixedBody(remaining: Int)
        case chunkSize
        /// Whitespace after the size: only a chunk extension may follow.
        case chunkSizeWhitespace
        case chunkExtension
        case chunkSizeLF
        case chunkData(remaining: Int)
        case chunkDataCR
        case chunkDataLF
        case trailers
        case failed
    }

    /// The longest chunk extension we skip (RFC 9112 §7.1.1 lets a server limit them).
    static let maxChunkExtensionBytes = 4096
    /// The most hex digits a chunk size may have (leading zeros included).
    static let maxChunkSizeDigits = 32

    private let limits: ParserLimits
    private var state: State = .idle
    /// Head or trailer bytes seen so far.
    private var section: [UInt8] = []
    private var lineLength = 0
    private var lineStartsWithCR = false
    private var idleSawCR = false
    private var skippedEmptyLineBytes = 0
    private var chunkSizeValue = 0
    private var chunkSizeDigits = 0
    private var chunkExtensionBytes = 0
    private var bodyTotal = 0

    public init(limits: ParserLimits) {
        self.limits = limits
    }

    /// Between messages, with no byte of the next message seen (empty lines before a request line are
    /// not part of it).
    public var isIdle: Bool {
        if case .idle = state { return !idleSawCR }
        return false
    }

    /// Consumes a prefix of `input` and returns at most one event. Call again with the rest while
    /// `consumed < input.count` or an event was returned. `event == nil` with everything consumed means:
    /// need more bytes. After `.error`, every call consumes everything and returns no event.
    public mutating func parse(_ input: UnsafeRawBufferPointer) -> (consumed: Int, event: ParseEvent?) {
        let n = input.count
        var i = 0
        while true {
            switch state {
            case .failed:
                return (n, nil)

            case .endPending:
                resetForNextMessage()
                return (i, .end)

            case .idle:
                guard i < n else { return (i, nil) }
                let b = input[i]
                if b == asciiLF {
                    // RFC 9112 §2.2: a server SHOULD ignore at least one empty line before the request-line.
                    idleSawCR = false
                } else if b == asciiCR {
                    // RFC 9112 §2.2: a CR not followed by LF is invalid.
                    if idleSawCR { return fail(i, .badRequest("bare CR")) }
                    idleSawCR = true
                } else {
                    if idleSawCR { return fail(i, .badRequest("bare CR")) }
                    state = .head
                    continue
                }
                i += 1
                skippedEmptyLineBytes += 1
                if skippedEmptyLineBytes > limits.maxHeaderBytes {
                    return fail(i, .badRequest("too many empty lines before the request line"))
                }

            case .head:
                guard i < n else { return (i, nil) }
                let scan = scanSection(input, from: i)
                switch scan {
                case .tooLarge:
                    return fail(i, .headersTooLarge)
                case .needMore:
                    return (n, nil)
                case .complete(let next):
                    let result = section.withUnsafeBufferPointer { parseHead($0) }
                    switch result {
                    case .failure(let error):
                        return fail(next, error)
                    case .success(let head):
                        // The declared length alone is enough to refuse the body (413), before any of it arrives.
                        if case .contentLength(let length) = head.framing, limits.maxBodyBytes > 0,
                            length > limits.maxBodyBytes
                        {
                            return fail(next, .bodyTooLarge)
                        }
                        switch head.framing {
                        case .none, .contentLength(0): state = .endPending
                        case .contentLength(let length): state = .fixedBody(remaining: length)
                        case .chunked: beginChunkSize()
                        }
                        return (next, .head(head))
                    }
                }

            case .fixedBody(let remaining):
                guard i < n else { return (i, nil) }
                let take = min(remaining, n - i)
                state = take == remaining ? .endPending : .fixedBody(remaining: remaining - take)
                return (i + take, .body(i..<(i + take)))

            case .chunkSize:
                guard i < n else { return (i, nil) }
                let b = input[i]
                // RFC 9112 §7.1: chunk-size = 1*HEXDIG, optionally followed by chunk extensions.
                if let digit = hexValue(b) {
                    if chunkSizeValue > (Int.max - digit) / 16 || chunkSizeDigits >= Self.maxChunkSizeDigits {
                        return fail(i, .badRequest("chunk size too large"))
                    }
                    chunkSizeValue = chunkSizeValue * 16 + digit
                    chunkSizeDigits += 1
                } else if chunkSizeDigits == 0 {
                    return fail(i, .badRequest("invalid chunk size"))
                } else if b == UInt8(ascii: ";") {
                    state = .chunkExtension
                } else if isOWS(b) {
                    // RFC 9112 §7.1.1: BWS is allowed before ";" only.
                    state = .chunkSizeWhitespace
                } else if b == asciiCR {
                    state = .chunkSizeLF
                } else {
                    return fail(i, .badRequest("invalid chunk size"))
                }
                i += 1

            case .chunkSizeWhitespace:
                guard i < n else { return (i, nil) }
                let b = input[i]
                if b == UInt8(ascii: ";") {
                    state = .chunkExtension
                } else if !isOWS(b) {
                    return fail(i, .badRequest("invalid chunk size"))
                }
                i += 1
                chunkExtensionBytes += 1
                if chunkExtensionBytes > Self.maxChunkExtensionBytes {
                    return fail(i, .badRequest("chunk extension too long"))
                }

            case .chunkExtension:
                guard i < n else { return (i, nil) }
                let b = input[i]
                // RFC 9112 §7.1.1: extensions are skipped; we only bound them and refuse control bytes.
                if b == asciiCR {
                    state = .chunkSizeLF
                } else if !isFieldValueByte(b) {
                    return fail(i, .badRequest("invalid chunk extension"))
                }
                i += 1
                chunkExtensionBytes += 1
                if chunkExtensionBytes > Self.maxChunkExtensionBytes {
                    return fail(i, .badRequest("chunk extension too long"))
                }

            case .chunkSizeLF:
                guard i < n else { return (i, nil) }
                // RFC 9112 §7.1: the chunk-size line ends with CRLF (no bare LF or CR in body framing).
                guard input[i] == asciiLF else { return fail(i, .badRequest("invalid chunk size line")) }
                i += 1
                if chunkSizeValue == 0 {
                    // RFC 9112 §7.1.2: the last chunk is followed by the trailer section.
                    state = .trailers
                    section.removeAll(keepingCapacity: true)
                    lineLength = 0
                    lineStartsWithCR = false
                } else {
                    if limits.maxBodyBytes > 0 {
                        let (total, overflow) = bodyTotal.addingReportingOverflow(chunkSizeValue)
                        if overflow || total > limits.maxBodyBytes { return fail(i, .bodyTooLarge) }
                        bodyTotal = total
                    }
                    state = .chunkData(remaining: chunkSizeValue)
                }

            case .chunkData(let remaining):
                guard i < n else { return (i, nil) }
                let take = min(remaining, n - i)
                state = take == remaining ? .chunkDataCR : .chunkData(remaining: remaining - take)
                return (i + take, .body(i..<(i + take)))

            case .chunkDataCR:
                guard i < n else { return (i, nil) }
                // RFC 9112 §7.1: chunk = chunk-size [ chunk-ext ] CRLF chunk-data CRLF.
                guard input[i] == asciiCR else { return fail(i, .badRequest("missing CRLF after chunk data")) }
                state = .chunkDataLF
                i += 1

            case .chunkDataLF:
                guard i < n else { return (i, nil) }
                guard input[i] == asciiLF else { return fail(i, .badRequest("missing CRLF after chunk data")) }
                i += 1
                beginChunkSize()

            case .trailers:
                guard i < n else { return (i, nil) }
                switch scanSection(input, from: i) {
                case .tooLarge:
                    return fail(i, .headersTooLarge)
                case .needMore:
                    return (n, nil)
                case .complete(let next):
                    // RFC 9112 §7.1.2: trailer fields are parsed like header fields; we validate and drop them.
                    let error = section.withUnsafeBufferPointer { buffer -> RequestParseError? in
                        var fields: [HTTPField] = []
                        var start = 0
                        while let line = nextLine(buffer, from: &start) {
                            if case .failure(let error) = parseFieldLine(buffer, line, into: &fields) { return error }
                        }
                        return nil
                    }
                    if let error { return fail(next, error) }
                    resetForNextMessage()
                    return (next, .end)
                }
            }
        }
    }

    private mutating func fail(_ consumed: Int, _ error: RequestParseError) -> (consumed: Int, event: ParseEvent?) {
        state = .failed
        section = []
        return (consumed, .error(error))
    }

    private mutating func beginChunkSize() {
        state = .chunkSize
        chunkSizeValue = 0
        chunkSizeDigits = 0
        chunkExtensionBytes = 0
    }

    private mutating func resetForNextMessage() {
        state = .idle
        section.removeAll(keepingCapacity: true)
        lineLength = 0
        lineStartsWithCR = false
        idleSawCR = false
        skippedEmptyLineBytes = 0
        bodyTotal = 0
    }

    private enum SectionScan {
        case needMore
        case tooLarge
        /// The blank line ends just before this index of the input.
        case complete(next: Int)
    }

    /// Appends input bytes to `section` until the blank line that ends a head or trailer section,
    /// refusing sections over `maxHeaderBytes` (counted from the first byte through the blank line).
    private mutating func scanSection(_ input: UnsafeRawBufferPointer, from start: Int) -> SectionScan {
        let room = limits.maxHeaderBytes - section.count
        let stop = min(input.count, start + max(room, 0))
        var i = start
        while i < stop {
            let b = input[i]
            i += 1
            if b == asciiLF {
                // RFC 9112 §2.2: a recipient MAY recognise a single LF as a line terminator.
                if lineLength == 0 || (lineLength == 1 && lineStartsWithCR) {
                    section.append(contentsOf: UnsafeRawBufferPointer(rebasing: input[start..<i]))
                    return .complete(next: i)
                }
                lineLength = 0
            } else {
                if lineLength == 0 { lineStartsWithCR = b == asciiCR }
                lineLength += 1
            }
        }
        if stop < input.count { return .tooLarge }
        section.append(contentsOf: UnsafeRawBufferPointer(rebasing: input[start..<stop]))
        return .needMore
    }
}

// MARK: - Head parsing

/// The next line of a complete section, without its terminator; nil at the blank line that ends it.
/// A CR left inside the line is caught by the line parsers (bare CR, RFC 9112 §2.2).
private func nextLine(_ buffer: UnsafeBufferPointer<UInt8>, from start: inout Int) -> Range<Int>? {
    var i = start
    while i < buffer.count && buffer[i] != asciiLF { i += 1 }
    var end = i
    if end > start && buffer[end - 1] == asciiCR { end -= 1 }
    let line = start..<end
    start = i + 1
    return line.isEmpty ? nil : line
}

private func string(_ buffer: UnsafeBufferPointer<UInt8>, _ range: Range<Int>) -> String {
    String(decoding: UnsafeBufferPointer(rebasing: buffer[range]), as: UTF8.self)
}

private func bytesEqual(_ buffer: UnsafeBufferPointer<UInt8>, _ range: Range<Int>, _ literal: StaticString) -> Bool {
    guard range.count == literal.utf8CodeUnitCount else { return false }
    let p = literal.utf8Start
    for (k, index) in range.enumerated() where buffer[index] != p[k] {
        return false
    }
    return true
}

private func parseFieldLine(
    _ buffer: UnsafeBufferPointer<UInt8>, _ line: Range<Int>, into fields: inout [HTTPField]
) -> Result<Void, RequestParseError> {
    // RFC 9112 §5.2: obs-fold is refused in requests (400).
    if isOWS(buffer[line.lowerBound]) { return .failure(.badRequest("obsolete line folding")) }
    var colon = line.lowerBound
    while colon < line.upperBound && buffer[colon] != asciiColon {
        // RFC 9112 §5.1: the name is a token; no whitespace is allowed between it and the colon.
        guard isTokenByte(buffer[colon]) else { return .failure(.badRequest("invalid header name")) }
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
        // RFC 9110 §5.5: CR, LF, NUL and other CTLs are invalid in values.
        return .failure(.badRequest("invalid character in header value"))
    }
    fields.append(HTTPField(name: string(buffer, line.lowerBound..<colon), value: string(buffer, lower..<upper)))
    return .success(())
}

/// Splits a list-based field value (RFC 9110 §5.6.1) and calls `body` with each trimmed, non-empty element.
private func forEachListElement(_ value: String, _ body: (Substring.UTF8View) -> Bool) -> Bool {
    for element in value.utf8.split(separator: UInt8(ascii: ","), omittingEmptySubsequences: false) {
        var trimmed = element
        while let first = trimmed.first, isOWS(first) { trimmed = trimmed.dropFirst() }
        while let last = trimmed.last, isOWS(last) { trimmed = trimmed.dropLast() }
        if trimmed.isEmpty { continue }
        if !body(trimmed) { return false }
    }
    return true
}

private func lowercased(_ bytes: Substring.UTF8View) -> String {
    String(decoding: bytes.lazy.map(asciiLower), as: UTF8.self)
}

private func parseHead(_ buffer: UnsafeBufferPointer<UInt8>) -> Result<RequestHead, RequestParseError> {
    var cursor = 0
    guard let requestLine = nextLine(buffer, from: &cursor) else {
        return .failure(.badRequest("invalid request line"))
    }

    // RFC 9112 §3: request-line = method SP request-target SP HTTP-version, single spaces.
    var i = requestLine.lowerBound
    while i < requestLine.upperBound && isTokenByte(buffer[i]) { i += 1 }
    let methodRange = requestLine.lowerBound..<i
    guard !methodRange.isEmpty, i < requestLine.upperBound, buffer[i] == asciiSP else {
        return .failure(.badRequest("invalid request line"))
    }
    i += 1
    let targetStart = i
    // RFC 9112 §3.2: the request-target has no whitespace or control bytes; we also refuse non-ASCII.
    while i < requestLine.upperBound && buffer[i] > asciiSP && buffer[i] < 0x7F { i += 1 }
    let targetRange = targetStart..<i
    guard !targetRange.isEmpty, i < requestLine.upperBound, buffer[i] == asciiSP else {
        return .failure(.badRequest("invalid request line"))
    }
    let versionRange = (i + 1)..<requestLine.upperBound
    // RFC 9112 §2.3: HTTP-version = "HTTP/" DIGIT "." DIGIT; we speak 1.0 and 1.1 only.
    let version: HTTPVersion
    if bytesEqual(buffer, versionRange, "HTTP/1.1") {
        version = .http1_1
    } else if bytesEqual(buffer, versionRange, "HTTP/1.0") {
        version = .http1_0
    } else {
        return .failure(.badRequest("unsupported HTTP version"))
    }

    var fields: [HTTPField] = []
    while let line = nextLine(buffer, from: &cursor) {
        if case .failure(let error) = parseFieldLine(buffer, line, into: &fields) { return .failure(error) }
    }

    var hostCount = 0
    var contentLength: Int? = nil
    var sawTransferEncoding = false
    var codings: [String] = []
    var connectionOptions: [String] = []
    var expectContinue = false
    for field in fields {
        let name = field.name
        if asciiCaseInsensitiveEquals(name, "host") {
            hostCount += 1
        } else if asciiCaseInsensitiveEquals(name, "content-length") {
            // RFC 9112 §6.3: a list of identical values may be taken as one; anything else is invalid.
            var invalid = false
            let ok = forEachListElement(field.value) { element in
                var value = 0
                for b in element {
                    guard b >= UInt8(ascii: "0") && b <= UInt8(ascii: "9") else { invalid = true; return false }
                    let (times10, o1) = value.multipliedReportingOverflow(by: 10)
                    let (sum, o2) = times10.addingReportingOverflow(Int(b - UInt8(ascii: "0")))
                    guard !o1 && !o2 else { invalid = true; return false }
                    value = sum
                }
                if let existing = contentLength, existing != value { return false }
                contentLength = value
                return true
            }
            if invalid { return .failure(.badRequest("invalid Content-Length")) }
            if !ok { return .failure(.badRequest("conflicting Content-Length values")) }
            // RFC 9110 §5.6.1: a value that is all empty elements carries no length.
            if contentLength == nil { return .failure(.badRequest("invalid Content-Length")) }
        } else if asciiCaseInsensitiveEquals(name, "transfer-encoding") {
            sawTransferEncoding = true
            _ = forEachListElement(field.value) { element in
                // A coding may carry parameters (RFC 9112 §7); its name is the token before them.
                var coding = element
                if let semicolon = coding.firstIndex(where: { $0 == UInt8(ascii: ";") || isOWS($0) }) {
                    coding = coding[..<semicolon]
                }
                codings.append(lowercased(coding))
                return true
            }
        } else if asciiCaseInsensitiveEquals(name, "connection") {
            _ = forEachListElement(field.value) { element in
                connectionOptions.append(lowercased(element))
                return true
            }
        } else if asciiCaseInsensitiveEquals(name, "expect") {
            _ = forEachListElement(field.value) { element in
                if asciiCaseInsensitiveEquals(String(Substring(element)), "100-continue") { expectContinue = true }
                return true
            }
        }
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
        if codings.isEmpty { return .failure(.badRequest("empty Transfer-Encoding")) }
        // RFC 9112 §6.1: a server that does not understand a transfer coding answers 501. This also
        // covers a final coding other than chunked (RFC 9112 §6.3 would allow 400; the connection
        // closes either way).
        if codings.contains(where: { $0 != "chunked" }) {
            return .failure(.notImplemented("unsupported transfer coding"))
        }
        // RFC 9112 §7: chunked MUST NOT be applied more than once.
        if codings.count > 1 { return .failure(.badRequest("chunked applied more than once")) }
        framing = .chunked
    } else if let contentLength {
        framing = .contentLength(contentLength)
    } else {
        // RFC 9112 §6.3: neither field means no body for a request.
        framing = .none
    }

    let keepAlive: Bool
    // RFC 9112 §9.3: persistence is the default in 1.1; in 1.0 it needs "keep-alive"; "close" always wins.
    if connectionOptions.contains("close") {
        keepAlive = false
    } else {
        keepAlive = version == .http1_1 || connectionOptions.contains("keep-alive")
    }

    return .success(RequestHead(
        method: string(buffer, methodRange), target: string(buffer, targetRange), version: version,
        fields: fields, framing: framing, keepAlive: keepAlive, expectContinue: expectContinue,
        connectionOptions: connectionOptions))
}
