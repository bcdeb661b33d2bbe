import Basics
import Sockets

/// A blocking Redis client for one primary: one command connection kept alive, every new connection
/// authenticated (`AUTH [user] password`) and on the configured database; with sentinels, the
/// primary found and followed through failovers (Redis Sentinel's client protocol); replica waits
/// and scripts. It knows nothing of what its keys hold. Used by one thread at a time.
package final class RedisClient {
    package let configuration: RedisClientConfiguration

    private var connection: RedisConnection?
    private var lastUsed: Double = 0
    /// With sentinels: a sentinel's `+switch-master` channel, so that a failover that leaves the old
    /// primary running (demoted to a replica, still answering reads) is followed at once.
    private var sentinelWatch: RedisConnection?
    private var nextSentinelWatchAttempt: Double = 0
    private var sentinelWatchBackoff = 1.0

    package init(configuration: RedisClientConfiguration) {
        self.configuration = configuration
    }

    /// Sends one command on the command connection and returns its reply. An error reply comes back
    /// as `.error`; one that says the server is no longer the primary (`-READONLY`, `-MASTERDOWN`)
    /// also drops the connection, so the next command asks the sentinels again. A failure to reach
    /// the server drops the connection too (the next command reconnects) and throws.
    package func command(_ arguments: [String]) throws(RedisConnectionError) -> RedisValue {
        let live = try liveConnection()
        let reply: RedisValue
        do {
            reply = try live.command(arguments)
        } catch {
            connection = nil
            throw error
        }
        lastUsed = Self.monotonic()
        if reply.errorKind == .readOnly || reply.errorKind == .masterDown { connection = nil }
        return reply
    }

    /// Runs `script` (EVAL: Redis runs a script atomically, so its reads and writes cannot
    /// interleave with another client's commands).
    package func run(_ script: RedisScript, keys: [String], arguments: [String]) throws(RedisConnectionError) -> RedisValue {
        try command(["EVAL", script.source, String(keys.count)] + keys + arguments)
    }

    /// Forgets the command connection: the next command makes a new one.
    package func disconnect() {
        connection = nil
    }

    /// Waits at most `milliseconds` until `replicas` replicas have every write made on the command
    /// connection (`WAIT`, Redis docs). The number that confirmed; nil when there is no command
    /// connection to ask about, or the wait failed (the connection is then dropped).
    package func waitForReplicas(_ replicas: Int, milliseconds: Int) -> Int64? {
        guard let connection else { return nil }
        do {
            return try connection.command(["WAIT", String(replicas), String(milliseconds)]).integer ?? 0
        } catch {
            self.connection = nil
            return nil
        }
    }

    /// The command connection; one idle for more than a second is checked with PING first (Redis may
    /// have restarted since), so a command never fails on a connection that died while idle.
    private func liveConnection() throws(RedisConnectionError) -> RedisConnection {
        if let connection {
            if Self.monotonic() - lastUsed < 1 { return connection }
            if (try? connection.command(["PING"])) == .status("PONG") { return connection }
            self.connection = nil
        }
        let fresh = try connect()
        connection = fresh
        return fresh
    }

    /// A new connection to the primary, authenticated and on the configured database (a
    /// subscription takes one of its own: a subscribed connection takes no other command).
    package func connect() throws(RedisConnectionError) -> RedisConnection {
        let (host, port) = try primaryAddress() ?? (configuration.host, configuration.port)
        let connection = try RedisConnection(
            host: host, port: port, connectTimeout: configuration.connectTimeout, commandTimeout: configuration.commandTimeout,
            tls: configuration.tls)
        if let password = configuration.password {
            let arguments = ["AUTH"] + (configuration.user.map { [$0] } ?? []) + [password]
            if case .error(let message) = try connection.command(arguments) {
                throw RedisConnectionError(description: "redis \(connection.endpoint): AUTH refused: \(message)")
            }
        } else if let user = configuration.user {
            // An ACL user without a password (`nopass`): AUTH still names it.
            if case .error(let message) = try connection.command(["AUTH", user, ""]) {
                throw RedisConnectionError(description: "redis \(connection.endpoint): AUTH \(user) refused: \(message)")
            }
        }
        if configuration.database != 0, case .error(let message) = try connection.command(["SELECT", String(configuration.database)]) {
            throw RedisConnectionError(description: "redis \(connection.endpoint): SELECT \(configuration.database) refused: \(message)")
        }
        // A sentinel's answer may lag a failover: the server itself must say it is the primary.
        if configuration.sentinels != nil {
            guard case .array(let role) = try connection.command(["ROLE"]), role.first?.text == "master" else {
                throw RedisConnectionError(description: "redis \(connection.endpoint) is not the primary (yet): asking the sentinels again")
            }
        }
        return connection
    }

    // MARK: - Sentinel

    /// What following the sentinels saw (`followFailovers`).
    package enum FailoverEvent: Equatable, Sendable {
        /// The sentinels moved the primary to `primary` (`host:port`).
        case moved(primary: String)
        /// The subscription on the sentinel `sentinel` ended; it is made again.
        case watchEnded(sentinel: String, why: String)
    }

    /// Reads the sentinels' `+switch-master` subscription without waiting. When the primary moved,
    /// the command connection is dropped, so the next command goes to the new primary through
    /// `connect()`. When no sentinel takes the subscription it is tried again with backoff (2 s up to
    /// 30 s); meanwhile a lost connection, `-READONLY` and `-MASTERDOWN` still lead to the new primary.
    /// `now` is the monotonic clock's. Nothing without sentinels.
    package func followFailovers(now: Double) -> [FailoverEvent] {
        guard let sentinels = configuration.sentinels else { return [] }
        if sentinelWatch == nil, now >= nextSentinelWatchAttempt {
            // Backing off: the caller waits here, up to connect_timeout per sentinel.
            sentinelWatch = try? subscribeToFailovers(sentinels)
            sentinelWatchBackoff = sentinelWatch == nil ? min(sentinelWatchBackoff * 2, 30) : 1
            nextSentinelWatchAttempt = now + sentinelWatchBackoff
        }
        guard let watch = sentinelWatch else { return [] }
        var events: [FailoverEvent] = []
        do {
            for message in try watch.pendingReplies() {
                guard let primary = RedisSentinels.switchedPrimary(message, master: sentinels.master) else { continue }
                events.append(.moved(primary: primary))
            }
        } catch {
            events.append(.watchEnded(sentinel: watch.endpoint, why: error.description))
            sentinelWatch = nil
        }
        if events.contains(where: { if case .moved = $0 { true } else { false } }) { connection = nil }
        return events
    }

    /// A subscription to `+switch-master` on the first sentinel that takes it.
    private func subscribeToFailovers(_ sentinels: RedisSentinels) throws(RedisConnectionError) -> RedisConnection {
        var failures: [String] = []
        for address in sentinels.addresses {
            do {
                let watch = try sentinelConnection(address, sentinels)
                guard case .array = try watch.command(["SUBSCRIBE", "+switch-master"]) else {
                    failures.append("\(watch.endpoint): SUBSCRIBE +switch-master refused")
                    continue
                }
                return watch
            } catch {
                failures.append(error.description)
            }
        }
        throw RedisConnectionError(description: "no sentinel took the +switch-master subscription: \(failures.joined(separator: "; "))")
    }

    /// With sentinels, the primary's address as they name it, asked of each in turn (Redis
    /// Sentinel's client protocol: `SENTINEL get-master-addr-by-name`); nil without sentinels. Every
    /// new connection asks again, so a failover (a lost connection, `-READONLY`, `-MASTERDOWN`) is
    /// followed at the next command.
    private func primaryAddress() throws(RedisConnectionError) -> (String, Int)? {
        guard let sentinels = configuration.sentinels else { return nil }
        var failures: [String] = []
        for address in sentinels.addresses {
            do {
                let asked = try sentinelConnection(address, sentinels)
                let reply = try asked.command(["SENTINEL", "get-master-addr-by-name", sentinels.master])
                if case .array(let parts) = reply, parts.count == 2, let host = parts[0].text, let port = parts[1].text.flatMap({ Int($0) }) {
                    return (host, port)
                }
                failures.append("\(asked.endpoint): no primary named \(sentinels.master)")
            } catch {
                failures.append(error.description)
            }
        }
        throw RedisConnectionError(description: "no sentinel named the primary \(sentinels.master): \(failures.joined(separator: "; "))")
    }

    /// A connection to one sentinel (with the primary's TLS settings), authenticated with the
    /// sentinels' own password when there is one.
    private func sentinelConnection(_ address: Authority, _ sentinels: RedisSentinels) throws(RedisConnectionError) -> RedisConnection {
        let connection = try RedisConnection(
            host: address.host, port: address.port, connectTimeout: configuration.connectTimeout,
            commandTimeout: configuration.commandTimeout, tls: configuration.tls)
        if let password = sentinels.password, case .error(let message) = try connection.command(["AUTH", password]) {
            throw RedisConnectionError(description: "redis sentinel \(connection.endpoint): AUTH refused: \(message)")
        }
        return connection
    }

    static func monotonic() -> Double { EventLoop.monotonicNow() }
}

/// A Lua script the server runs atomically (`RedisClient.run`).
package struct RedisScript: Sendable, Equatable {
    package let source: String

    package init(_ source: String) {
        self.source = source
    }
}
