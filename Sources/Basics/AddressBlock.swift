/// A block of IP addresses in CIDR notation: `10.0.0.0/8` (RFC 4632 §3.1), `fc00::/7` (RFC 4291
/// §2.3), or one address alone (`fd00:ec2::254`, which is `/128`). Pure: parsing and matching of raw
/// addresses (4 bytes for IPv4, 16 for IPv6, network order), for the forward proxy's
/// `deny_addresses` (docs/FORWARD-PROXY.md, "Where a tunnel may go").
public struct AddressBlock: Sendable, Equatable, Hashable, CustomStringConvertible {
    /// The first address of the block: 4 or 16 bytes, every bit past the prefix 0.
    public let network: [UInt8]
    /// How many leading bits every address of the block shares with `network`.
    public let prefixLength: Int

    /// Why a text is not a block, in words that name no more than the text itself.
    public struct ParseError: Error, Equatable, Sendable, CustomStringConvertible {
        public let description: String
    }

    /// `address/prefix`, or an address alone (the block of that one address). A prefix that leaves
    /// bits set in the address (`10.0.0.1/8`) is refused: the block it means is ambiguous.
    public init(_ text: String) throws(ParseError) {
        let parts = text.split(separator: "/", maxSplits: 1, omittingEmptySubsequences: false)
        guard let address = IPAddressText.parse(parts[0]) else {
            throw ParseError(description: "\"\(text)\" is not an IPv4 or IPv6 address with an optional /prefix (e.g. 10.0.0.0/8, fc00::/7)")
        }
        let bits = address.count * 8
        var prefix = bits
        if parts.count == 2 {
            let digits = parts[1]
            guard !digits.isEmpty, digits.count <= 3, digits.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }), let n = Int(digits), n <= bits else {
                throw ParseError(description: "\"\(text)\": the prefix must be a number from 0 to \(bits)")
            }
            prefix = n
        }
        let masked = Self.masked(address, prefix)
        guard masked == address else {
            let shown = IPAddressText.format(masked)
            throw ParseError(description: "\"\(text)\" has address bits set past its /\(prefix) prefix; did you mean \(shown)/\(prefix)?")
        }
        network = address
        prefixLength = prefix
    }

    /// Whether `address` (4 or 16 bytes) is in the block; an address of the other family never is.
    public func contains(_ address: [UInt8]) -> Bool {
        guard address.count == network.count else { return false }
        var left = prefixLength
        for i in 0..<network.count where left > 0 {
            let take = min(8, left)
            let mask = UInt8(truncatingIfNeeded: 0xFF << (8 - take))
            if address[i] & mask != network[i] { return false }
            left -= take
        }
        return true
    }

    public var description: String { "\(IPAddressText.format(network))/\(prefixLength)" }

    private static func masked(_ address: [UInt8], _ prefix: Int) -> [UInt8] {
        var out = address
        var left = prefix
        for i in out.indices {
            let take = max(0, min(8, left))
            out[i] &= take == 0 ? 0 : UInt8(truncatingIfNeeded: 0xFF << (8 - take))
            left -= 8
        }
        return out
    }
}

/// IP addresses as text, pure (no resolver): dotted-quad IPv4 (RFC 791 §3.2, four decimal parts of
/// 0–255 with no leading zero, which some readers take for octal) and IPv6 (RFC 4291 §2.2: eight
/// groups of 1–4 hex digits, one `::`, a dotted IPv4 tail), no zone (`%eth0`).
public enum IPAddressText {
    /// 4 or 16 bytes, or nil when `text` is neither form.
    public static func parse<S: StringProtocol>(_ text: S) -> [UInt8]? {
        let bytes = Array(text.utf8)
        return bytes.contains(UInt8(ascii: ":")) ? ipv6(bytes[...]) : ipv4(bytes[...])
    }

