import Basics

// An incremental HTTP/1.1 response parser (RFC 9112) for the upstream side: bytes in, events out, no I/O.
// The mirror of RequestParser: same push shape, same byte-at-a-time verification in the tests.

/// Limits the response parser enforces.
public struct ResponseParserLimits: Sendable {
    /// The largest response head, status line through the blank line, line ends included (a stray
    /// empty line before the status line is not counted); also the largest trailer section.
    public var maxHeadBytes: Int

    public init(maxHeadBytes: Int) {
        self.maxHeadBytes = maxHeadBytes
    }
}

/// How the parser delimits the body that follows a final head (RFC 9112 §6.3).
public enum ResponseBodyFraming: Sendable, Equatable {
    /// No body: a response to HEAD, 1xx (101 included), 204 and 304.
    case none
    case contentLength(Int)
    /// Decoded by the parser: `.body` events carry the chunk data only.
    case chunked
    /// Close-delimited: every byte until the upstream closes is body (`finish()` ends it).
    case untilClose
}

/// What ``ResponseParser/parse(_:)`` reports.
///
/// A head's `ResponseHead` shares its storage with the parser's own until the parser starts the next
/// head: a caller that drops it before then keeps the parser free of allocations (copy on write);
/// one that keeps it (a held 401) keeps a correct, unchanging value, and the parser allocates fresh
/// storage for the next head.
public enum ResponseParseEvent: Sendable, Equatable {
    /// An interim 1xx head other than 101 (100 Continue, 103 Early Hints...): relay it; another head follows.
    case informational(ResponseHead)
    /// The final head, with the framing the parser will apply. For 101 the parser stops (state upgraded):
    /// every later byte is tunnel data, not HTTP.
    case head(ResponseHead, ResponseBodyFraming)
    /// Body bytes (decoded from chunked): a range of the buffer passed to this call (no copy).
    case body(Range<Int>)
    /// The response is complete (after any trailers). The parser is ready for the next response
    /// (keep-alive), unless it was untilClose or upgraded.
    case end
    /// The parser stays in the error state afterwards.
    case error(ResponseParseError)
}

/// An incremental HTTP/1.1 response parser (RFC 9112).
///
/// Head lines are read in place from the caller's buffer when they arrive whole; only a line cut by the
/// end of a buffer is carried over, in a buffer the parser keeps. Fields are validated and copied once,
/// into the one ``ResponseHead`` the parser owns and resets for each head. Body bytes are reported as
/// ranges of the caller's buffer.
///
/// Decisions where RFC 9112 leaves a choice:
/// - Line ends: a bare LF ends a line of the head (RFC 9112 §2.2 lets a recipient accept it). A CR
///   anywhere else in a line is refused (bare CR, RFC 9112 §2.2).
/// - At most one empty line is skipped before a status line (RFC 9112 §2.2 asks servers to tolerate
///   empty lines before a request; some upstreams send a stray CRLF after a body). A second one is
///   malformed: the stream is out of step.
/// - Content-Length is checked on every head, bodiless ones included: an invalid one would otherwise be
///   forwarded to the client (a HEAD response's Content-Length means something). Transfer-Encoding is
///   checked only where it frames a body.
/// - A final head with both Transfer-Encoding and Content-Length is framed by Transfer-Encoding (RFC
///   9112 §6.3 point 3) and the connection is not reused afterwards: the same point sees the pair as a
///   sign of smuggling or response splitting, so the proxy relays the response but trusts no further
///   byte of that connection.
/// - Transfer-Encoding in an HTTP/1.0 response is malformed: the framing is faulty (RFC 9112 §6.1), and
///   like the invalid lengths of RFC 9112 §6.3 point 5, a proxy answers such a response with 502.
/// - Status codes are three digits from 100 (the syntax, RFC 9110 §15); 600 to 999 pass as they are
///   and frame like any final status.
public struct ResponseParser: Sendable {
    private enum State: Sendable {
        /// Status line and fields, line by line; also between responses.
        case head
        /// `.end` is due on the next call.
        case endPending
        /// The body reader has the bytes until the end of the body.
        case body
        case untilClose
        /// After a 101 head: the rest of the connection is not HTTP.
        case upgraded
        /// `finish()` was called.
        case closed
        case failed
    }

