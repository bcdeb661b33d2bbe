/// Appends an upstream request head to a caller-owned buffer (RFC 9112 §3, §5): one buffer per
/// request, no intermediate strings. A client's fields are copied by
/// ``RequestHead/copyField(_:to:)``. Chunked body framing is shared with ``ResponseWriter``.
public enum RequestWriter {
    /// `METHOD prefix+path[?query] HTTP/1.1\r\n`: the target is the upstream's base path followed by
    /// the client's normalised path and its query as it came.
    public static func appendRequestLine(_ buf: inout [UInt8], method: String, pathPrefix: String, path: String, query: String?) {
        buf.append(contentsOf: method.utf8)
        buf.append(asciiSP)
        buf.append(contentsOf: pathPrefix.utf8)
        buf.append(contentsOf: path.utf8)
        if let query {
            buf.append(UInt8(ascii: "?"))
            buf.append(contentsOf: query.utf8)
        }
        buf.append(contentsOf: " HTTP/1.1\r\n".utf8)
    }

    /// `name: value\r\n` for a field the proxy sets itself.
    public static func appendField(_ buf: inout [UInt8], name: StaticString, value: String) {
        buf.append(contentsOf: UnsafeRawBufferPointer(start: name.utf8Start, count: name.utf8CodeUnitCount))
        buf.append(asciiColon)
        buf.append(asciiSP)
        buf.append(contentsOf: value.utf8)
        buf.append(asciiCR)
        buf.append(asciiLF)
    }

    /// `name: value\r\n` with a value given as bytes (the Authorization value).
    public static func appendField(_ buf: inout [UInt8], name: StaticString, value: [UInt8]) {
        buf.append(contentsOf: UnsafeRawBufferPointer(start: name.utf8Start, count: name.utf8CodeUnitCount))
        buf.append(asciiColon)
        buf.append(asciiSP)
        buf.append(contentsOf: value)
        buf.append(asciiCR)
        buf.append(asciiLF)
    }

    /// The blank line that ends the head.
    public static func appendEndOfHead(_ buf: inout [UInt8]) {
        buf.append(asciiCR)
        buf.append(asciiLF)
    }
}
