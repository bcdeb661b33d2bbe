/// Why an upstream response was refused; the proxy answers 502. Reasons never echo a header value.
public enum ResponseParseError: Error, Sendable, Equatable {
    case malformed(String)
    /// The head (or the trailer section) is over ``ResponseParserLimits/maxHeadBytes``.
    case headTooLarge
}

extension ResponseParseError {
    /// A refused chunked body in a response's terms (an upstream's body has no cap, so its size is
    /// never the reason).
    init(_ refused: ChunkedBodyError) {
        switch refused {
        case .malformed(let reason): self = .malformed(reason)
        case .trailersTooLarge: self = .headTooLarge
        case .bodyTooLarge: self = .malformed("chunked body too large")
        }
    }
}