    private let maxHeadBytes: Int
    private var state: State = .head
    /// The head being parsed or last reported.
    private var head = ResponseHead()
    /// A head line whose end has not arrived yet; empty while lines are read in place.
    private var partialLine: [UInt8] = []
    /// Bytes of the current head so far, line ends included.
    private var sectionBytes = 0
    private var requestWasHEAD = false
    /// An interim head of the current response has been reported.
    private var afterInterimHead = false

    // The head being parsed.
    private var sawStatusLine = false
    private var skippedEmptyLine = false
    private var headIsHTTP10 = false
    private var framingFields = FramingFields()

    /// The last status line accepted, when 8 to 16 bytes long (`HTTP/1.1 200 OK` is 15): its length
    /// and its first and last eight bytes, which cover it. The same line again (nearly every response)
    /// needs no scan: `head.status` and `head.reason` already hold what it says.
    private var lastStatusLineCount = 0
    private var lastStatusLineWords: (UInt64, UInt64) = (0, 0)
    private var lastStatusLineIsHTTP10 = false

    // The final head reported last.
    private var mustClose = false
    private var finalIsHTTP10 = false

    private var body: BodyReader

    public init(limits: ResponseParserLimits) {
        maxHeadBytes = max(0, limits.maxHeadBytes)
        // The trailer section is bounded like the head; an upstream's body has no total cap (it is streamed).
        body = BodyReader(maxTrailerBytes: maxHeadBytes, maxBodyBytes: 0)
    }

    /// Forgets everything, as a new parser would, for a new connection; keeps the memory of the head
    /// and of the line buffer.
    public mutating func reset() {
        endResponse()
        // Tested first: the line buffer is nearly always empty, and emptying an empty array costs a new one.
        if !partialLine.isEmpty { partialLine.removeAll(keepingCapacity: true) }
        mustClose = false
        finalIsHTTP10 = false
    }

    /// Before each response: the request's method matters (HEAD: no body whatever the fields say,
    /// RFC 9112 §6.3 point 1). It holds for one response: `.end` clears it.
    public mutating func expect(requestMethodIsHEAD: Bool) {
        requestWasHEAD = requestMethodIsHEAD
    }

    /// True between responses: nothing of a response seen yet (a tolerated stray empty line aside).
    public var isIdle: Bool {
        if case .head = state { return sectionBytes == 0 && !afterInterimHead && !sawStatusLine }
        return false
    }

    /// The connection must not be reused after this response's `.end`: the final head said
    /// `Connection: close`, or it is HTTP/1.0 without `Connection: keep-alive` (RFC 9112 §9.3), or the
    /// body is close-delimited, or the head had both Transfer-Encoding and Content-Length, or the
    /// connection was upgraded (101), or the parser failed. Describes the last final head until the next
    /// one is parsed.
    public var connectionMustClose: Bool {
        switch state {
        case .failed, .closed, .upgraded: return true
        default: return mustClose
        }
    }

    /// A 101 head was reported: every later byte is tunnel data, and `parse` takes none of it.
    public var isUpgraded: Bool {
        if case .upgraded = state { return true }
        return false
    }

    /// The body of the response in progress has been reported whole (its `.end` may still be due),
    /// or the response has ended: no more of its body will come. False while a chunked or
    /// close-delimited body goes on.
    public var bodyComplete: Bool {
        switch state {
        case .endPending: return true
        case .body: return body.isComplete
        case .head: return isIdle
        case .untilClose, .upgraded, .closed, .failed: return false
        }
    }

    /// The last final head's HTTP version was 1.0 (RFC 9112 §2.3); a higher 1.x minor counts as 1.1
    /// (RFC 9110 §2.5).
    public var isHTTP10: Bool { finalIsHTTP10 }

    /// The upstream closed the connection. `.end` when the body was close-delimited (or complete and its
    /// `.end` not yet reported), nil when idle between responses (and after an upgrade or an error), else
    /// `.error(.malformed("connection closed before the response was complete"))`. The parser takes no
    /// more bytes afterwards.
    public mutating func finish() -> ResponseParseEvent? {
        let event: ResponseParseEvent?
        switch state {
        case .untilClose, .endPending:
            event = .end
        case .body where body.isComplete:
            event = .end
        case .upgraded, .closed, .failed:
            return nil
        case .head where isIdle:
            event = nil
        default:
            event = .error(.malformed("connection closed before the response was complete"))
        }
        state = .closed
        partialLine = []
        return event
    }

