import Foundation
import Synchronization
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// A fleet's world (issue 13): the token life cycle's servers (`Lifecycle`: a real OAuth 2.0 server
/// with rotating refresh tokens and reuse detection, a protected API) plus a real `redis-server`
/// on a free port that every `tokenproxy` process of the test shares as its store.
public final class Fleet: @unchecked Sendable {
    public let life: Lifecycle
    public let redis: RedisServer
    public let key = "fleet/\(UUID().uuidString.lowercased())"
    public let lease: String

    /// More `store:` lines (indented two spaces), such as a rediss:// server's CA.
    public let storeExtra: String

    /// - Parameters:
    ///   - persistentRedis: false: a restart of Redis empties it.
    ///   - tls: a Redis that speaks TLS only, with these files.
    public init(
        idpArguments: [String], lease: String = "2s", persistentRedis: Bool = true, redisArguments: [String] = [],
        tls: RedisServer.TLSFiles? = nil, storeExtra: String = "", redisServer: RedisServer? = nil
    ) throws {
        life = try Lifecycle(idpArguments: idpArguments)
        redis = try redisServer ?? RedisServer(arguments: redisArguments, persistent: persistentRedis, tls: tls)
        self.lease = lease
        self.storeExtra = storeExtra
    }

    public var storeYAML: String {
        """
        store:
          backend: redis
          url: \(redis.url)/0
          key: \(key)
          lease_time: \(lease)
          connect_timeout: 1s
          command_timeout: 1s
        \(storeExtra)
        """
    }

    /// Writes `tokenproxy.yaml` (what `serve` and the commands read) with the Redis store.
    public func writeConfig(margin: String) throws {
        _ = try life.dir.write("tokenproxy.yaml", life.config(margin: margin, extra: storeYAML))
    }

    public func serve(margin: String = "5s") throws -> ProxyProcess {
        try life.serve(margin: margin, extra: storeYAML)
    }

    @discardableResult
    public func login(margin: String = "5s") throws -> CommandResult {
        try writeConfig(margin: margin)
        let result = try life.login()
        collectSecrets()
        return result
    }

    /// The session document in Redis, as JSON.
    public func stored() throws -> [String: Any]? {
        let text = try redis.cli(["--raw", "HGET", key + ":session", "session"])
        guard !text.isEmpty else { return nil }
        return (try? JSONSerialization.jsonObject(with: Data(text.utf8))) as? [String: Any]
    }

    public func generation() throws -> Int {
        Int(try redis.cli(["--raw", "HGET", key + ":session", "generation"])) ?? 0
    }

    public func leaseHeld() throws -> Bool {
        try redis.cli(["EXISTS", key + ":lease"]) == "1"
    }

    /// Hands the stored tokens to the leak check.
    public func collectSecrets() {
        guard let stored = try? stored() else { return }
        for field in ["access_token", "refresh_token"] {
            if let value = stored[field] as? String { life.addSecret(value) }
        }
    }

    public func idpStat(_ name: String) throws -> Int {
        try life.idpStats()[name] as? Int ?? 0
    }

    public func stop() {
        life.stop()
        redis.stop()
    }
}

/// The value of one exact series (name and labels as rendered) from a proxy's /metrics.
public func series(_ proxy: ProxyProcess, _ name: String) throws -> Double {
    guard let admin = proxy.adminURL else { return 0 }
    let text = try curl([admin + "/metrics"]).bodyString
    for line in text.split(separator: "\n") where line.hasPrefix(name + " ") {
        if let value = line.split(separator: " ").last.flatMap({ Double($0) }) { return value }
    }
    return 0
}

/// The sum of one series over the fleet.
public func fleetSum(_ proxies: [ProxyProcess], _ name: String) throws -> Double {
    try proxies.reduce(0) { $0 + (try series($1, name)) }
}

public let refreshedByIdP = #"tokenproxy_refreshes_total{source="oauth2_refresh",outcome="success"}"#
public let reusedFromStore = #"tokenproxy_refreshes_total{source="oauth2_refresh",outcome="reused"}"#
public func race(_ outcome: String) -> String { #"tokenproxy_refresh_races_total{backend="redis",outcome=""# + outcome + #""}"# }

/// Requests sent through a fleet by a few threads, each on a connection of its own, until `stop()`:
/// what a busy fleet sees while its store is restarted or overwritten. Each thread paces itself
/// (at most about 50 a second) so that the load does not starve the other tests of a parallel run.
// @unchecked: `statuses` is read and written only with `lock` held. An NSLock (a pthread mutex)
// rather than Synchronization's Mutex, which ThreadSanitizer cannot see when it is contended
// (docs/RELIABILITY.md, "Sanitizers").
public final class Load: @unchecked Sendable {
    private let lock = NSLock()
    private var statuses: [Int: Int] = [:]
    private let running = Atomic<Bool>(true)
    private let done = DispatchGroup()

    public init(_ proxies: [ProxyProcess], threads: Int = 4) {
        for index in 0..<threads {
            done.enter()
            let thread = Thread { [self] in
                var turn = index
                while running.load(ordering: .relaxed) {
                    let status = (try? send(proxies[turn % proxies.count], "GET", "/load/\(turn)", timeout: 10).status) ?? -1
                    lock.withLock { statuses[status, default: 0] += 1 }
                    turn += 1
                    usleep(20_000)
                }
                done.leave()
            }
            thread.stackSize = 1 << 20
            thread.start()
        }
    }

    /// Answers so far, by status (-1: no answer).
    public var counts: [Int: Int] { lock.withLock { statuses } }
    public var total: Int { counts.values.reduce(0, +) }

    /// Waits until `more` answers came after this call (or 60 s passed).
    public func waitFor(_ more: Int) -> Bool {
        let target = total + more
        return within(60) { total >= target }
    }

    public func stop() -> [Int: Int] {
        running.store(false, ordering: .relaxed)
        done.wait()
        return counts
    }
}
