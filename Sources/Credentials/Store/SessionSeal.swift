import Config
import Crypto
import FoundationEssentials

/// Stored sessions sealed at rest (`store.encryption_key_*`, docs/ARCHITECTURE.md "The store"):
/// AES-256-GCM (NIST SP 800-38D) over the whole session document, a random 96-bit nonce per seal,
/// the purpose, the route and the store key as authenticated data, and beside the box the id of the
/// key that sealed it (a digest, never the key). The sealed document is JSON again,
/// `{"sealed":{"box":…,"kid":…},"version":2}`, so the file and Redis stores keep treating it as an
/// opaque document. Pure: no I/O.
public struct SessionSeal: Sendable {
    struct Key: Sendable {
        let id: String
        let key: SymmetricKey
    }

    /// Where a sealed session belongs (CONTRACT.md "The fleet store in production"): a box opens only
    /// with the same binding, so a session copied into another route's place does not open there.
    public struct Binding: Sendable, Equatable {
        /// `StoreConfiguration.sessionRoute`: the route whose session the store keeps.
        public var route: String
        /// The Redis `store.key`, or the store file's name. The folder and the Redis server are left
        /// out, so that a store folder mounted elsewhere, a configuration reached through another
        /// path or a move to `rediss://` keeps its sessions; the route tells the stores apart.
        public var storeKey: String

        public init(route: String, storeKey: String) {
            self.route = route
            self.storeKey = storeKey
        }

        /// The binding of the sessions `store` keeps.
        public init(_ store: StoreConfiguration) {
            route = store.sessionRoute
            if let redis = store.redis {
                storeKey = redis.key
            } else {
                storeKey = store.path.lastIndex(of: "/").map { String(store.path[store.path.index(after: $0)...]) } ?? store.path
            }
        }
    }

    let current: Key
    let previous: [Key]
    let binding: Binding
    /// The authenticated data of every box this version seals: the purpose, the route and the store
    /// key, each ended by a NUL (none of them can hold one), so that no two bindings give the same bytes.
    let authenticatedData: [UInt8]
    /// The authenticated data of version 1, before the binding: such a box still opens (an upgrade
    /// keeps its sessions) and is sealed again with the binding at once.
    static let unboundPurpose = Array("tokenproxy session v1".utf8)
    static let boundVersion = 2

    public init(_ encryption: StoreEncryption, binding: Binding) {
        current = Key(id: Self.keyID(encryption.current), key: SymmetricKey(data: encryption.current))
        previous = encryption.previous.map { Key(id: Self.keyID($0), key: SymmetricKey(data: $0)) }
        self.binding = binding
        authenticatedData = Array("tokenproxy session v2".utf8) + [0] + Array(binding.route.utf8) + [0] + Array(binding.storeKey.utf8) + [0]
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

    /// The session document sealed under the current key, bound to `binding`.
    func seal(_ document: [UInt8]) throws -> [UInt8] {
        let box = try AES.GCM.seal(document, using: current.key, authenticating: authenticatedData)
        guard let combined = box.combined else { throw TokenStoreError(description: "the session could not be sealed") }
        let sealed = SealedDocument(version: Self.boundVersion, sealed: .init(kid: current.id, box: Data(combined).base64EncodedString()))
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        return Array(try encoder.encode(sealed))
    }

    /// What a stored document is.
    enum Reading: Equatable {
        /// Not sealed: the document as it is (sealed at the next write).
        case plain([UInt8])
        /// Opened. `reseal`: under a previous key, or in version 1 (without the binding): the
        /// reader writes it back at once, sealed under the current key with the binding (CONTRACT.md).
        case opened([UInt8], reseal: Bool)
        /// Never deleted or overwritten by the proxy. `keyKnown` false: sealed under a key none of
        /// the configured ones is. True: a configured key sealed it, but the box does not open with
        /// this store's binding (a session copied from another route's place) or is damaged.
        case unopenable(kid: String, keyKnown: Bool)
    }

    /// Opens `bytes` with `seal`'s keys and binding (nil: no key configured, so any sealed document
    /// is unopenable).
    static func read(_ bytes: [UInt8], with seal: SessionSeal?) -> Reading {
        guard let sealed = try? JSONDecoder().decode(SealedDocument.self, from: Data(bytes)) else { return .plain(bytes) }
        let kid = sealed.sealed.kid
        guard let seal, let key = ([seal.current] + seal.previous).first(where: { $0.id == kid }) else {
            return .unopenable(kid: kid, keyKnown: false)
        }
        let bound = sealed.version != 1
        guard let combined = Data(base64Encoded: sealed.sealed.box),
            let box = try? AES.GCM.SealedBox(combined: combined),
            let document = try? AES.GCM.open(box, using: key.key, authenticating: bound ? seal.authenticatedData : Self.unboundPurpose)
        else { return .unopenable(kid: kid, keyKnown: true) }
        return .opened(Array(document), reseal: !bound || kid != seal.current.id)
    }

    /// The session document a store holds, opened when sealed, and whether it is to be sealed again
    /// at once (`Reading.opened`). A sealed one no key opens throws `loginRequired` naming its key
    /// id: the store leaves it where it is (not moved aside, not written back), as a key the
    /// operator has elsewhere may still open it.
    static func document(_ stored: [UInt8], with seal: SessionSeal?) throws -> (document: [UInt8], reseal: Bool) {
        switch read(stored, with: seal) {
        case .plain(let document): return (document, false)
        case .opened(let document, let reseal): return (document, reseal)
        case .unopenable(let kid, let keyKnown):
            throw TokenSourceError.loginRequired(unopenableMessage(kid: kid, keyKnown: keyKnown, binding: seal?.binding))
        }
    }

    /// Why the route needs a login when the store holds a session no key opens.
    static func unopenableMessage(kid: String, keyKnown: Bool, binding: Binding?) -> String {
        guard keyKnown, let binding else {
            return "the stored session is sealed under key id \(kid), which no configured store.encryption_key opens: "
                + "configure that key (or list it in encryption_previous_keys_file), or run `tokenproxy login`"
        }
        return "the stored session is sealed under key id \(kid), but not for route \(binding.route) and store key \(binding.storeKey) "
            + "(a session copied from another route's store, or a damaged one): it does not open here; run `tokenproxy login`"
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