    /// Consumes a prefix of `input` and returns at most one event. Call again with the rest while
    /// `consumed < input.count` or an event was returned; `event == nil` with everything consumed means:
    /// need more bytes. After `.error` (or `finish()`), every call consumes everything and returns nothing.
    /// Once upgraded (a 101 head), every call consumes nothing and returns nothing: the bytes are the
    /// caller's tunnel data.
    public mutating func parse(_ input: UnsafeRawBufferPointer) -> (consumed: Int, event: ResponseParseEvent?) {
        let n = input.count
        switch state {
        case .failed, .closed:
            return (n, nil)

        case .upgraded:
            return (0, nil)

        case .endPending:
            endResponse()
            return (0, .end)

        case .head:
            return headLines(input, from: 0)

        case .untilClose:
            guard n > 0 else { return (0, nil) }
            return (n, .body(0..<n))

        case .body:
            let (next, found) = body.read(input, from: 0)
            switch found {
            case .data(let range): return (next, .body(range))
            case .needMore: return (next, nil)
            case .end:
                endResponse()
                return (next, .end)
            case .refused(let error): return fail(next, ResponseParseError(error))
            }
        }
    }

    // MARK: lines of the head

    /// Reads head lines from `input[start...]` until one completes an event or the bytes run out.
    private mutating func headLines(_ input: UnsafeRawBufferPointer, from start: Int) -> (consumed: Int, event: ResponseParseEvent?) {
        let n = input.count
        var i = start
        // Field lines that arrived whole and already in the stored form, `Name: value\r\n`: their spans
        // are added as they are scanned, their bytes in one copy when the run ends (before any return).
        var run = i..<i
        while i < n {
            // The section may grow by `room` more bytes; a line end must come within them.
            let room = maxHeadBytes &- sectionBytes
            let stop = room <= 0 ? i : (room < n - i ? i + room : n)
            guard let lf = indexOfLF(input, i..<stop) else {
                storeRun(input, run)
                if stop < n { return fail(stop, .headTooLarge) }
                partialLine.append(contentsOf: UnsafeRawBufferPointer(rebasing: input[i..<n]))
                sectionBytes += n - i
                return (n, nil)
            }
            // No overflow: the section is at most `maxHeadBytes`, and `i <= lf < n`.
            sectionBytes &+= lf &+ 1 &- i
            // The common line: a field line, whole in `input`, ended by CRLF (RFC 9112 §2.2); the CR is
            // the line end's, as in `takeLine`.
            if sawStatusLine && partialLine.isEmpty && lf &- i >= 2 && input[lf &- 1] == asciiCR {
                let line = UnsafeRawBufferPointer(rebasing: input[i..<(lf &- 1)])
                guard case .success(let parts) = scanFieldLine(line) else {
                    storeRun(input, run)
                    return (lf + 1, fieldLineEvent(line))
                }
                if FieldBlock.isStoredForm(line, parts) {
                    if run.isEmpty { run = i..<i }
                    head.fields.appendStoredSpan(pending: i &- run.lowerBound, parts)
                    run = run.lowerBound..<(lf &+ 1)
                } else {
                    storeRun(input, run)
                    run = i..<i
                    head.fields.append(fieldLine: line, parts)
                }
                noteFramingField(line, parts)
                i = lf &+ 1
                continue
            }
            storeRun(input, run)
            run = i..<i
            let event: ResponseParseEvent?
            if partialLine.isEmpty {
                event = takeLine(UnsafeRawBufferPointer(rebasing: input[i..<lf]))
            } else {
                // Take the buffer out of `self` while it is read, then give its memory back.
                var carried: [UInt8] = []
                swap(&carried, &partialLine)
                carried.append(contentsOf: UnsafeRawBufferPointer(rebasing: input[i..<lf]))
                event = carried.withUnsafeBytes { takeLine($0) }
                carried.removeAll(keepingCapacity: true)
                swap(&carried, &partialLine)
            }
            i = lf + 1
            if let event { return (i, event) }
        }
        storeRun(input, run)
        return (i, nil)
    }

