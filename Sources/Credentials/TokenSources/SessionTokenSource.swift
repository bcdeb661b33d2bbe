import Config
import Foundation
import Logging

/// The token source of the types that log in and refresh (oauth2_refresh, cognito, json_refresh) and
/// of oauth2_client_credentials: an `IdentityProvider` for the calls, a `TokenStore` for the session
/// (ARCHITECTURE.md "The store"). The server's token thread and the CLI commands (`login`, `token`,
/// `status`, `logout`) all go through this one type, so there is one implementation of a refresh.
///
/// - `fetch` takes the store's exclusive lock and re-reads the store. When the stored access token is
///   not the one the caller meant to replace and is still valid (another process refreshed: a
///   `tokenproxy token`, another server), it is handed back without a call to the identity provider.
///   Otherwise the provider refreshes, and the new session (with the rotated refresh token, or the
///   old one when the answer carried none) is saved durably before the token is returned
///   (CONTRACT.md point 4).
/// - A refusal leaves a tombstone in the store (no tokens, `ended_reason`): the session ended, and a
///   seeded refresh token is not tried again after a restart. `inputChanged()` notices a new login
///   (or a logout) within a poll interval.
/// - A seeded refresh token (`refresh_token_env` / `_file`) is used only by the first fetch of a
///   process, and only when no store exists yet.
public final class SessionTokenSource: TokenSource {
    public let kind: String
    public let defaultLifetime: Double?
    public let pollInterval: Double? = 1

    public let provider: any IdentityProvider
    public let store: any TokenStore
    /// The store's counters; the refresh races (won, lost, fenced) are counted here.
    public let storeMetrics: StoreMetrics
    private let logger: Logger
    private let now: () -> Double
    private let refreshMargin: Double
    private var seed: String?
    /// Set by `inputChanged()`: the next fetch only reloads the store when it still holds the token.
    private var reloadRequested = false
    /// A session whose save failed: its refresh token may be the only valid one left (rotation).
    private var unsaved: StoredSession?
    /// The session this process last read from the store or wrote to it: what it writes back when
    /// the store loses the session without a logout (`LostSession`).
    private var held: StoredSession?
    private var loggedSkew = false

    public init(
        provider: any IdentityProvider,
        store: any TokenStore,
        storeMetrics: StoreMetrics? = nil,
        seedRefreshToken: String? = nil,
        defaultLifetime: Double?,
        refreshMargin: Double,
        logger: Logger,
        now: @escaping () -> Double = { Date().timeIntervalSince1970 }
    ) {
        self.kind = provider.kind
        self.provider = provider
        self.store = store
        self.storeMetrics = storeMetrics ?? StoreMetrics(backend: store is RedisTokenStore ? "redis" : "file")
        self.seed = seedRefreshToken.flatMap { $0.isEmpty ? nil : $0 }
        self.defaultLifetime = defaultLifetime
        self.refreshMargin = refreshMargin
        self.logger = logger
        self.now = now
        if let seed { registerSecret(seed) }
    }

    public func inputChanged() -> Bool {
        guard store.hasChanged() else { return false }
        reloadRequested = true
        return true
    }

    public func fetch(current: TokenSnapshot?) throws -> IssuedToken {
        let reloadOnly = reloadRequested
        reloadRequested = false
        return try withLock {
            try fetchLocked(current: current?.accessToken, reloadOnly: reloadOnly)
        }
    }

