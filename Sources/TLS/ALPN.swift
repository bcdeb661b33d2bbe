/// Application-Layer Protocol Negotiation (RFC 7301): the server picks from the client's list and
/// offers only HTTP/1.1 (the proxy speaks no HTTP/2), so a client that also offers h2 uses HTTP/1.1.
public enum ALPN {
    /// "http/1.1" as the protocol identifier registered by RFC 7301 §6.
    public static let http11: [UInt8] = Array("http/1.1".utf8)

    /// Where http/1.1 starts in the client's ProtocolNameList (RFC 7301 §3.1: each name one length byte
    /// then that many bytes; a name is never empty), or nil when the list lacks it or is malformed.
    public static func offsetOfHTTP11(in list: UnsafeRawBufferPointer) -> Int? {
        var index = 0
        while index < list.count {
            let length = Int(list[index])
            let start = index + 1
            guard length > 0, start + length <= list.count else { return nil }
            if length == http11.count && zip(list[start..<start + length], http11).allSatisfy({ $0 == $1 }) {
                return start
            }
            index = start + length
        }
        return nil
    }
}