    /// Adds the bytes of a run of field lines whose spans are in the head already.
    @inline(__always)
    private mutating func storeRun(_ input: UnsafeRawBufferPointer, _ run: Range<Int>) {
        if !run.isEmpty { head.fields.append(storedLines: UnsafeRawBufferPointer(rebasing: input[run])) }
    }

    /// One complete line (its LF removed) of the head. Returns the event it completes, if any.
    private mutating func takeLine(_ raw: UnsafeRawBufferPointer) -> ResponseParseEvent? {
        // RFC 9112 §2.2: a CR before the LF belongs to the line end; any other CR is refused by the
        // line checks below (a CR is a control character).
        let bytes = raw.count > 0 && raw[raw.count - 1] == asciiCR ? UnsafeRawBufferPointer(rebasing: raw[0..<(raw.count - 1)]) : raw
        if !sawStatusLine {
            if bytes.isEmpty {
                // A stray empty line before the status line is not part of the head.
                if skippedEmptyLine { return failEvent(.malformed("empty line before the status line")) }
                skippedEmptyLine = true
                sectionBytes = 0
                return nil
            }
            return statusLine(bytes)
        }
        if bytes.isEmpty { return endOfHead() }
        guard case .success(let parts) = scanFieldLine(bytes) else { return fieldLineEvent(bytes) }
        head.fields.append(fieldLine: bytes, parts)
        noteFramingField(bytes, parts)
        return nil
    }

    /// Shows `framingFields` a field line that may frame the response or decide the connection's fate.
    /// Only Connection, Content-Length and Transfer-Encoding do (a response's Host or Expect means
    /// nothing here), so a name of another length is passed over.
    @inline(__always)
    private mutating func noteFramingField(_ line: UnsafeRawBufferPointer, _ parts: FieldLineParts) {
        switch parts.colon {
        case 10, 14, 17:
            let kind = FramingFields.Kind(name: 0..<parts.colon, in: line)
            if kind != .other { framingFields.take(kind, value: parts.value, in: line) }
        default:
            return
        }
    }

    /// The error for a line that is not a field line.
    private mutating func fieldLineEvent(_ line: UnsafeRawBufferPointer) -> ResponseParseEvent {
        if case .failure(.obsoleteFolding) = scanFieldLine(line) {
            // RFC 9112 §5.2: obs-fold is refused (a proxy may not forward it as it is).
            return failEvent(.malformed("obsolete line folding"))
        }
        return failEvent(.malformed("invalid header line"))
    }

    private mutating func statusLine(_ bytes: UnsafeRawBufferPointer) -> ResponseParseEvent? {
        let count = bytes.count
        var words: (UInt64, UInt64) = (0, 0)
        if count >= 8 && count <= 16, let base = bytes.baseAddress {
            words = (base.loadUnaligned(as: UInt64.self), base.loadUnaligned(fromByteOffset: count &- 8, as: UInt64.self))
            if count == lastStatusLineCount && words == lastStatusLineWords {
                sawStatusLine = true
                headIsHTTP10 = lastStatusLineIsHTTP10
                head.fields.removeAllBeforeNextHead()
                return nil
            }
        }
        guard let parts = scanStatusLine(bytes) else { return failEvent(.malformed("invalid status line")) }
        // RFC 9110 §2.5: a higher minor version of HTTP/1 is understood as 1.1; another major version
        // cannot be framed as HTTP/1.1 (RFC 9112 §2.3).
        guard parts.major == 1, let minor = parts.minor else {
            return failEvent(.malformed("unsupported HTTP version"))
        }
        sawStatusLine = true
        headIsHTTP10 = minor == 0
        head.fields.removeAllBeforeNextHead()
        head.status = parts.code
        let reason = UnsafeRawBufferPointer(rebasing: bytes[parts.reason])
        // The same reason as the last head keeps its String.
        if !sameBytes(head.reason, reason) { head.reason = String(decoding: reason, as: UTF8.self) }
        // Only a line the words cover is remembered; a longer one forgets the last.
        lastStatusLineCount = count >= 8 && count <= 16 ? count : 0
        lastStatusLineWords = words
        lastStatusLineIsHTTP10 = headIsHTTP10
        return nil
    }

