import Basics

/// The hop-by-hop header rules a proxy applies (RFC 9110 §7.6.1).
public enum HopByHop {
    /// True when a field of this name must not be forwarded: the fixed hop-by-hop names, and any name
    /// the message's Connection fields list (`connectionOptions`, as in ``RequestHead/connectionOptions``).
    /// Case-insensitive; no allocation.
    public static func isHopByHop(_ name: String, connectionOptions: [String]) -> Bool {
        if isFixedHopByHop(name) { return true }
        for option in connectionOptions where asciiCaseInsensitiveEquals(name, option) {
            return true
        }
        return false
    }

    /// The names that are hop-by-hop whatever Connection says.
    public static func isFixedHopByHop(_ name: String) -> Bool {
        isFixedHopByHop(length: name.utf8.count) { asciiCaseInsensitiveEquals(name, $0.description) }
    }

    /// Whether a name of this length may be one of the fixed names (`isFixedHopByHop(length:_:)`'s
    /// lengths): most names are not, and are told by one bit test.
    @inline(__always)
    static func mayBeFixedHopByHop(length: Int) -> Bool {
        let lengths: UInt64 = 1 << 2 | 1 << 7 | 1 << 10 | 1 << 16 | 1 << 17 | 1 << 18 | 1 << 19
        return length < 64 && (lengths >> UInt64(truncatingIfNeeded: length)) & 1 != 0
    }

    /// The one list of fixed names, for request fields (Strings) and response fields (bytes): the
    /// length picks the candidates, so most names are rejected without a comparison. `equals` compares
    /// the name with a lowercase candidate.
    @inline(__always)
    static func isFixedHopByHop(length: Int, _ equals: (StaticString) -> Bool) -> Bool {
        switch length {
        case 2: return equals("te")
        case 7: return equals("trailer") || equals("upgrade")
        case 10: return equals("connection") || equals("keep-alive")
        case 16: return equals("proxy-connection")
        case 17: return equals("transfer-encoding")
        case 18: return equals("proxy-authenticate")
        case 19: return equals("proxy-authorization")
        default: return false
        }
    }
}
