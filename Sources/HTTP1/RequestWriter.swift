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
