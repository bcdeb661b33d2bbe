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
