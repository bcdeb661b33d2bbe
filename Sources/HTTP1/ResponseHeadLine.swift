import Basics

/// One line of an upstream response head, as libcurl hands them over (RFC 9112 §4, §5).
public enum ResponseHeadLine: Sendable, Equatable {
    /// The status line. `HTTP/2` and later are reported as `.http1_1`: the proxy answers its client in
    /// HTTP/1.1 whatever the upstream spoke. The reason may be empty.
    case status(version: HTTPVersion, code: Int, reason: String)
    case field(HTTPField)
    /// The blank line that ends the head.
    case end
    /// Anything else, including obs-fold lines (RFC 9112 §5.2: a proxy must not forward them as they are).
    case invalid

    /// Parses one line including its CRLF (a bare LF is accepted, RFC 9112 §2.2).
    public static func parse(_ line: UnsafeRawBufferPointer) -> ResponseHeadLine {
        let bytes = withoutLineEnd(line)
        if bytes.isEmpty { return .end }
        if isStatusLine(bytes) { return parseStatus(bytes) }
        return parseField(bytes)
    }

    /// The line without its CRLF (or bare LF, RFC 9112 §2.2).
    public static func withoutLineEnd(_ line: UnsafeRawBufferPointer) -> UnsafeRawBufferPointer {
        var end = line.count
        if end > 0 && line[end - 1] == asciiLF { end -= 1 }
        if end > 0 && line[end - 1] == asciiCR { end -= 1 }
        return UnsafeRawBufferPointer(rebasing: line[0..<end])
    }

    /// Whether a line (without its line end) starts a response head.
    public static func isStatusLine(_ bytes: UnsafeRawBufferPointer) -> Bool {
        startsWith(bytes, "HTTP/")
    }
}

private func startsWith(_ bytes: UnsafeRawBufferPointer, _ literal: StaticString) -> Bool {
    let count = literal.utf8CodeUnitCount
    guard bytes.count >= count else { return false }
    for k in 0..<count where bytes[k] != literal.utf8Start[k] {
        return false
    }
    return true
}

private func isDigit(_ b: UInt8) -> Bool {
    b >= UInt8(ascii: "0") && b <= UInt8(ascii: "9")
}

/// The parts of a status line (RFC 9112 §4), shared by ``ResponseHeadLine`` and ``ResponseParser``, which
/// differ only in the versions they accept.
struct StatusLineParts {
    /// The major version digit (1 or more).
    var major: UInt8
    /// The minor version digit; nil when the version has none ("HTTP/2", as libcurl reports HTTP/2 heads).
    var minor: UInt8?
    var code: Int
    /// Where the reason phrase is in the line (possibly empty).
    var reason: Range<Int>
}

/// status-line = HTTP-version SP status-code SP [ reason-phrase ] (RFC 9112 §4), the line end removed;
/// the SP before an empty reason is often left out, and is tolerated. The version is "HTTP/" DIGIT
/// [ "." DIGIT ], "HTTP/1" without a minor digit refused. nil for anything else, control characters in
/// the reason included.
func scanStatusLine(_ bytes: UnsafeRawBufferPointer) -> StatusLineParts? {
    guard startsWith(bytes, "HTTP/") else { return nil }
    var i = 5  // after "HTTP/"
    guard i < bytes.count, isDigit(bytes[i]), bytes[i] >= UInt8(ascii: "1") else { return nil }
    let major = bytes[i] &- UInt8(ascii: "0")
    i += 1
    var minor: UInt8? = nil
    if i < bytes.count && bytes[i] == UInt8(ascii: ".") {
        i += 1
        guard i < bytes.count, isDigit(bytes[i]) else { return nil }
        minor = bytes[i] &- UInt8(ascii: "0")
        i += 1
    } else if major == 1 {
        return nil  // "HTTP/1" without a minor version
    }
    guard i < bytes.count, bytes[i] == asciiSP else { return nil }
    i += 1
    // status-code = 3DIGIT (RFC 9110 §15); a fourth digit fails the SP check below.
    guard i + 3 <= bytes.count, isDigit(bytes[i]), isDigit(bytes[i + 1]), isDigit(bytes[i + 2]) else {
        return nil
    }
    let code = Int(bytes[i] &- 48) * 100 + Int(bytes[i + 1] &- 48) * 10 + Int(bytes[i + 2] &- 48)
    guard code >= 100 else { return nil }
    i += 3
    var reason = i..<i
    if i < bytes.count {
        guard bytes[i] == asciiSP else { return nil }
        i += 1
        // reason-phrase = 1*( HTAB / SP / VCHAR / obs-text )
        for k in i..<bytes.count where !isFieldValueByte(bytes[k]) {
            return nil
        }
        reason = i..<bytes.count
    }
    return StatusLineParts(major: major, minor: minor, code: code, reason: reason)
}

private func parseStatus(_ bytes: UnsafeRawBufferPointer) -> ResponseHeadLine {
    guard let parts = scanStatusLine(bytes) else { return .invalid }
    let version: HTTPVersion = parts.major == 1 && parts.minor == 0 ? .http1_0 : .http1_1
    let reason = String(decoding: UnsafeRawBufferPointer(rebasing: bytes[parts.reason]), as: UTF8.self)
    return .status(version: version, code: parts.code, reason: reason)
}

private func parseField(_ bytes: UnsafeRawBufferPointer) -> ResponseHeadLine {
    guard case .success(let parts) = scanFieldLine(bytes) else { return .invalid }
    return .field(
        HTTPField(
            name: String(decoding: UnsafeRawBufferPointer(rebasing: bytes[0..<parts.colon]), as: UTF8.self),
            value: String(decoding: UnsafeRawBufferPointer(rebasing: bytes[parts.value]), as: UTF8.self)))
}
