import Basics
import Synchronization

/// Every string that must never reach a log line passes through here.
///
/// Secrets are registered as soon as they are known (tokens, client secrets, proxy keys);
/// `redact(_:)` replaces each of them with `[REDACTED]`. Independently of the registry, anything
/// shaped like a bearer credential (`Bearer <value>`) or a JWT (`eyJ….….…`) is redacted too, so a
/// token that was never registered still does not leak.
public final class SecretRegistry: Sendable {
    /// The registry the log handler consults.
    public static let shared = SecretRegistry()

    /// The placeholder that replaces a secret.
    public static let placeholder = "[REDACTED]"

    /// Strings shorter than this are not registered: redacting "abc" everywhere would mangle logs
    /// without protecting anything worth protecting.
    public static let minimumLength = 6

    private let secrets = Mutex<[String]>([])

    public init() {}

    /// Remembers `secret` so that it is redacted from now on. Short strings are ignored.
    public func register(_ secret: String) {
        guard secret.utf8.count >= Self.minimumLength else { return }
        secrets.withLock { list in
            guard !list.contains(secret) else { return }
            list.append(secret)
            // Longest first, so a secret that contains another one is replaced whole.
            list.sort { $0.utf8.count > $1.utf8.count }
        }
    }

    /// Forgets every registered secret (tests only need this).
    public func removeAll() {
        secrets.withLock { $0.removeAll() }
    }

    /// Returns `s` with every registered secret, bearer credential and JWT replaced by `[REDACTED]`.
    public func redact(_ s: String) -> String {
        let list = secrets.withLock { $0 }
        var bytes = Array(s.utf8)
        var changed = false
        for secret in list {
            if Self.replaceAll(Array(secret.utf8), in: &bytes) { changed = true }
        }
        if Self.redactBearer(&bytes) { changed = true }
        if Self.redactJWTs(&bytes) { changed = true }
        return changed ? String(decoding: bytes, as: UTF8.self) : s
    }

    // MARK: - Byte-level scanning (no Foundation, no regex: this runs for every log line)

    private static let placeholderBytes = Array(placeholder.utf8)

    /// Where `find` saw a credential at a position: `bytes[start..<end]` becomes the placeholder and
    /// the bytes before `start` stay (the `Bearer ` of a bearer credential). `isNew` is false when the
    /// span already was the placeholder.
    private struct Found {
        var start: Int
        var end: Int
        var isNew = true
    }

    /// Rewrites `bytes` left to right, asking `find` at each position; true when a credential was
    /// replaced (`bytes` is left alone otherwise).
    private static func replacing(_ bytes: inout [UInt8], _ find: ([UInt8], Int) -> Found?) -> Bool {
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count)
        var i = 0
        var replaced = false
        while i < bytes.count {
            if let hit = find(bytes, i) {
                out.append(contentsOf: bytes[i..<hit.start])
                if hit.end > hit.start {
                    out.append(contentsOf: placeholderBytes)
                    if hit.isNew { replaced = true }
                }
                i = hit.end
            } else {
                out.append(bytes[i])
                i += 1
            }
        }
        if replaced { bytes = out }
        return replaced
    }

    private static func replaceAll(_ needle: [UInt8], in bytes: inout [UInt8]) -> Bool {
        guard let first = needle.first, bytes.count >= needle.count else { return false }
        return replacing(&bytes) { bytes, i in
            guard bytes[i] == first, i + needle.count <= bytes.count, bytes[i..<(i + needle.count)].elementsEqual(needle) else { return nil }
            return Found(start: i, end: i + needle.count)
        }
    }

    private static func isSpace(_ b: UInt8) -> Bool {
        b == 0x20 || b == 0x09 || b == 0x0A || b == 0x0D
    }

    private static func isBase64URL(_ b: UInt8) -> Bool {
        (b >= 0x41 && b <= 0x5A) || (b >= 0x61 && b <= 0x7A) || (b >= 0x30 && b <= 0x39) || b == 0x2D || b == 0x5F
    }

    private static let bearerWord = Array("bearer".utf8)

    /// `Bearer <non-space>` → `Bearer [REDACTED]` (case-insensitive scheme, RFC 6750 §2.1).
    private static func redactBearer(_ bytes: inout [UInt8]) -> Bool {
        replacing(&bytes) { bytes, i in
            let startsWord = i == 0 || !isBase64URL(bytes[i - 1])
            guard startsWord, i + bearerWord.count < bytes.count,
                (0..<bearerWord.count).allSatisfy({ asciiLower(bytes[i + $0]) == bearerWord[$0] }),
                bytes[i + bearerWord.count] == 0x20 || bytes[i + bearerWord.count] == 0x09
            else { return nil }
            var j = i + bearerWord.count
            while j < bytes.count, bytes[j] == 0x20 || bytes[j] == 0x09 { j += 1 }
            var k = j
            while k < bytes.count, !isSpace(bytes[k]), bytes[k] != 0x22, bytes[k] != 0x2C { k += 1 }
            return Found(start: j, end: k, isNew: !bytes[j..<k].elementsEqual(placeholderBytes))
        }
    }

    /// Three base64url parts separated by dots, the first starting with `eyJ` (`{"` encoded):
    /// the shape of a JWS compact serialization (RFC 7515 §7.1). The signature may be empty.
    private static func redactJWTs(_ bytes: inout [UInt8]) -> Bool {
        replacing(&bytes) { bytes, i in
            guard bytes[i] == 0x65, i + 3 <= bytes.count, bytes[i + 1] == 0x79, bytes[i + 2] == 0x4A,
                i == 0 || !isBase64URL(bytes[i - 1]),
                let end = jwtEnd(bytes, from: i)
            else { return nil }
            return Found(start: i, end: end)
        }
    }

    private static func jwtEnd(_ bytes: [UInt8], from start: Int) -> Int? {
        var i = start
        func run() -> Int {
            let s = i
            while i < bytes.count, isBase64URL(bytes[i]) { i += 1 }
            return i - s
        }
        guard run() >= 4, i < bytes.count, bytes[i] == 0x2E else { return nil }
        i += 1
        guard run() >= 1, i < bytes.count, bytes[i] == 0x2E else { return nil }
        i += 1
        _ = run()
        // A fourth dot-part would be a JWE or something else; redact it whole all the same.
        while i < bytes.count, bytes[i] == 0x2E, i + 1 < bytes.count, isBase64URL(bytes[i + 1]) {
            i += 1
            _ = run()
        }
        return i
    }
}
