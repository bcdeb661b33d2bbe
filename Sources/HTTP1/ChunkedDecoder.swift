import Basics

// The chunked transfer coding (RFC 9112 §7.1) decoded once for both directions: RequestParser uses it
// for a client's body, ResponseParser for an upstream's. Bytes in, data ranges out, no I/O.

/// Why a chunked body was refused. Each parser maps it into its own error type (RequestParser: 400,
/// 431, 413; ResponseParser: 502). Reasons never echo a byte of the message.
enum ChunkedBodyError: Sendable, Equatable {
    /// The framing is broken: a bad size, extension, line end or trailer line.
    case malformed(String)
    /// The trailer section is over `maxTrailerBytes`.
    case trailersTooLarge
    /// The chunk sizes add up to more than `maxBodyBytes` (only when a limit was given).
    case bodyTooLarge
}

/// An incremental decoder of one chunked body: chunk-size line (size, extensions), chunk data and its
/// CRLF, last chunk, trailer section (RFC 9112 §7.1).
///
/// Decisions, the same in both directions because they protect the proxy whoever sends the body:
/// - A chunk extension is every byte between the size's last digit and the CR that ends the line:
///   BWS, ";", names and values, as the chunk-ext rule of RFC 9112 §7.1.1 spans them (the CR is line
///   end, not extension). At most ``maxExtensionBytes`` of them; they are checked for control bytes
///   and skipped. (Before: the request side also counted the CR and the response side not the ";".)
/// - A chunk size is 1 to ``maxSizeDigits`` hex digits, leading zeros included, and must fit an Int.
/// - The chunk-size line and the end of chunk data need CRLF (RFC 9112 §7.1, no bare LF or CR in body
///   framing); a trailer line may end with a bare LF, like a head line (RFC 9112 §2.2 lets a recipient
///   accept it).
/// - The trailer section counts from its first byte through the LF of the blank line that ends it,
///   up to `maxTrailerBytes` (each parser passes its head limit). Each line is checked as a field line
///   as soon as it is whole (RFC 9112 §7.1.2) and dropped: only a line cut by the end of a buffer is
///   kept, so memory stays one line, not one section. (Before: the request side kept the whole section
///   and checked it at its end, with other reasons.)
/// - The running total of the chunk sizes is capped only when the owner gives `maxBodyBytes` (the
///   request side, ``ParserLimits/maxBodyBytes``): a chunk that would pass it is refused before any of
///   its data. An upstream's body has no cap (the proxy streams it, ENGINE.md "One exchange").
struct ChunkedDecoder: Sendable {
    /// What ``decode(_:from:)`` reports.
    enum Event: Sendable, Equatable {
        /// Chunk data: a range of the buffer passed to this call.
        case data(Range<Int>)
        /// The last chunk and the trailer section are read; the body is complete.
        case end
        case error(ChunkedBodyError)
    }

    /// The longest chunk extension skipped (RFC 9112 §7.1.1 lets a recipient limit them).
    static let maxExtensionBytes = 4096
    /// The most hex digits a chunk size may have (leading zeros included).
    static let maxSizeDigits = 32

    private enum State: Sendable {
        case size
        /// Whitespace after the size: only a chunk extension may follow (RFC 9112 §7.1.1: BWS before ";").
        case sizeWhitespace
        case chunkExtension
        /// The CR of the chunk-size line was read.
        case sizeLF
        case data(remaining: Int)
        case dataCR
        case dataLF
        case trailers
    }

    private let maxTrailerBytes: Int
    /// 0: no cap.
    private let maxBodyBytes: Int
    private var state: State = .size
    private var sizeValue = 0
    private var sizeDigits = 0
    private var extensionBytes = 0
    private var bodyTotal = 0
    /// Bytes of the trailer section so far, line ends included.
    private var trailerBytes = 0
    /// A trailer line whose end has not arrived yet.
    private var partialLine: [UInt8] = []

    /// `maxBodyBytes` 0 means no cap on the sum of the chunk sizes.
    init(maxTrailerBytes: Int, maxBodyBytes: Int) {
        self.maxTrailerBytes = maxTrailerBytes
        self.maxBodyBytes = maxBodyBytes
    }

    /// Ready for a new body (keeps the memory of the line buffer).
    mutating func begin() {
        state = .size
        sizeValue = 0
        sizeDigits = 0
        extensionBytes = 0
        bodyTotal = 0
        trailerBytes = 0
        partialLine.removeAll(keepingCapacity: true)
    }

