import Basics

/// An incremental HTTP/1.1 request parser (RFC 9112): bytes in, events out, no I/O.
///
/// The head is accumulated internally until the blank line that ends it; body bytes are reported as
/// ranges of the caller's buffer. Pipelined requests are parsed one after another.
public struct RequestParser: Sendable {
    private enum State {
        /// Between messages; empty lines are skipped (RFC 9112 §2.2).
        case idle
        case head
        /// `.end` is due on the next call.
        case endPending
        /// The body reader has the bytes until the end of the body.
        case body
        case failed
    }

    private let limits: ParserLimits
    private var state: State = .idle
    /// Head bytes seen so far. The RequestHead reported last shares it (and `fieldSpans`): both are
    /// emptied only when the next head starts, by which time the caller has usually dropped that head,
    /// so their memory is reused instead of copied.
    private var section: [UInt8] = []
    private var fieldSpans: [FieldBlock.Span] = []
    private var lineLength = 0
    private var lineStartsWithCR = false
    private var idleSawCR = false
    private var skippedEmptyLineBytes = 0
    private var body: BodyReader

    public init(limits: ParserLimits) {
        self.limits = limits
        // The trailer section is bounded like the head; the chunk sizes add up to at most the body limit.
        body = BodyReader(maxTrailerBytes: limits.maxHeaderBytes, maxBodyBytes: limits.maxBodyBytes)
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
                    section.removeAll(keepingCapacity: true)
                    fieldSpans.removeAll(keepingCapacity: true)
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
                    // Taken out of `self` while the head is parsed, then shared with the head.
                    var fields: [FieldBlock.Span] = []
                    swap(&fields, &fieldSpans)
                    let result = parseRequestHead(section, spans: &fields)
                    fieldSpans = fields
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
                        state = body.begin(head.framing) ? .body : .endPending
                        return (next, .head(head))
                    }
                }

            case .body:
                let (next, found) = body.read(input, from: i)
                switch found {
                case .data(let range): return (next, .body(range))
                case .needMore: return (next, nil)
                case .end:
                    resetForNextMessage()
                    return (next, .end)
                case .refused(let error): return fail(next, RequestParseError(error))
                }
            }
        }
    }

    private mutating func fail(_ consumed: Int, _ error: RequestParseError) -> (consumed: Int, event: ParseEvent?) {
        state = .failed
        section = []
        return (consumed, .error(error))
    }

    private mutating func resetForNextMessage() {
        state = .idle
        lineLength = 0
        lineStartsWithCR = false
        idleSawCR = false
        skippedEmptyLineBytes = 0
    }

    private enum SectionScan {
        case needMore
        case tooLarge
        /// The blank line ends just before this index of the input.
        case complete(next: Int)
    }

    /// Appends input bytes to `section` until the blank line that ends the head,
    /// refusing sections over `maxHeaderBytes` (counted from the first byte through the blank line).
    private mutating func scanSection(_ input: UnsafeRawBufferPointer, from start: Int) -> SectionScan {
        let room = limits.maxHeaderBytes - section.count
        let stop = min(input.count, start + max(room, 0))
        var i = start
        // Line by line: find each LF with a vectorised search, then look at the line's length only.
        while i < stop {
            guard let lf = indexOfLF(input, i..<stop) else {
                if lineLength == 0 { lineStartsWithCR = input[i] == asciiCR }
                lineLength += stop - i
                i = stop
                break
            }
            let segment = lf - i
            if lineLength == 0 && segment > 0 { lineStartsWithCR = input[i] == asciiCR }
            let length = lineLength + segment
            i = lf + 1
            // RFC 9112 §2.2: a recipient MAY recognise a single LF as a line terminator.
            if length == 0 || (length == 1 && lineStartsWithCR) {
                section.append(contentsOf: UnsafeRawBufferPointer(rebasing: input[start..<i]))
                return .complete(next: i)
            }
            lineLength = 0
        }
        if stop < input.count { return .tooLarge }
        section.append(contentsOf: UnsafeRawBufferPointer(rebasing: input[start..<stop]))
        return .needMore
    }
}

// MARK: the request head

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

// MARK: the target's path

