import Basics

/// The four forms of request-target (RFC 9112 §3.2).
public enum RequestTarget: Sendable, Equatable {
    /// `/path?query` (RFC 9112 §3.2.1).
    case origin(path: String, query: String?)
    /// `scheme://host[:port]/path?query` (RFC 9112 §3.2.2). Scheme and host are lowercased, an IPv6
    /// host comes without brackets, and an empty path is `/`.
    case absolute(scheme: String, host: String, port: Int?, path: String, query: String?)
    /// `host:port`, for CONNECT (RFC 9112 §3.2.3).
    case authority(host: String, port: Int)
    /// `*`, for a server-wide OPTIONS (RFC 9112 §3.2.4).
    case asterisk

    /// Parses a raw request-target; nil means malformed (400). Userinfo and fragments are refused
    /// (RFC 9110 §4.2.4 deprecates userinfo; a fragment is never sent, RFC 9110 §7.1).
    public static func parse(_ target: String) -> RequestTarget? {
        if target.utf8.first == UInt8(ascii: "/") { return parseOriginForm(target) }
        let bytes = Array(target.utf8)
        guard let first = bytes.first else { return nil }
        if bytes.count == 1 && first == UInt8(ascii: "*") { return .asterisk }
        if first == UInt8(ascii: "/") {
            guard let (path, query) = splitPathAndQuery(bytes[...]), !path.isEmpty else { return nil }
            return .origin(path: path, query: query)
        }
        if let schemeEnd = schemeLength(bytes) {
            let scheme = String(decoding: bytes[..<schemeEnd].map(asciiLower), as: UTF8.self)
            let rest = bytes[(schemeEnd + 3)...]
            let authorityEnd = rest.firstIndex { $0 == UInt8(ascii: "/") || $0 == UInt8(ascii: "?") } ?? rest.endIndex
            guard let (host, port) = parseAuthority(rest[..<authorityEnd], portRequired: false), !host.isEmpty,
                let (path, query) = splitPathAndQuery(rest[authorityEnd...])
            else { return nil }
            // RFC 9110 §4.2.3: an empty path is equivalent to "/".
            return .absolute(scheme: scheme, host: host, port: port, path: path.isEmpty ? "/" : path, query: query)
        }
        guard let (host, port) = parseAuthority(bytes[...], portRequired: true), let port, !host.isEmpty else {
            return nil
        }
        return .authority(host: host, port: port)
    }
}

extension RequestTarget {
    /// `/path?query`, read in place (nearly every request): the path is `target` itself when there is
    /// no query, so the usual request makes no new String here.
    private static func parseOriginForm(_ target: String) -> RequestTarget? {
        var copy = target
        return copy.withUTF8 { bytes -> RequestTarget? in
            let question = bytes.firstIndex(of: UInt8(ascii: "?"))
            let pathEnd = question ?? bytes.count
            guard isValidPathOrQuery(bytes, 0..<pathEnd) else { return nil }
            guard let question else { return .origin(path: target, query: nil) }
            guard isValidPathOrQuery(bytes, (question + 1)..<bytes.count) else { return nil }
            return .origin(
                path: String(decoding: UnsafeBufferPointer(rebasing: bytes[..<question]), as: UTF8.self),
                query: String(decoding: UnsafeBufferPointer(rebasing: bytes[(question + 1)...]), as: UTF8.self))
        }
    }
}

