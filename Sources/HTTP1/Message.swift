/// The HTTP versions the proxy speaks with clients (RFC 9112 §2.3).
public enum HTTPVersion: Sendable, Equatable {
    case http1_0
    case http1_1
}

/// One header field line as Strings: the name as sent (case kept) and the value with surrounding
/// whitespace removed (RFC 9112 §5.1). ``RequestHead`` and ``ResponseHead`` keep their fields as bytes
/// and make these only on request.
public struct HTTPField: Sendable, Equatable {
    public var name: String
    public var value: String
    /// The value's bytes when they are not valid UTF-8 (obs-text, RFC 9110 §5.5), which `value`
    /// cannot hold as they are: forwarded byte for byte from here.
    public var rawValue: [UInt8]?

    public init(name: String, value: String, rawValue: [UInt8]? = nil) {
        self.name = name
        self.value = value
        self.rawValue = rawValue
    }
}

/// How the request's body is delimited (RFC 9112 §6.3).
public enum BodyFraming: Sendable, Equatable {
    case none
    case contentLength(Int)
    case chunked
}

/// Limits the parser enforces; both come from the `limits:` section of the configuration.
public struct ParserLimits: Sendable {
    /// The largest request head (request line through the blank line), and the largest trailer section.
    public var maxHeaderBytes: Int
    /// The largest request body; 0 means unlimited.
    public var maxBodyBytes: Int

    public init(maxHeaderBytes: Int, maxBodyBytes: Int) {
        self.maxHeaderBytes = maxHeaderBytes
        self.maxBodyBytes = maxBodyBytes
    }
}

/// Why a request was refused (ProxyCore's `ProxyError` gives each its status and error code). Reasons
/// name the cause and never echo a header value.
public enum RequestParseError: Error, Sendable, Equatable {
    /// 400 `bad_request`.
    case badRequest(String)
    /// 431 `headers_too_large`.
    case headersTooLarge
    /// 413 `body_too_large`.
    case bodyTooLarge
    /// 501 `not_implemented`: a transfer coding other than chunked (RFC 9112 §6.1).
    case notImplemented(String)
}

extension RequestParseError {
    /// A refused chunked body in a request's terms.
    init(_ refused: ChunkedBodyError) {
        switch refused {
        case .malformed(let reason): self = .badRequest(reason)
        // `maxHeaderBytes` bounds the trailer section too (RFC 9112 §7.1.2: fields like a head's): 431.
        case .trailersTooLarge: self = .headersTooLarge
        case .bodyTooLarge: self = .bodyTooLarge
        }
    }
}

/// What ``RequestParser/parse(_:)`` reports.
public enum ParseEvent: Sendable, Equatable {
    case head(RequestHead)
    /// Body bytes: a range of the buffer passed to the call that returned this event (no copy).
    case body(Range<Int>)
    /// The message is complete (after any trailers); the parser is ready for the next request.
    case end
    /// The parser stays in the error state afterwards.
    case error(RequestParseError)
}
