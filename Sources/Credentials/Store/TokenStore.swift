import Foundation
import Logging
import Sockets

/// One session as the store keeps it (ARCHITECTURE.md "The store"). It holds secrets, so it lives
/// in a 0600 file (or, later, behind a shared server).
public struct StoredSession: Codable, Sendable, Equatable {
    public var version: Int
    /// The credentials type that wrote it ("oauth2_refresh", "cognito", …).
    public var kind: String
    public var accessToken: String?
    public var refreshToken: String?
    /// Seconds since the epoch.
    public var expiresAt: Double?
    public var issuedAt: Double?
    /// The token's subject (`sub`) or user name, for `status`.
    public var subject: String?
    public var lastRefreshAt: Double?
    public var lastRefreshOutcome: String?
    /// Cognito: the pool's own user name, for SECRET_HASH on refresh (CONTRACT: it differs from the
    /// login name when users sign in by e-mail).
    public var username: String?
    /// Set when a refresh was refused and the tokens were cleared: why the session ended.
    public var endedReason: String?
    /// The identity provider's clock minus ours (seconds) when the token was issued, kept when it was
    /// more than 5 s, so that a reloaded JWT's `exp` is corrected as the fresh one was.
    public var clockSkew: Double?
    /// Cognito with device tracking: the device key that every REFRESH_TOKEN_AUTH carries.
    public var deviceKey: String?
    /// "DPoP" when the access token is bound to the DPoP key (RFC 9449 §5); nil: Bearer.
    public var tokenType: String?
    /// The DPoP key (EC P-256, PEM) made at the first token request when `dpop.key_file` is not
    /// set: kept so that a restart and every proxy of a fleet prove possession of the same key.
    public var dpopKey: String?
    /// Cognito identity pools: the identity id GetId answered, so a restart does not ask again.
    public var identityID: String?

    public init(
        kind: String,
        accessToken: String? = nil,
        refreshToken: String? = nil,
        expiresAt: Double? = nil,
        issuedAt: Double? = nil,
        subject: String? = nil,
        lastRefreshAt: Double? = nil,
        lastRefreshOutcome: String? = nil
    ) {
        self.version = 1
        self.kind = kind
        self.accessToken = accessToken
        self.refreshToken = refreshToken
        self.expiresAt = expiresAt
        self.issuedAt = issuedAt
        self.subject = subject
        self.lastRefreshAt = lastRefreshAt
        self.lastRefreshOutcome = lastRefreshOutcome
    }

    enum CodingKeys: String, CodingKey {
        case version, kind, subject
        case accessToken = "access_token"
        case refreshToken = "refresh_token"
        case expiresAt = "expires_at"
        case issuedAt = "issued_at"
        case lastRefreshAt = "last_refresh_at"
        case lastRefreshOutcome = "last_refresh_outcome"
        case username
        case endedReason = "ended_reason"
        case clockSkew = "clock_skew"
        case deviceKey = "device_key"
        case tokenType = "token_type"
        case dpopKey = "dpop_key"
        case identityID = "identity_id"
    }
}

/// Where sessions persist, shared between the processes that use the same configuration
/// (`serve`, `token`, `login`, `logout`). A protocol so that a store on a shared server (Redis) is an
/// added type, not a rewrite. Its methods block; call them on the token thread or in a command.
public protocol TokenStore: AnyObject {
    /// The stored session; nil when there is none (never logged in, logged out, or unreadable: an
    /// unreadable one is moved aside and logged).
    func load() throws -> StoredSession?
    /// Durable when it returns.
    func save(_ session: StoredSession) throws
    /// Deletes the session, durably.
    func remove() throws
    /// Runs `body` holding the store's exclusive cross-process lock (a refresh re-reads the store
    /// under it and refreshes only if the stored token is still the one it meant to replace).
    func withExclusiveLock<T>(_ body: () throws -> T) throws -> T
    /// True when the stored session changed since this process last loaded, saved or removed it.
    func hasChanged() -> Bool
    /// What the store holds, telling a session that ended from one the store lost.
    func read() throws -> StoreReading
    /// Writes `session` back after `read()` said `.lost`, fenced like `save`.
    func restore(_ session: StoredSession) throws
    /// True when the session the last read returned was sealed under a previous key or before its
    /// route binding (`SessionSeal`): the reader, holding the lock, writes it back with `save` at once.
    var lastReadNeedsReseal: Bool { get }
}

/// What a store held when it was read.
public enum StoreReading: Sendable, Equatable {
    /// A session document (a tombstone too: no tokens, `ended_reason`).
    case session(StoredSession)
    /// No session: never written, or a logout recorded.
    case noSession
    /// The session is gone or unreadable and no logout was recorded (a Redis restarted without
    /// persistence, a key overwritten): a process that holds the session writes it back.
    case lost(String)
}