    static func ipv4(_ bytes: ArraySlice<UInt8>) -> [UInt8]? {
        let parts = bytes.split(separator: UInt8(ascii: "."), omittingEmptySubsequences: false)
        guard parts.count == 4 else { return nil }
        var out: [UInt8] = []
        for part in parts {
            guard (1...3).contains(part.count), part.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else { return nil }
            if part.count > 1 && part.first == 0x30 { return nil }
            let value = part.reduce(0) { $0 * 10 + Int($1 - 0x30) }
            guard value <= 255 else { return nil }
            out.append(UInt8(value))
        }
        return out
    }

    static func ipv6(_ bytes: ArraySlice<UInt8>) -> [UInt8]? {
        // Split at the one `::` (if any) into the groups before and after it.
        var head = bytes
        var tail: ArraySlice<UInt8>? = nil
        if let gap = firstDoubleColon(bytes) {
            head = bytes[bytes.startIndex..<gap]
            tail = bytes[(gap + 2)...]
            if firstDoubleColon(tail!) != nil { return nil }
        }
        guard let front = groups(head, mayEndInIPv4: tail == nil) else { return nil }
        var back: [UInt8] = []
        if let tail {
            guard let parsed = groups(tail, mayEndInIPv4: true) else { return nil }
            back = parsed
        }
        let count = front.count + back.count
        if tail == nil {
            guard count == 16 else { return nil }
            return front
        }
        // `::` stands for at least one group of zeros.
        guard count <= 14 else { return nil }
        return front + [UInt8](repeating: 0, count: 16 - count) + back
    }

    /// The bytes of `:`-separated groups (an empty text is no group), the last of which may be a
    /// dotted IPv4 address (4 bytes); nil when any group is not 1–4 hex digits.
    private static func groups(_ text: ArraySlice<UInt8>, mayEndInIPv4: Bool) -> [UInt8]? {
        guard !text.isEmpty else { return [] }
        let parts = text.split(separator: UInt8(ascii: ":"), omittingEmptySubsequences: false)
        var out: [UInt8] = []
        for (i, part) in parts.enumerated() {
            if i == parts.count - 1, mayEndInIPv4, part.contains(UInt8(ascii: ".")) {
                guard let v4 = ipv4(part) else { return nil }
                out += v4
                continue
            }
            guard (1...4).contains(part.count) else { return nil }
            var value = 0
            for b in part {
                guard let digit = hexValue(b) else { return nil }
                value = value * 16 + digit
            }
            out += [UInt8(value >> 8), UInt8(value & 0xFF)]
        }
        return out
    }

    private static func firstDoubleColon(_ bytes: ArraySlice<UInt8>) -> Int? {
        var i = bytes.startIndex
        while i + 1 < bytes.endIndex {
            if bytes[i] == UInt8(ascii: ":") && bytes[i + 1] == UInt8(ascii: ":") { return i }
            i += 1
        }
        return nil
    }

    private static func hexValue(_ b: UInt8) -> Int? {
        switch b {
        case 0x30...0x39: return Int(b - 0x30)
        case 0x61...0x66: return Int(b - 0x61 + 10)
        case 0x41...0x46: return Int(b - 0x41 + 10)
        default: return nil
        }
    }

    /// The text of 4 or 16 bytes: dotted IPv4; IPv6 in RFC 5952's form (lowercase, no leading zeros,
    /// the longest run of two or more zero groups as `::`, the first when two are as long).
    public static func format(_ address: [UInt8]) -> String {
        if address.count == 4 { return address.map(String.init).joined(separator: ".") }
        guard address.count == 16 else { return "?" }
        let groups = (0..<8).map { Int(address[2 * $0]) << 8 | Int(address[2 * $0 + 1]) }
        var best = (start: -1, length: 0)
        var run = (start: -1, length: 0)
        for (i, g) in groups.enumerated() {
            if g == 0 {
                run = run.start < 0 ? (i, 1) : (run.start, run.length + 1)
                if run.length > best.length { best = run }
            } else {
                run = (-1, 0)
            }
        }
        let hex = groups.map { String($0, radix: 16) }
        guard best.length >= 2 else { return hex.joined(separator: ":") }
        let before = hex[..<best.start].joined(separator: ":")
        let after = hex[(best.start + best.length)...].joined(separator: ":")
        return before + "::" + after
    }
}