    /// Consumes input from `start` on and returns at most one event, with the index after the bytes it
    /// took. Without an event, everything was taken (more bytes are needed). After `.end` or `.error`,
    /// call ``begin()`` before the next body.
    mutating func decode(_ input: UnsafeRawBufferPointer, from start: Int) -> (next: Int, event: Event?) {
        let n = input.count
        var i = start
        while true {
            guard i < n else { return (i, nil) }
            switch state {
            case .size:
                let b = input[i]
                // RFC 9112 §7.1: chunk-size = 1*HEXDIG, optionally followed by chunk extensions.
                if let digit = hexValue(b) {
                    if sizeDigits >= Self.maxSizeDigits || sizeValue > (Int.max - digit) / 16 {
                        return (i, .error(.malformed("chunk size too large")))
                    }
                    sizeValue = sizeValue * 16 + digit
                    sizeDigits += 1
                } else if sizeDigits == 0 {
                    return (i, .error(.malformed("invalid chunk size")))
                } else if b == asciiCR {
                    state = .sizeLF
                } else if b == UInt8(ascii: ";") {
                    state = .chunkExtension
                    extensionBytes = 1
                } else if isOWS(b) {
                    state = .sizeWhitespace
                    extensionBytes = 1
                } else {
                    return (i, .error(.malformed("invalid chunk size")))
                }
                i += 1

            case .sizeWhitespace:
                let b = input[i]
                if b == UInt8(ascii: ";") {
                    state = .chunkExtension
                } else if !isOWS(b) {
                    return (i, .error(.malformed("invalid chunk size")))
                }
                extensionBytes += 1
                if extensionBytes > Self.maxExtensionBytes { return (i, .error(.malformed("chunk extension too long"))) }
                i += 1

            case .chunkExtension:
                // RFC 9112 §7.1.1: extensions are skipped; they are only bounded and checked for control
                // bytes, in one pass up to the CR that ends the line (or one byte past the limit).
                let stop = min(n, i + (Self.maxExtensionBytes - extensionBytes) + 1)
                var k = i
                while k < stop && input[k] != asciiCR {
                    guard isFieldValueByte(input[k]) else { return (k, .error(.malformed("invalid chunk extension"))) }
                    k += 1
                }
                extensionBytes += k - i
                if extensionBytes > Self.maxExtensionBytes { return (k, .error(.malformed("chunk extension too long"))) }
                i = k
                if k < n {
                    state = .sizeLF  // input[k] is the CR: the limit was not reached
                    i += 1
                }

            case .sizeLF:
                // RFC 9112 §7.1: the chunk-size line ends with CRLF.
                guard input[i] == asciiLF else { return (i, .error(.malformed("invalid chunk size line"))) }
                i += 1
                if sizeValue == 0 {
                    // RFC 9112 §7.1.2: the last chunk is followed by the trailer section.
                    state = .trailers
                    trailerBytes = 0
                } else {
                    if maxBodyBytes > 0 {
                        let (total, overflow) = bodyTotal.addingReportingOverflow(sizeValue)
                        if overflow || total > maxBodyBytes { return (i, .error(.bodyTooLarge)) }
                        bodyTotal = total
                    }
                    state = .data(remaining: sizeValue)
                }

            case .data(let remaining):
                let take = min(remaining, n - i)
                state = take == remaining ? .dataCR : .data(remaining: remaining - take)
                return (i + take, .data(i..<(i + take)))

            case .dataCR:
                // RFC 9112 §7.1: chunk = chunk-size [ chunk-ext ] CRLF chunk-data CRLF.
                guard input[i] == asciiCR else { return (i, .error(.malformed("missing CRLF after chunk data"))) }
                state = .dataLF
                i += 1

            case .dataLF:
                guard input[i] == asciiLF else { return (i, .error(.malformed("missing CRLF after chunk data"))) }
                i += 1
                state = .size
                sizeValue = 0
                sizeDigits = 0
                extensionBytes = 0

            case .trailers:
                // The section may grow by `room` more bytes; a line end must come within them.
                let room = maxTrailerBytes &- trailerBytes
                let stop = room <= 0 ? i : (room < n - i ? i + room : n)
                guard let lf = indexOfLF(input, i..<stop) else {
                    if stop < n { return (stop, .error(.trailersTooLarge)) }
                    partialLine.append(contentsOf: UnsafeRawBufferPointer(rebasing: input[i..<n]))
                    trailerBytes += n - i
                    return (n, nil)
                }
                trailerBytes += lf + 1 - i
                let event: Event?
                if partialLine.isEmpty {
                    event = trailerLine(UnsafeRawBufferPointer(rebasing: input[i..<lf]))
                } else {
                    partialLine.append(contentsOf: UnsafeRawBufferPointer(rebasing: input[i..<lf]))
                    event = partialLine.withUnsafeBytes { trailerLine($0) }
                    partialLine.removeAll(keepingCapacity: true)
                }
                i = lf + 1
                if let event { return (i, event) }
            }
        }
    }

    /// One whole trailer line, its LF removed: `.end` for the blank line, an error for a line that is
    /// not a field line, nil otherwise (the field is dropped: the proxy re-frames bodies and sends no
    /// trailers).
    private func trailerLine(_ raw: UnsafeRawBufferPointer) -> Event? {
        // RFC 9112 §2.2: a CR before the LF belongs to the line end; any other CR is refused below.
        let line = raw.count > 0 && raw[raw.count - 1] == asciiCR ? UnsafeRawBufferPointer(rebasing: raw[0..<(raw.count - 1)]) : raw
        if line.isEmpty { return .end }
        // RFC 9112 §7.1.2: trailer fields are field lines; RFC 9112 §5.2: obs-fold is refused.
        switch scanFieldLine(line) {
        case .success: return nil
        case .failure(.obsoleteFolding): return .error(.malformed("obsolete line folding"))
        case .failure: return .error(.malformed("invalid trailer line"))
        }
    }
}