    /// The blank line after the fields: decides the framing (RFC 9112 §6.3, in its order).
    private mutating func endOfHead() -> ResponseParseEvent? {
        let status = head.status
        // Checked on every head: an invalid length would otherwise reach the client (RFC 9112 §6.3 point 5).
        if let problem = framingFields.contentLengthProblem { return failEvent(.malformed(problem)) }
        // Not stored when both are empty (nearly always): a store retains one array and releases the other.
        if !(framingFields.connectionOptions.isEmpty && head.connectionOptions.isEmpty) {
            head.connectionOptions = framingFields.connectionOptions
        }
        if status < 200 {
            if status == 101 {
                // RFC 9110 §15.2.2: the connection switches protocols right after this head's blank line.
                finalIsHTTP10 = headIsHTTP10
                mustClose = true
                state = .upgraded
                return .head(head, .none)
            }
            // RFC 9110 §15.2: an interim response; the final one follows on the same connection.
            afterInterimHead = true
            beginHead()
            return .informational(head)
        }
        finalIsHTTP10 = headIsHTTP10
        var close = !framingFields.persists(isHTTP10: headIsHTTP10)
        let framing: ResponseBodyFraming
        if requestWasHEAD || status == 204 || status == 304 {
            // RFC 9112 §6.3 point 1: no body, whatever the fields say.
            framing = .none
        } else if framingFields.sawTransferEncoding {
            // RFC 9112 §6.1: Transfer-Encoding in an HTTP/1.0 message means faulty framing.
            if headIsHTTP10 { return failEvent(.malformed("Transfer-Encoding in an HTTP/1.0 response")) }
            // RFC 9112 §7: chunked once, and no other coding: any other (`gzip, chunked`) would reach the
            // client undeclared once Transfer-Encoding, a hop-by-hop field, is rewritten (nginx refuses it too).
            if let problem = framingFields.transferCodingProblem { return failEvent(.malformed(problem.reason)) }
            framing = .chunked
            // RFC 9112 §6.3 point 3: Transfer-Encoding overrides Content-Length; the pair is suspect.
            if framingFields.contentLength != nil { close = true }
        } else if let contentLength = framingFields.contentLength {
            framing = .contentLength(contentLength)
        } else {
            // RFC 9112 §6.3 point 8: a response with neither field runs until the connection closes.
            framing = .untilClose
        }
        switch framing {
        case .none: state = .endPending
        case .contentLength(let length): state = body.begin(.contentLength(length)) ? .body : .endPending
        case .chunked: state = body.begin(.chunked) ? .body : .endPending
        case .untilClose:
            close = true
            state = .untilClose
        }
        mustClose = close
        return .head(head, framing)
    }

    // MARK: state changes

    /// Ready for the status line of a head (the first of a response, or the one after an interim head).
    private mutating func beginHead() {
        state = .head
        sectionBytes = 0
        sawStatusLine = false
        skippedEmptyLine = false
        headIsHTTP10 = false
        framingFields.reset()
    }

    private mutating func endResponse() {
        beginHead()
        afterInterimHead = false
        requestWasHEAD = false
    }

    private mutating func failEvent(_ error: ResponseParseError) -> ResponseParseEvent {
        state = .failed
        partialLine = []
        return .error(error)
    }

    private mutating func fail(_ consumed: Int, _ error: ResponseParseError) -> (consumed: Int, event: ResponseParseEvent?) {
        (consumed, failEvent(error))
    }
}

// MARK: byte helpers over the caller's buffer (no copies, no Strings)

/// The string's UTF-8 is exactly these bytes.
private func sameBytes(_ string: String, _ bytes: UnsafeRawBufferPointer) -> Bool {
    let utf8 = string.utf8
    guard utf8.count == bytes.count else { return false }
    let fast = utf8.withContiguousStorageIfAvailable { stored in
        for k in 0..<stored.count where stored[k] != bytes[k] {
            return false
        }
        return true
    }
    return fast ?? utf8.elementsEqual(bytes)
}
