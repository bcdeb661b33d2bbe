import Basics

// The serializers (RFC 9112 §3-§7): an upstream request head, a client response head and chunked
// framing, each appended to a caller-owned buffer.

/// Appends a response head and chunked framing to a caller-owned buffer (RFC 9112 §4, §5, §7.1).
/// Nothing is validated here: check names and values with ``isValidFieldName(_:)`` and
/// ``isValidFieldValue(_:)`` where they come from outside.
public enum ResponseWriter {
    /// `HTTP/1.1 200 OK\r\n`
    public static func appendStatusLine(_ buf: ByteBuffer, version: HTTPVersion, code: Int, reason: String) {
        switch version {
        case .http1_0: buf.append("HTTP/1.0 ")
        case .http1_1: buf.append("HTTP/1.1 ")
        }
        if code >= 100 && code <= 999 {
            // The usual three digits, without the divisions of appendDecimal.
            buf.append(UInt8(truncatingIfNeeded: code / 100) &+ UInt8(ascii: "0"))
            buf.append(UInt8(truncatingIfNeeded: code / 10 % 10) &+ UInt8(ascii: "0"))
            buf.append(UInt8(truncatingIfNeeded: code % 10) &+ UInt8(ascii: "0"))
        } else {
            appendDecimal(buf, code)
        }
        buf.append(asciiSP)
        buf.append(utf8: reason)
        buf.appendCRLF()
    }

    /// `name: value\r\n`
    public static func appendField(_ buf: ByteBuffer, name: String, value: String) {
        buf.append(utf8: name)
        buf.append(asciiColon)
        buf.append(asciiSP)
        buf.append(utf8: value)
        buf.appendCRLF()
    }

    /// The blank line that ends the head.
    public static func appendEndOfHead(_ buf: ByteBuffer) {
        buf.appendCRLF()
    }

    /// `size` in lowercase hex, then CRLF. A size of 0 (or less) appends nothing: an empty chunk would be
    /// the last chunk, so skip empty data altogether (or use ``appendChunk(_:_:)``, which does).
    public static func appendChunkHeader(_ buf: ByteBuffer, size: Int) {
        guard size > 0 else { return }
        let digits = (Int.bitWidth - size.leadingZeroBitCount + 3) / 4
        for shift in stride(from: (digits - 1) * 4, through: 0, by: -4) {
            let nibble = UInt8((size >> shift) & 0xF)
            buf.append(nibble < 10 ? nibble + UInt8(ascii: "0") : nibble - 10 + UInt8(ascii: "a"))
        }
        buf.appendCRLF()
    }

    /// One whole chunk (size line, data, CRLF); empty data appends nothing.
    public static func appendChunk(_ buf: ByteBuffer, _ data: UnsafeRawBufferPointer) {
        guard !data.isEmpty else { return }
        appendChunkHeader(buf, size: data.count)
        buf.append(data)
        buf.appendCRLF()
    }

    /// The CRLF after a chunk's data.
    public static func appendChunkEnd(_ buf: ByteBuffer) {
        buf.appendCRLF()
    }

    /// `0\r\n\r\n`: the last chunk and an empty trailer section.
    public static func appendLastChunk(_ buf: ByteBuffer) {
        buf.append("0\r\n\r\n")
    }

