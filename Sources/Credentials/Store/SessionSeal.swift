import Config
import Crypto
import FoundationEssentials

/// Stored sessions sealed at rest (`store.encryption_key_*`, docs/ARCHITECTURE.md "The store"):
/// AES-256-GCM (NIST SP 800-38D) over the whole session document, a random 96-bit nonce per seal,
/// the purpose as authenticated data, and beside the box the id of the key that sealed it (a digest,
/// never the key). The sealed document is JSON again, `{"sealed":{"box":…,"kid":…},"version":1}`,
/// so the file and Redis stores keep treating it as an opaque document. Pure: no I/O.
public struct SessionSeal: Sendable {
    struct Key: Sendable {
        let id: String
        let key: SymmetricKey
    }

    let current: Key
    let previous: [Key]
    /// Authenticated with every box: a box made for something else does not open as a session.
    static let purpose = Array("tokenproxy session v1".utf8)

    public init(_ encryption: StoreEncryption) {
        current = Key(id: Self.keyID(encryption.current), key: SymmetricKey(data: encryption.current))
        previous = encryption.previous.map { Key(id: Self.keyID($0), key: SymmetricKey(data: $0)) }
    }

    /// Names a key without revealing it: the first 8 bytes of SHA-256 over a label and the key, in hex.
    static func keyID(_ key: [UInt8]) -> String {
        let digest = SHA256.hash(data: Array("tokenproxy store key id".utf8) + key)
        return digest.prefix(8).map { byte in
            let hex = String(byte, radix: 16)
            return byte < 16 ? "0" + hex : hex
        }.joined()
    }

    public var currentKeyID: String { current.id }

    /// The session document sealed under the current key.
    func seal(_ document: [UInt8]) throws -> [UInt8] {
        let box = try AES.GCM.seal(document, using: current.key, authenticating: Self.purpose)
        guard let combined = box.combined else { throw TokenStoreError(description: "the session could not be sealed") }
        let sealed = SealedDocument(version: 1, sealed: .init(kid: current.id, box: Data(combined).base64EncodedString()))
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        return Array(try encoder.encode(sealed))
    }

    /// What a stored document is.
    enum Reading: Equatable {
        /// Not sealed: the document as it is (sealed at the next write).
        case plain([UInt8])
        /// Opened. `reseal`: a previous key opened it: the reader writes it back at once, sealed
        /// under the current key (CONTRACT.md).
        case opened([UInt8], reseal: Bool)
        /// Sealed under a key none of `keys` is (or, when it names one of them, that failed to open
        /// it: a damaged box). Never deleted or overwritten by the proxy.
        case unopenable(kid: String)
    }

    /// Opens `bytes` with `seal`'s keys (nil: no key configured, so any sealed document is unopenable).
    static func read(_ bytes: [UInt8], with seal: SessionSeal?) -> Reading {
        guard let sealed = try? JSONDecoder().decode(SealedDocument.self, from: Data(bytes)) else { return .plain(bytes) }
        let kid = sealed.sealed.kid
        guard let seal, let key = ([seal.current] + seal.previous).first(where: { $0.id == kid }),
            let combined = Data(base64Encoded: sealed.sealed.box),
            let box = try? AES.GCM.SealedBox(combined: combined),
            let document = try? AES.GCM.open(box, using: key.key, authenticating: Self.purpose)
        else { return .unopenable(kid: kid) }
        return .opened(Array(document), reseal: kid != seal.current.id)
    }

    /// The session document a store holds, opened when sealed, and whether it is to be sealed again
    /// at once (`Reading.opened`). A sealed one no key opens throws `loginRequired` naming its key
    /// id: the store leaves it where it is (not moved aside, not written back), as a key the
    /// operator has elsewhere may still open it.
    static func document(_ stored: [UInt8], with seal: SessionSeal?) throws -> (document: [UInt8], reseal: Bool) {
        switch read(stored, with: seal) {
        case .plain(let document): return (document, false)
        case .opened(let document, let reseal): return (document, reseal)
        case .unopenable(let kid): throw TokenSourceError.loginRequired(unopenableMessage(kid: kid))
        }
    }

    /// Why the route needs a login when the store holds a session no key opens.
    static func unopenableMessage(kid: String) -> String {
        "the stored session is sealed under key id \(kid), which no configured store.encryption_key opens: "
            + "configure that key (or list it in encryption_previous_keys_file), or run `tokenproxy login`"
    }

    private struct SealedDocument: Codable {
        struct Sealed: Codable {
            var kid: String
            var box: String
        }
        var version: Int
        var sealed: Sealed
    }
}