    private func fetchLocked(current: String?, reloadOnly: Bool) throws -> IssuedToken {
        var session = try loadSession()
        let now = now()
        if let stored = session, stored.kind != kind {
            // Written for another credentials type (the configuration changed): not this session.
            logger.warning("\(kind): the store holds a \(stored.kind) session; ignoring it")
            session = nil
        }
        if session != nil {
            seed = nil  // a store exists: the seed is never used again by this process
        } else {
            if let seed, !provider.fetchesWithoutSession {
                logger.info("\(kind): no store yet; refreshing with the seeded refresh token")
                session = StoredSession(kind: kind, refreshToken: seed)
            } else if !provider.fetchesWithoutSession {
                throw TokenSourceError.loginRequired("no session: run `tokenproxy login`")
            }
        }
        if let stored = session, !provider.fetchesWithoutSession, stored.accessToken == nil, stored.refreshToken == nil {
            throw TokenSourceError.loginRequired(Self.endedMessage(stored))
        }
        if let stored = session, let token = stored.accessToken, let issued = reusable(stored, token: token, now: now) {
            // Someone else refreshed (or this is the first look), or the store changed and still holds
            // the token in use: no call to the identity provider.
            if token != current || reloadOnly {
                // Held the lock for a refresh, and another process had already made it.
                if current != nil && !reloadOnly { storeMetrics.race(.lost) }
                var reused = issued
                reused.fromStore = true
                return reused
            }
        }
        if !provider.fetchesWithoutSession, session?.refreshToken == nil {
            throw TokenSourceError.loginRequired("the stored session has no refresh token and its access token expired: run `tokenproxy login`")
        }
        return try refreshLocked(session, now: now)
    }

    /// The stored token as an answer, when it is still valid.
    private func reusable(_ stored: StoredSession, token: String, now: Double) -> IssuedToken? {
        let issued = bound(Self.issued(from: stored, now: now), stored)
        guard let expiresAt = TokenExpiry.resolve(issued, now: now, defaultLifetime: defaultLifetime) else { return issued }
        return expiresAt > now + 1 ? issued : nil
    }

    private func refreshLocked(_ session: StoredSession?, now: Double) throws -> IssuedToken {
        let issued: IssuedToken
        do {
            issued = try provider.refresh(session)
        } catch let error as TokenSourceError {
            switch error {
            case .refused(let reason) where provider.fetchesWithoutSession:
                // No session to end (CONTRACT.md point 5): a passing failure.
                throw TokenSourceError.passing(reason)
            case .refused(let reason):
                var tombstone = StoredSession(kind: kind, subject: session?.subject, lastRefreshAt: now, lastRefreshOutcome: "refused")
                tombstone.endedReason = reason
                do {
                    try store.save(tombstone)
                    held = tombstone
                } catch let error as TokenStoreError where error.fenced {
                    // A stalled refresh whose token another process already replaced: the session
                    // in the store is newer than the refused token, and stays.
                    storeMetrics.race(.fenced)
                    throw TokenSourceError.passing("\(kind): the refresh was refused, but the store holds a newer session (\(error.description))")
                } catch {
                    logger.error("\(kind): cannot clear the store after the refusal: \(error)")
                }
                unsaved = nil
                seed = nil
                throw error
            default:
                throw error
            }
        }
        let saved: StoredSession
        do {
            saved = try save(issued, previous: session, outcome: "success", now: now)
        } catch let error as TokenStoreError where error.fenced {
            // The lease ran out during the call and the session moved on (issue 13: a stalled holder
            // must not overwrite a newer session). Use what the store holds now.
            storeMetrics.race(.fenced)
            logger.warning("\(kind): the refreshed session was not stored: \(error.description); using the stored one")
            if let stored = try loadSession(), stored.kind == kind, let token = stored.accessToken,
                var newer = reusable(stored, token: token, now: now)
            {
                newer.fromStore = true
                return newer
            }
            throw TokenSourceError.passing("\(kind): \(error.description)")
        }
        storeMetrics.race(.won)
        seed = nil
        return bound(Self.issued(from: saved, now: now), saved)
    }

    /// A stored DPoP-bound token gets its key back (RFC 9449: it is useless without it).
    private func bound(_ issued: IssuedToken, _ stored: StoredSession) -> IssuedToken {
        guard stored.tokenType == "DPoP" else { return issued }
        var issued = issued
        issued.dpop = provider.dpopProver(for: stored)
        return issued
    }

