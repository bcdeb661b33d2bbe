/// Reading an authority's `host [":" port]` (RFC 3986 §3.2.2, §3.2.3): the one parser behind the
/// configuration's addresses and URLs, the proxy variables, the container-credentials URI, request
/// targets and the Host field. Each caller keeps its own policy (whether a port is required, the
/// lowest port, which host bytes it takes, what user information means) and its own wording.
extension Authority {
    /// Why an authority was refused; each caller words it for its key or its answer.
    public enum Problem: Error, Sendable, Equatable {
        /// Nothing before the port, or nothing at all.
        case noHost
        /// A `[` without its `]`.
        case unclosedBracket
        /// Brackets around what is not an IPv6 address (hex digits, colons and dots; RFC 3986
        /// §3.2.2's IPvFuture and RFC 6874's zone identifiers are not taken).
        case notIPv6InBrackets
        /// After the `]`, something other than `:port`.
        case textAfterBracket
        /// A second colon outside brackets: an IPv6 literal goes in brackets (RFC 3986 §3.2.2).
        case ipv6WithoutBrackets
        /// Under `HostRule.regName`, a byte a reg-name or IPv4 address cannot hold (`@`: user information).
        case hostByte
        /// No port where the caller needs one.
        case missingPort
        /// A port that is not 1 to 5 digits, outside `PortRule.lowest...65535`, or with a leading
        /// zero that `PortRule` refuses.
        case badPort
    }

    /// What a caller takes as a port.
    public struct PortRule: Sendable, Equatable {
        /// Without one: `Problem.missingPort`.
        public var required: Bool
        /// `host:` with nothing after the colon is the default port (RFC 3986 §3.2.3); otherwise `badPort`.
        public var emptyIsDefault: Bool
        /// 0 where port 0 means something (a listener on a port the system picks); 1 for a server's.
        public var lowest: Int
        /// `:0443` is 443 (RFC 3986 §3.2.3); false leaves one spelling per port (docs/FORWARD-PROXY.md).
        public var allowsLeadingZero: Bool

        @inlinable
        public init(required: Bool, emptyIsDefault: Bool = false, lowest: Int = 1, allowsLeadingZero: Bool = true) {
            self.required = required
            self.emptyIsDefault = emptyIsDefault
            self.lowest = lowest
            self.allowsLeadingZero = allowsLeadingZero
        }
    }

    /// Which bytes an unbracketed host may hold.
    public enum HostRule: Sendable, Equatable {
        /// Any but the colon: the caller checks the name.
        case any
        /// reg-name or IPv4address (RFC 3986 §3.2.2): unreserved, sub-delims and `%`.
        case regName
    }

    /// Where the host and port of an authority are.
    public struct Span<Index: Comparable>: Equatable {
        /// The host's bytes, without brackets.
        public var host: Range<Index>
        /// The host was in brackets (an IPv6 literal).
        public var isIPv6Literal: Bool
        /// The port; nil when none is written (or an empty one, under `PortRule.emptyIsDefault`).
        public var port: Int?

        @inlinable
        public init(host: Range<Index>, isIPv6Literal: Bool, port: Int?) {
            self.host = host
            self.isIPv6Literal = isIPv6Literal
            self.port = port
        }
    }