extension TokenStore {
    /// The file store knows no lost session: a missing file is a logout (or no login yet), and an
    /// unreadable one is moved aside (CONTRACT.md).
    public func read() throws -> StoreReading {
        try load().map { .session($0) } ?? .noSession
    }

    public func restore(_ session: StoredSession) throws {
        try save(session)
    }

    /// A store that seals nothing never has a session to seal again.
    public var lastReadNeedsReseal: Bool { false }
}

public struct TokenStoreError: Error, Sendable, CustomStringConvertible {
    public var description: String
    /// A fenced write refused (`RedisTokenStore`): another process wrote a newer session or holds
    /// the lease, so this one must not overwrite it.
    public var fenced = false
}

/// `store.path`: a JSON document, mode 0600, in a folder created 0700 (an existing folder keeps its
/// mode, with a warning when others may write to it), replaced atomically (temp + fsync + rename +
/// fsync of the folder). The lock is `flock` on `<path>.lock`.
public final class FileTokenStore: TokenStore {
    public let path: String
    private let logger: Logger
    private let now: () -> Double
    private var knownSignature: FileSignature?
    private var checkedFolder = false
    /// Seals every session written, opens sealed ones read (`store.encryption_key_*`).
    private let seal: SessionSeal?
    public private(set) var lastReadNeedsReseal = false
    static let sizeLimit = 1 << 20

    public init(path: String, logger: Logger, seal: SessionSeal? = nil, now: @escaping () -> Double = { Date().timeIntervalSince1970 }) {
        self.path = path
        self.logger = logger
        self.seal = seal
        self.now = now
        self.knownSignature = FileSignature.of(path)
    }

    public func load() throws -> StoredSession? {
        lastReadNeedsReseal = false
        let signature = FileSignature.of(path)
        knownSignature = signature
        guard signature != nil else { return nil }
        let bytes: [UInt8]
        switch SmallFile.read(path, limit: Self.sizeLimit) {
        case .success(let content):
            bytes = content
        case .failure(let failure):
            if failure.code == nil {
                moveAside(reason: failure.description)
                return nil
            }
            if failure.isMissing {
                knownSignature = nil
                return nil
            }
            throw TokenStoreError(description: "store \(path): \(failure.description)")
        }
        let (document, reseal) = try SessionSeal.document(bytes, with: seal)
        guard let session = try? JSONDecoder().decode(StoredSession.self, from: Data(document)), session.version == 1 else {
            moveAside(reason: "not a session document this version can read")
            return nil
        }
        lastReadNeedsReseal = reseal
        if let token = session.accessToken { registerSecret(token) }
        if let token = session.refreshToken { registerSecret(token) }
        return session
    }

    public func save(_ session: StoredSession) throws {
        try prepareFolder()
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        let data: Data
        do {
            data = try encoder.encode(session)
        } catch {
            throw TokenStoreError(description: "store \(path): cannot encode the session")
        }
        var document = Array(data)
        if let seal { document = try seal.seal(document) }
        do {
            try AtomicFile.write(document + [0x0A], to: path, mode: 0o600)
        } catch {
            throw TokenStoreError(description: "store \(String(describing: error))")
        }
        knownSignature = FileSignature.of(path)
        lastReadNeedsReseal = false
    }

    public func remove() throws {
        do {
            try AtomicFile.remove(path)
        } catch {
            throw TokenStoreError(description: "store \(String(describing: error))")
        }
        knownSignature = nil
    }

    public func withExclusiveLock<T>(_ body: () throws -> T) throws -> T {
        try prepareFolder()
        let lockPath = path + ".lock"
        do {
            return try FileLock.withExclusiveLock(lockPath, body)
        } catch let error as SocketError {
            throw TokenStoreError(description: "store lock \(lockPath): \(Syscall.describe(errno: error.errno))")
        }
    }

    public func hasChanged() -> Bool {
        FileSignature.of(path) != knownSignature
    }

    private func prepareFolder() throws {
        guard !checkedFolder else { return }
        let folder = AtomicFile.parentFolder(of: path)
        if let mode = FileKind.mode(of: folder) {
            if mode & 0o022 != 0 {
                logger.warning("store folder \(folder) may be written by other users (mode \(String(mode & 0o777, radix: 8)))")
            }
        } else {
            do {
                try AtomicFile.ensureFolder(folder, mode: 0o700)
            } catch {
                throw TokenStoreError(description: "store \(String(describing: error))")
            }
        }
        checkedFolder = true
    }

    /// CONTRACT.md: a store that cannot be read or parsed is moved to `<path>.corrupt-<time>`.
    private func moveAside(reason: String) {
        let target = "\(path).corrupt-\(Int(now()))"
        if let failure = AtomicFile.move(path, to: target) {
            logger.error("store \(path) cannot be read (\(reason)) nor moved aside: \(failure)")
        } else {
            logger.warning("store \(path) cannot be read (\(reason)); moved to \(target); serving as with no session")
        }
        knownSignature = FileSignature.of(path)
    }
}