    /// Builds the session for a new token set and saves it durably; on a failed save the session is
    /// kept in memory (its refresh token may be the only valid one) and the token is not used.
    @discardableResult
    private func save(_ issued: IssuedToken, previous: StoredSession?, outcome: String, now: Double) throws -> StoredSession {
        registerSecret(issued.accessToken)
        if let refreshToken = issued.refreshToken { registerSecret(refreshToken) }
        var session = StoredSession(kind: kind)
        session.accessToken = issued.accessToken
        session.refreshToken = issued.refreshToken ?? previous?.refreshToken
        let skew = TokenExpiry.clockSkew(issued, now: now)
        if let skew {
            session.clockSkew = skew
            if !loggedSkew {
                loggedSkew = true
                logger.warning("\(kind): the identity provider's clock differs from ours by \(Int(skew.rounded())) s; correcting expiry times")
            }
        }
        session.expiresAt = TokenExpiry.resolve(issued, now: now, defaultLifetime: defaultLifetime)
        session.issuedAt = now
        let claims = JWT.claims(of: issued.accessToken)
        session.subject = claims?.subject ?? issued.username ?? claims?.username ?? previous?.subject
        session.username = issued.username ?? previous?.username
        session.deviceKey = issued.deviceKey ?? previous?.deviceKey
        session.identityID = issued.identityID ?? previous?.identityID
        session.lastRefreshAt = now
        session.lastRefreshOutcome = outcome
        session.tokenType = issued.dpop == nil ? nil : "DPoP"
        session.dpopKey = issued.dpop?.storedPEM ?? previous?.dpopKey
        do {
            try store.save(session)
            unsaved = nil
            held = session
        } catch let error as TokenStoreError where error.fenced {
            unsaved = nil
            throw error
        } catch {
            unsaved = session
            throw TokenSourceError.passing("\(kind): the new token set cannot be saved (\(error)); not using it until it is")
        }
        return session
    }

    /// The store's session, or the one whose save failed, saved now.
    private func loadSession() throws -> StoredSession? {
        if let pending = unsaved {
            do {
                try store.save(pending)
                self.unsaved = nil
                held = pending
                logger.info("\(kind): the store is written again")
                return pending
            } catch let error as TokenStoreError where error.fenced {
                // Another process wrote a newer session meanwhile (ours is stale: the read below
                // takes theirs), or the store lost the session meanwhile (a Redis restarted
                // without persistence): then ours, the newest this process has, is the one to
                // write back.
                self.unsaved = nil
                held = pending
                storeMetrics.race(.fenced)
                logger.warning("\(kind): the session kept while the store was unavailable was not written (\(error.description)); reading the store")
            } catch {
                throw TokenSourceError.passing("\(kind): the store cannot be written: \(error)")
            }
        }
        do {
            switch try store.read() {
            case .session(let session):
                held = session
                if store.lastReadNeedsReseal { reseal(session) }
                return session
            case .noSession:
                held = nil
                return nil
            case .lost(let why):
                return try writeBack(why: why)
            }
        } catch let error as TokenSourceError {
            throw error
        } catch {
            throw TokenSourceError.passing("\(kind): \(error)")
        }
    }

    /// Writes back, under the lock, a session the store opened with a previous key or found sealed
    /// before its route binding: sealed under the current key at once (CONTRACT.md "The fleet store
    /// in production"), so that an operator who drops the old key later loses no session. A failed
    /// write is logged; the next read of the store tries again.
    private func reseal(_ session: StoredSession) {
        do {
            try store.save(session)
            logger.info("\(kind): the stored session was sealed under a previous key or without its route; sealed again under the current key")
        } catch {
            logger.warning("\(kind): the stored session could not be sealed again under the current key (\(error)); trying again at the next read")
        }
    }