    /// The host and port of `bytes`, an authority without user information, read in place (no
    /// allocation: the request path reads the Host field with it). A trailing dot stays in the host
    /// (`withoutTrailingDot` drops it where a name is compared, RFC 1034 §3.1).
    @inlinable
    public static func parse<C: BidirectionalCollection>(
        _ bytes: C, port rule: PortRule, host hostRule: HostRule = .any
    ) -> Result<Span<C.Index>, Problem> where C.Element == UInt8 {
        let colon = UInt8(ascii: ":")
        let host: Range<C.Index>
        var portStart: C.Index?
        var literal = false
        if let first = bytes.first, first == UInt8(ascii: "[") {
            guard let close = bytes.firstIndex(of: UInt8(ascii: "]")) else { return .failure(.unclosedBracket) }
            host = bytes.index(after: bytes.startIndex)..<close
            var colons = false
            for b in bytes[host] {
                if b == colon {
                    colons = true
                } else if !isHexDigit(b) && b != UInt8(ascii: ".") {
                    return .failure(.notIPv6InBrackets)
                }
            }
            guard colons else { return .failure(.notIPv6InBrackets) }
            literal = true
            let after = bytes.index(after: close)
            if after != bytes.endIndex {
                guard bytes[after] == colon else { return .failure(.textAfterBracket) }
                portStart = bytes.index(after: after)
            }
        } else {
            var hostEnd = bytes.endIndex
            var i = bytes.startIndex
            while i != bytes.endIndex {
                let b = bytes[i]
                if b == colon {
                    if portStart != nil { return .failure(.ipv6WithoutBrackets) }
                    hostEnd = i
                    portStart = bytes.index(after: i)
                } else if portStart == nil && hostRule == .regName && !isRegNameByte(b) {
                    return .failure(.hostByte)
                }
                i = bytes.index(after: i)
            }
            host = bytes.startIndex..<hostEnd
        }
        guard !host.isEmpty else { return .failure(.noHost) }
        var port: Int?
        if let portStart {
            if portStart == bytes.endIndex {
                guard rule.emptyIsDefault else { return .failure(.badPort) }
            } else {
                guard let value = Self.port(bytes[portStart...], rule: rule) else { return .failure(.badPort) }
                port = value
            }
        }
        if port == nil && rule.required { return .failure(.missingPort) }
        return .success(Span(host: host, isIPv6Literal: literal, port: port))
    }

    /// `digits` as a port under `rule`: 1 to 5 decimal digits (no sign, no space), `rule.lowest` to
    /// 65535; nil otherwise, and for no digits.
    @inlinable
    public static func port<C: Collection>(_ digits: C, rule: PortRule) -> Int? where C.Element == UInt8 {
        guard let first = digits.first, rule.allowsLeadingZero || first != UInt8(ascii: "0") else { return nil }
        var value = 0
        var count = 0
        for b in digits {
            guard b >= UInt8(ascii: "0") && b <= UInt8(ascii: "9"), count < 5 else { return nil }
            value = value &* 10 &+ Int(b &- UInt8(ascii: "0"))
            count &+= 1
        }
        return value >= rule.lowest && value <= 65535 ? value : nil
    }

    /// What `parts(of:port:host:)` gives: the host lowercased and without brackets.
    public struct Parts: Sendable, Equatable {
        public var host: String
        public var port: Int?
        public var isIPv6Literal: Bool

        public init(host: String, port: Int?, isIPv6Literal: Bool) {
            self.host = host
            self.port = port
            self.isIPv6Literal = isIPv6Literal
        }
    }

    /// `parse` for a written authority (a setting, a variable, a URL): the host in ASCII lower case.
    public static func parts(of text: Substring, port rule: PortRule, host hostRule: HostRule = .any) throws(Problem) -> Parts {
        switch parse(text.utf8, port: rule, host: hostRule) {
        case .success(let span):
            return Parts(
                host: String(decoding: text.utf8[span.host].map(asciiLower), as: UTF8.self), port: span.port, isIPv6Literal: span.isIPv6Literal)
        case .failure(let problem):
            throw problem
        }
    }

    /// The same for a whole string.
    public static func parts(of text: String, port rule: PortRule, host hostRule: HostRule = .any) throws(Problem) -> Parts {
        try parts(of: text[...], port: rule, host: hostRule)
    }

    /// A byte of reg-name or IPv4address (RFC 3986 §3.2.2): unreserved, sub-delims, or `%` of pct-encoded.
    @inlinable
    static func isRegNameByte(_ b: UInt8) -> Bool {
        switch b {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
            UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"), UInt8(ascii: "%"), UInt8(ascii: "!"),
            UInt8(ascii: "$"), UInt8(ascii: "&"), UInt8(ascii: "'"), UInt8(ascii: "("), UInt8(ascii: ")"), UInt8(ascii: "*"),
            UInt8(ascii: "+"), UInt8(ascii: ","), UInt8(ascii: ";"), UInt8(ascii: "="):
            return true
        default:
            return false
        }
    }

    @inlinable
    static func isHexDigit(_ b: UInt8) -> Bool {
        (b >= UInt8(ascii: "0") && b <= UInt8(ascii: "9")) || (asciiLower(b) >= UInt8(ascii: "a") && asciiLower(b) <= UInt8(ascii: "f"))
    }
}