extension RequestTarget {
    /// Whether `target` is an origin-form path that neither parsing nor dot-segment removal changes:
    /// it starts with `/` and holds only visible ASCII other than `?` (no query), `#` (refused: a
    /// fragment is never sent, RFC 9110 §7.1), `%` (to be checked, and maybe an encoded dot) and `.`
    /// (maybe a dot-segment, RFC 3986 §5.2.4). For such a target `parse` gives
    /// `.origin(path: target, query: nil)` and ``removeDotSegments(_:)`` gives it back unchanged, so
    /// the usual request skips both (and their second and third passes over the bytes).
    public static func isPlainPath(_ target: String) -> Bool {
        var copy = target
        return copy.withUTF8 { bytes in
            guard bytes.first == UInt8(ascii: "/") else { return false }
            for b in bytes {
                guard
                    b > asciiSP && b < 0x7F && b != UInt8(ascii: "?") && b != UInt8(ascii: "#")
                        && b != UInt8(ascii: "%") && b != UInt8(ascii: ".")
                else { return false }
            }
            return true
        }
    }
}

/// The length of `scheme` when `bytes` starts with `scheme "://"` (RFC 3986 §3.1).
private func schemeLength(_ bytes: [UInt8]) -> Int? {
    var i = 0
    while i < bytes.count {
        let b = bytes[i]
        let isAlpha = (b | 0x20) >= UInt8(ascii: "a") && (b | 0x20) <= UInt8(ascii: "z")
        if isAlpha
            || (i > 0
                && ((b >= UInt8(ascii: "0") && b <= UInt8(ascii: "9")) || b == UInt8(ascii: "+")
                    || b == UInt8(ascii: "-") || b == UInt8(ascii: ".")))
        {
            i += 1
            continue
        }
        break
    }
    guard i > 0, bytes.count >= i + 3, bytes[i] == UInt8(ascii: ":"), bytes[i + 1] == UInt8(ascii: "/"),
        bytes[i + 2] == UInt8(ascii: "/")
    else { return nil }
    return i
}

/// Visible ASCII only, no fragment, and every `%` followed by two hex digits (RFC 3986 §2.1).
private func isValidPathOrQuery(_ bytes: ArraySlice<UInt8>) -> Bool {
    bytes.withUnsafeBufferPointer { isValidPathOrQuery($0, 0..<$0.count) }
}

/// The same for `range` of a buffer.
private func isValidPathOrQuery(_ bytes: UnsafeBufferPointer<UInt8>, _ range: Range<Int>) -> Bool {
    var i = range.lowerBound
    let end = range.upperBound
    while i < end {
        let b = bytes[i]
        guard b > asciiSP && b < 0x7F && b != UInt8(ascii: "#") else { return false }
        if b == UInt8(ascii: "%") {
            guard i + 2 < end, hexValue(bytes[i + 1]) != nil, hexValue(bytes[i + 2]) != nil
            else { return false }
            i += 3
            continue
        }
        i += 1
    }
    return true
}

/// Splits `path?query`; nil when either part holds a byte a request-target may not.
private func splitPathAndQuery(_ bytes: ArraySlice<UInt8>) -> (String, String?)? {
    let question = bytes.firstIndex(of: UInt8(ascii: "?"))
    let pathBytes = bytes[..<(question ?? bytes.endIndex)]
    guard isValidPathOrQuery(pathBytes) else { return nil }
    let path = String(decoding: pathBytes, as: UTF8.self)
    guard let question else { return (path, nil) }
    let queryBytes = bytes[(question + 1)...]
    guard isValidPathOrQuery(queryBytes) else { return nil }
    return (path, String(decoding: queryBytes, as: UTF8.self))
}

/// `host [":" port]` (RFC 3986 §3.2) with a reg-name, IPv4 or IPv6 host (IPvFuture and user
/// information are refused); an empty port is the scheme's default (RFC 3986 §3.2.3), port 0 is
/// taken. The host is lowercased and an IP literal loses its brackets.
private func parseAuthority(_ bytes: ArraySlice<UInt8>, portRequired: Bool) -> (String, Int?)? {
    guard case .success(let span) = Authority.parse(bytes, port: .init(required: portRequired, emptyIsDefault: true, lowest: 0), host: .regName)
    else { return nil }
    return (String(decoding: bytes[span.host].map(asciiLower), as: UTF8.self), span.port)
}