    /// The store lost the session without a logout (a Redis restarted without persistence, a key
    /// overwritten): the session this process holds goes back (under the lock, fenced), so that the
    /// fleet keeps serving instead of answering `login_required`.
    private func writeBack(why: String) throws -> StoredSession? {
        switch LostSession.decide(held: held, kind: kind, now: now()) {
        case .serveAsWithout:
            logger.error("\(kind): \(why); holding no session to write back, serving as with no session")
            return nil
        case .writeBack(let session):
            do {
                try store.restore(session)
            } catch let error as TokenStoreError where error.fenced {
                // Another process wrote (its own write-back, a login, a logout) since the read.
                logger.info("\(kind): \(why), but another process wrote the store meanwhile; reading it again")
                switch try store.read() {
                case .session(let session):
                    held = session
                    return session
                case .noSession, .lost:
                    held = nil
                    return nil
                }
            }
            logger.warning("\(kind): \(why); no logout was recorded, so this process wrote its session back and goes on with it")
            return session
        }
    }

    private func withLock<T>(_ body: () throws -> T) throws -> T {
        do {
            return try store.withExclusiveLock(body)
        } catch let error as TokenSourceError {
            throw error
        } catch {
            throw TokenSourceError.passing("\(kind): \(error)")
        }
    }

    static func issued(from stored: StoredSession, now: Double) -> IssuedToken {
        var issued = IssuedToken(accessToken: stored.accessToken ?? "", expiresAt: stored.expiresAt, issuedAt: stored.issuedAt)
        if let skew = stored.clockSkew, skew.isFinite { issued.serverDate = now + skew }
        issued.username = stored.username
        return issued
    }

    static func endedMessage(_ stored: StoredSession) -> String {
        if let reason = stored.endedReason { return "the session ended (\(reason)): run `tokenproxy login`" }
        return "no session: run `tokenproxy login`"
    }

    // MARK: - The commands

    /// `tokenproxy login`: a first token set from the provider, saved to the store. The session
    /// returned names the person who logged in as its `subject`, when the answer said who.
    public func login(_ input: LoginInput, prompt: @escaping (String) -> Void) throws -> StoredSession {
        let issued = try provider.login(input, prompt: prompt)
        return try withLock {
            let now = now()
            do {
                var saved = try save(issued, previous: nil, outcome: "login", now: now)
                if let person = issued.person { saved.subject = person }
                return saved
            } catch let error as TokenStoreError {
                unsaved = nil
                throw TokenSourceError.passing(error.description)
            } catch {
                unsaved = nil
                throw error
            }
        }
    }

    /// `tokenproxy token`: a token valid for longer than its refresh lead, refreshed first when
    /// needed, with the same lock and re-read as the server's refresh (so beside a running server
    /// there is one refresh between them).
    public func validToken() throws -> String {
        let first = try fetch(current: nil)
        let now = now()
        let expiresAt = TokenExpiry.resolve(first, now: now, defaultLifetime: defaultLifetime)
        guard let expiresAt else { return first.accessToken }
        let issuedAt = first.issuedAt ?? now
        let lead = RefreshPolicy(refreshMargin: refreshMargin).lead(lifetime: expiresAt - issuedAt)
        if expiresAt - now > lead { return first.accessToken }
        let snapshot = TokenSnapshot(accessToken: first.accessToken, expiresAt: expiresAt, issuedAt: issuedAt, generation: 1)
        do {
            return try fetch(current: snapshot).accessToken
        } catch let error as TokenSourceError {
            if case .passing(let reason, _) = error, expiresAt > now + 1 {
                logger.warning("\(kind): the refresh failed (\(reason)); printing the still valid token")
                return first.accessToken
            }
            throw error
        }
    }

