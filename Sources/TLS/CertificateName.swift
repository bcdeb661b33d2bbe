import Sockets

/// The name a minted leaf certificate is for: a DNS name (subjectAltName dNSName) or an IP address
/// (iPAddress), RFC 5280 §4.2.1.6. Checked here so that nothing odd reaches a certificate.
public enum CertificateName: Hashable, Sendable {
    case dns(String)
    case address(String)

    /// `host` as a CONNECT line gives it (an IPv6 literal may keep its brackets); nil when it is
    /// neither an IP literal nor a DNS name of letters, digits and hyphens (RFC 1123 §2.1).
    public init?(_ host: String) {
        var name = Substring(host)
        if name.hasPrefix("[") && name.hasSuffix("]") {
            name = name.dropFirst().dropLast()
            guard IPAddress.v6(String(name)) != nil else { return nil }
            self = .address(String(name))
            return
        }
        if IPAddress.v4(String(name)) != nil || IPAddress.v6(String(name)) != nil {
            self = .address(String(name))
            return
        }
        if name.hasSuffix(".") { name = name.dropLast() }
        let lowered = name.lowercased()
        guard !lowered.isEmpty, lowered.utf8.count <= 253 else { return nil }
        for label in lowered.split(separator: ".", omittingEmptySubsequences: false) {
            guard (1...63).contains(label.utf8.count), label.first != "-", label.last != "-",
                label.utf8.allSatisfy({ ($0 >= 0x61 && $0 <= 0x7A) || ($0 >= 0x30 && $0 <= 0x39) || $0 == 0x2D })
            else { return nil }
        }
        // An all-numeric last label would read as an IPv4 address to some clients.
        guard let last = lowered.split(separator: ".").last, !last.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else { return nil }
        self = .dns(lowered)
    }

    public var text: String {
        switch self {
        case .dns(let name): name
        case .address(let address): address
        }
    }
}
