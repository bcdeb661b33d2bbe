/// Appends an upstream request head to a caller-owned buffer (RFC 9112 §3, §5): one buffer per
/// request, no intermediate strings. A client's fields are copied by
/// ``RequestHead/copyField(_:to:)``. Chunked body framing is shared with ``ResponseWriter``.
public enum RequestWriter {
    /// `METHOD prefix+path[?query] HTTP/1.1\r\n`: the target is the upstream's base path followed by
    /// the client's normalised path and its query as it came.
    public static func appendRequestLine(_ buf: inout [UInt8], method: String, pathPrefix: String, path: String, query: String?) {
        appendUTF8(&buf, method)
        buf.append(asciiSP)
        if !pathPrefix.isEmpty { appendUTF8(&buf, pathPrefix) }
        appendUTF8(&buf, path)
        if let query {
            buf.append(UInt8(ascii: "?"))
            appendUTF8(&buf, query)
        }
        appendFieldLine(&buf, " HTTP/1.1\r\n")
    }

    /// `name: value\r\n` for a field the proxy sets itself.
    public static func appendField(_ buf: inout [UInt8], name: StaticString, value: String) {
        buf.append(contentsOf: UnsafeRawBufferPointer(start: name.utf8Start, count: name.utf8CodeUnitCount))
        buf.append(asciiColon)
        buf.append(asciiSP)
        appendUTF8(&buf, value)
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

    /// A whole field line known when the program is built (`Name: value\r\n`).
    @inline(__always)
    public static func appendFieldLine(_ buf: inout [UInt8], _ line: StaticString) {
        buf.append(contentsOf: UnsafeRawBufferPointer(start: line.utf8Start, count: line.utf8CodeUnitCount))
    }

    /// The blank line that ends the head.
    public static func appendEndOfHead(_ buf: inout [UInt8]) {
        buf.append(asciiCR)
        buf.append(asciiLF)
    }
}
