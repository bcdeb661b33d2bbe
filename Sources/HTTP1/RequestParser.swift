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
                    let error = section.withUnsafeBufferPointer { validateTrailers($0) }
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