    /// The standard reason phrase (RFC 9110 §15), or "" for a code without one.
    public static func reasonPhrase(for code: Int) -> String {
        switch code {
        case 100: return "Continue"
        case 101: return "Switching Protocols"
        case 103: return "Early Hints"
        case 200: return "OK"
        case 201: return "Created"
        case 202: return "Accepted"
        case 203: return "Non-Authoritative Information"
        case 204: return "No Content"
        case 205: return "Reset Content"
        case 206: return "Partial Content"
        case 300: return "Multiple Choices"
        case 301: return "Moved Permanently"
        case 302: return "Found"
        case 303: return "See Other"
        case 304: return "Not Modified"
        case 307: return "Temporary Redirect"
        case 308: return "Permanent Redirect"
        case 400: return "Bad Request"
        case 401: return "Unauthorized"
        case 402: return "Payment Required"
        case 403: return "Forbidden"
        case 404: return "Not Found"
        case 405: return "Method Not Allowed"
        case 406: return "Not Acceptable"
        case 407: return "Proxy Authentication Required"
        case 408: return "Request Timeout"
        case 409: return "Conflict"
        case 410: return "Gone"
        case 411: return "Length Required"
        case 412: return "Precondition Failed"
        case 413: return "Content Too Large"
        case 414: return "URI Too Long"
        case 415: return "Unsupported Media Type"
        case 416: return "Range Not Satisfiable"
        case 417: return "Expectation Failed"
        case 421: return "Misdirected Request"
        case 422: return "Unprocessable Content"
        case 425: return "Too Early"
        case 426: return "Upgrade Required"
        case 428: return "Precondition Required"
        case 429: return "Too Many Requests"
        case 431: return "Request Header Fields Too Large"
        case 451: return "Unavailable For Legal Reasons"
        case 500: return "Internal Server Error"
        case 501: return "Not Implemented"
        case 502: return "Bad Gateway"
        case 503: return "Service Unavailable"
        case 504: return "Gateway Timeout"
        case 505: return "HTTP Version Not Supported"
        default: return ""
        }
    }
}

/// Appends `n` in decimal ASCII, without an intermediate String.
public func appendDecimal(_ buf: ByteBuffer, _ n: Int) {
    if n < 0 {
        buf.append(UInt8(ascii: "-"))
        // Int.min has no positive counterpart; go through its magnitude.
        appendUnsigned(buf, n.magnitude)
    } else {
        appendUnsigned(buf, UInt(n))
    }
}

private func appendUnsigned(_ buf: ByteBuffer, _ n: UInt) {
    var divisor: UInt = 1
    while n / divisor >= 10 { divisor *= 10 }
    var rest = n
    while divisor > 0 {
        buf.append(UInt8(rest / divisor) + UInt8(ascii: "0"))
        rest %= divisor
        divisor /= 10
    }
}

/// Appends an upstream request head to a caller-owned buffer (RFC 9112 §3, §5): one buffer per
/// request, no intermediate strings. A client's fields are copied by
/// ``FieldBlock/copyField(_:to:)``. Chunked body framing is shared with ``ResponseWriter``.
public enum RequestWriter {
    /// `METHOD prefix+path[?query] HTTP/1.1\r\n`: the target is the upstream's base path followed by
    /// the client's normalised path and its query as it came.
    public static func appendRequestLine(_ buf: ByteBuffer, method: String, pathPrefix: String, path: String, query: String?) {
        buf.append(utf8: method)
        buf.append(asciiSP)
        if !pathPrefix.isEmpty { buf.append(utf8: pathPrefix) }
        buf.append(utf8: path)
        if let query {
            buf.append(UInt8(ascii: "?"))
            buf.append(utf8: query)
        }
        buf.append(" HTTP/1.1\r\n")
    }

    /// `name: value\r\n` for a field the proxy sets itself.
    public static func appendField(_ buf: ByteBuffer, name: StaticString, value: String) {
        buf.append(name)
        buf.append(": ")
        buf.append(utf8: value)
        buf.appendCRLF()
    }

    /// `name: value\r\n` with a value given as bytes (the Authorization value).
    public static func appendField(_ buf: ByteBuffer, name: StaticString, value: [UInt8]) {
        buf.append(name)
        buf.append(": ")
        buf.append(value)
        buf.appendCRLF()
    }

    /// A whole field line known when the program is built (`Name: value\r\n`).
    @inline(__always)
    public static func appendFieldLine(_ buf: ByteBuffer, _ line: StaticString) {
        buf.append(line)
    }

    /// The blank line that ends the head.
    public static func appendEndOfHead(_ buf: ByteBuffer) {
        buf.appendCRLF()
    }
}
