import Basics
import Config
import Foundation
import HTTP1

/// Where a route's placeholder must stand in a request (CONTRACT.md "Programs in a sandbox",
/// "Placeholders"): exactly where the route's credential goes, in the same form. Chosen once per
/// route from `inject` and the credentials type, as `CredentialPlacement` is; pure, so each spot's
/// reading is unit-tested without a connection.
enum PlaceholderSpot: Equatable {
    /// A field whose value is `prefix`, the placeholder, then `suffix` (`inject.header` with its
    /// `format`; `Authorization: Bearer {token}` without `inject`). The prefix is compared ignoring
    /// ASCII case (RFC 9110 §11.1: an auth scheme is case-insensitive).
    case field(lowercasedName: String, prefix: [UInt8], suffix: [UInt8])
    /// The password of `Authorization: Basic` (`inject.basic_username`, RFC 7617 §2); the client's
    /// user-id is not looked at (the proxy's `basic_username` goes upstream).
    case basicPassword
    /// The first query parameter of this name, percent-decoded (`inject.query`).
    case query(name: String)
    /// The access key id in the `Credential=` of the client's own SigV4 `Authorization` (`type:
    /// aws`); its signature is not checked: the proxy signs again.
    case sigV4AccessKey

    /// What a request shows at the spot.
    enum Reading: Equatable {
        /// Nothing there: no such field (or parameter).
        case absent
        /// Something there that cannot hold a placeholder in the spot's form.
        case malformed
        /// The bytes that must equal a placeholder (a slice of what was read: no copy).
        case candidate(ArraySlice<UInt8>)
    }

    init(inject: InjectConfiguration?, signsRequests: Bool) {
        if signsRequests {
            self = .sigV4AccessKey
            return
        }
        switch inject?.placement ?? .header(name: InjectConfiguration.defaultFieldName, format: InjectConfiguration.defaultFormat) {
        case .header(let name, let format):
            // `{token}` is in every format (the loader checks it): what surrounds it is fixed text.
            let parts = format.components(separatedBy: InjectConfiguration.tokenMark)
            self = .field(lowercasedName: name.lowercased(), prefix: Array(parts[0].utf8), suffix: Array(parts.dropFirst().joined(separator: "").utf8))
        case .basic:
            self = .basicPassword
        case .query(let parameter):
            self = .query(name: parameter)
        }
    }

    /// Whether a request without anything at the spot is challenged (401 with `WWW-Authenticate:
    /// Basic`) rather than refused: clients such as git send Basic credentials only when asked.
    var challengesWhenAbsent: Bool { self == .basicPassword }

    /// What `head` (with its `query`, without `?`) shows at the spot.
    func read(_ head: borrowing RequestHead, query: String?) -> Reading {
        switch self {
        case .field(let name, let prefix, let suffix):
            guard let index = head.fields.firstIndex(name) else { return .absent }
            return Self.between(prefix, suffix, in: head.fields.valueBytes(index))
        case .basicPassword:
            guard let value = head.fields.first("authorization") else { return .absent }
            return Self.basicPassword(Array(value.utf8))
        case .query(let name):
            guard let query, let value = Self.firstParameter(name, in: query) else { return .absent }
            return .candidate(Array(value.utf8)[...])
        case .sigV4AccessKey:
            guard let value = head.fields.first("authorization") else { return .absent }
            return Self.sigV4AccessKey(Array(value.utf8))
        }
    }

    /// `value` (read in place: its indices are the field block's) without `prefix` (ASCII case
    /// ignored) and `suffix`.
    static func between(_ prefix: [UInt8], _ suffix: [UInt8], in value: ArraySlice<UInt8>) -> Reading {
        guard value.count > prefix.count + suffix.count else { return .malformed }
        let framed = value.withUnsafeBytes { v in
            prefix.withUnsafeBytes { p in
                suffix.withUnsafeBytes { s in
                    for i in 0..<p.count where asciiLower(v[i]) != asciiLower(p[i]) { return false }
                    for i in 0..<s.count where v[v.count - s.count + i] != s[i] { return false }
                    return true
                }
            }
        }
        guard framed else { return .malformed }
        return .candidate(value[(value.startIndex + prefix.count)..<(value.endIndex - suffix.count)])
    }

    /// RFC 7617 §2: `Basic base64(user-id ":" password)`; the password is what follows the first colon.
    static func basicPassword(_ value: [UInt8]) -> Reading {
        let scheme = Array("basic ".utf8)
        guard value.count > scheme.count, value[0..<scheme.count].map(asciiLower) == scheme else { return .malformed }
        let encoded = value[scheme.count...].drop { $0 == 0x20 }
        guard let decoded = Data(base64Encoded: Data(encoded)), let colon = decoded.firstIndex(of: UInt8(ascii: ":")) else { return .malformed }
        return .candidate(Array(decoded[(colon + 1)...])[...])
    }

    /// AWS SigV4: `AWS4-HMAC-SHA256 Credential=<key id>/<date>/<region>/<service>/aws4_request, …`.
    static func sigV4AccessKey(_ value: [UInt8]) -> Reading {
        let algorithm = Array("AWS4-HMAC-SHA256 ".utf8)
        guard value.starts(with: algorithm) else { return .malformed }
        let marker = Array("Credential=".utf8)
        var i = algorithm.count
        while i + marker.count <= value.count {
            if value[i..<(i + marker.count)].elementsEqual(marker) {
                let start = i + marker.count
                guard let slash = value[start...].firstIndex(of: UInt8(ascii: "/")), slash > start else { return .malformed }
                return .candidate(value[start..<slash])
            }
            i += 1
        }
        return .malformed
    }

    /// The first parameter named `name` in `query` (pairs split by `&` or `;`, as
    /// `InjectedQueryParameter` splits them: the one it replaces), percent-decoded; nil when absent.
    static func firstParameter(_ name: String, in query: String) -> String? {
        for pair in query.split(whereSeparator: { $0 == "&" || $0 == ";" }) {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            let rawName = parts[0]
            guard rawName == name || percentDecoded(rawName, plusIsSpace: true) == name else { continue }
            let rawValue = parts.count > 1 ? parts[1] : ""
            return percentDecoded(rawValue, plusIsSpace: true) ?? String(rawValue)
        }
        return nil
    }
}