/// Removes `.` and `..` segments from an absolute path (RFC 3986 §5.2.4).
///
/// Returns nil when the path does not start with `/` or would climb above it (`/../x`). Percent-encoded
/// dots (`%2e`, `%2E`) count as dots when recognising `.` and `..`, so `/%2e%2e/secret` cannot slip past a
/// path allow-list; every other byte is kept as it came (nothing is decoded).
///
/// Also nil for a `..` that an encoded slash or a backslash sets apart inside a segment (`/v1/..%2Fadmin`):
/// RFC 3986 calls `%2F` data, but servers such as nginx decode it before they resolve dot-segments, so
/// the upstream would climb out of its base path (docs/ROUTES.md, "Paths").
public func removeDotSegments(_ path: String) -> String? {
    let bytes = path.utf8
    guard bytes.first == UInt8(ascii: "/") else { return nil }
    // Most paths hold neither a dot nor a percent sign: nothing to do, nothing to allocate. (Read
    // through `withUTF8`: iterating the UTF8View costs about forty instructions a byte.)
    var copy = path
    let plain = copy.withUTF8 { raw in !raw.contains { $0 == UInt8(ascii: ".") || $0 == UInt8(ascii: "%") } }
    if plain { return path }
    let segments = bytes.dropFirst().split(separator: UInt8(ascii: "/"), omittingEmptySubsequences: false)
    var output: [Substring.UTF8View] = []
    output.reserveCapacity(segments.count)
    var changed = false
    for (index, segment) in segments.enumerated() {
        let isLast = index == segments.count - 1
        if hidesDotDot(segment) { return nil }
        switch dotCount(segment) {
        case 1:
            changed = true
            // "/a/." → "/a/": a dot segment at the end leaves the trailing slash.
            if isLast { output.append(bytes[bytes.endIndex...]) }
        case 2:
            changed = true
            guard !output.isEmpty else { return nil }
            output.removeLast()
            if isLast { output.append(bytes[bytes.endIndex...]) }
        default:
            output.append(segment)
        }
    }
    guard changed else { return path }
    var result: [UInt8] = []
    result.reserveCapacity(bytes.count)
    for segment in output {
        result.append(UInt8(ascii: "/"))
        result.append(contentsOf: segment)
    }
    if result.isEmpty { result.append(UInt8(ascii: "/")) }
    return String(decoding: result, as: UTF8.self)
}

/// 1 for `.`, 2 for `..` (either dot possibly written `%2e`), else 0.
private func dotCount(_ segment: Substring.UTF8View.SubSequence) -> Int {
    var count = 0
    var i = segment.startIndex
    while i < segment.endIndex {
        let b = segment[i]
        if b == UInt8(ascii: ".") {
            i = segment.index(after: i)
        } else if b == UInt8(ascii: "%") {
            let one = segment.index(after: i)
            guard one < segment.endIndex, segment[one] == UInt8(ascii: "2") else { return 0 }
            let two = segment.index(after: one)
            guard two < segment.endIndex, asciiLower(segment[two]) == UInt8(ascii: "e") else { return 0 }
            i = segment.index(after: two)
        } else {
            return 0
        }
        count += 1
        if count > 2 { return 0 }
    }
    return count
}

/// Whether `segment` holds a `..` (dots maybe written `%2e`) between encoded slashes (`%2F`, `%5C`) or
/// backslashes, which a server that decodes them first would take for a dot-segment.
private func hidesDotDot(_ segment: Substring.UTF8View.SubSequence) -> Bool {
    var pieceStart = segment.startIndex
    var i = segment.startIndex
    var sawSeparator = false
    while i < segment.endIndex {
        var separatorEnd: Substring.UTF8View.Index?
        if segment[i] == UInt8(ascii: "\\") {
            separatorEnd = segment.index(after: i)
        } else if segment[i] == UInt8(ascii: "%") {
            let one = segment.index(after: i)
            if one < segment.endIndex {
                let two = segment.index(after: one)
                if two < segment.endIndex {
                    let hi = segment[one]
                    let lo = asciiLower(segment[two])
                    if (hi == UInt8(ascii: "2") && lo == UInt8(ascii: "f")) || (hi == UInt8(ascii: "5") && lo == UInt8(ascii: "c")) {
                        separatorEnd = segment.index(after: two)
                    }
                }
            }
        }
        if let end = separatorEnd {
            if dotCount(segment[pieceStart..<i]) == 2 { return true }
            sawSeparator = true
            pieceStart = end
            i = end
        } else {
            i = segment.index(after: i)
        }
    }
    return sawSeparator && dotCount(segment[pieceStart..<segment.endIndex]) == 2
}