    /// `tokenproxy logout`: revokes the refresh token where the provider can, then removes the store.
    /// Returns a warning when the revocation failed (the store is removed anyway).
    public func logout() throws -> String? {
        try withLock {
            let session = try? store.load()
            var warning: String? = nil
            if let refreshToken = session?.refreshToken {
                do {
                    try provider.revoke(refreshToken: refreshToken)
                } catch {
                    warning = "the refresh token was not revoked: \((error as? TokenSourceError)?.reason ?? "\(type(of: error))")"
                }
            }
            do {
                try store.remove()
                held = nil
            } catch {
                throw TokenSourceError.passing("\(error)")
            }
            return warning
        }
    }

    /// `tokenproxy status`: the store's state, without secrets.
    public func status() throws -> SessionStatus {
        let stored: StoredSession?
        do {
            stored = try store.load()
        } catch {
            throw TokenSourceError.passing("\(error)")
        }
        let now = now()
        var status = SessionStatus(kind: kind)
        status.needsLogin = !provider.fetchesWithoutSession
        guard let stored else { return status }
        status.subject = stored.subject
        status.issuedAt = stored.issuedAt
        status.lastRefreshAt = stored.lastRefreshAt
        status.lastRefreshOutcome = stored.lastRefreshOutcome
        status.endedReason = stored.endedReason
        if stored.accessToken != nil { status.refreshable = stored.refreshToken != nil || provider.fetchesWithoutSession }
        if let token = stored.accessToken {
            status.expiresAt = TokenExpiry.resolve(Self.issued(from: stored, now: now), now: now, defaultLifetime: defaultLifetime)
            _ = token
        }
        if stored.accessToken == nil && stored.refreshToken == nil {
            status.session = stored.endedReason != nil ? .ended : .none
        } else if stored.refreshToken != nil || provider.fetchesWithoutSession {
            status.session = .active
        } else if let expiresAt = status.expiresAt, expiresAt <= now {
            status.session = .none  // an access token alone that expired: nothing left to refresh
        } else {
            status.session = .active
        }
        return status
    }
}

/// What `tokenproxy status` prints.
public struct SessionStatus: Sendable, Equatable {
    public var kind: String
    public var session: SessionState = .none
    public var subject: String?
    public var issuedAt: Double?
    public var expiresAt: Double?
    public var lastRefreshAt: Double?
    public var lastRefreshOutcome: String?
    public var endedReason: String?
    /// Whether the session can be refreshed (a login without a refresh token ends at expiry).
    public var refreshable: Bool?
    /// A session starts with a person's login (`tokenproxy login`); the other types fetch a token
    /// by themselves, so having none yet needs nobody to log in.
    public var needsLogin = true

    public init(kind: String) { self.kind = kind }

    /// `status`'s `session` (CONTRACT "Signals, admin, logs"): `active`, `ended`, `none` only when a
    /// login is needed, else `not needed`.
    public var sessionText: String { session == .none && !needsLogin ? Self.notNeeded : session.rawValue }
    public static let notNeeded = "not needed"

    /// The route can serve without anyone logging in: `status` exits 0.
    public var isUsable: Bool { session == .active || sessionText == Self.notNeeded }
}

/// What a process does when the store lost the session without a logout (pure; unit-tested in
/// RedisStoreDecisionTests). A logout leaves a record (`StoreReading.noSession`), so it never comes here.
enum LostSession: Equatable {
    /// Write this session back and go on with it.
    case writeBack(StoredSession)
    /// Nothing worth writing back: serve as with no session (a login is needed).
    case serveAsWithout

    /// `held`: the session this process last read or wrote. Worth writing back when it is of this
    /// credentials type, did not end, and can still be used: a refresh token, or an access token
    /// that has not expired.
    static func decide(held: StoredSession?, kind: String, now: Double) -> LostSession {
        guard let held, held.kind == kind, held.endedReason == nil else { return .serveAsWithout }
        if held.refreshToken != nil { return .writeBack(held) }
        guard held.accessToken != nil else { return .serveAsWithout }
        if let expiresAt = held.expiresAt, expiresAt <= now { return .serveAsWithout }
        return .writeBack(held)
    }
}
