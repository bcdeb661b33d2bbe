import Basics

/// How to reach one Redis primary: directly at `host:port`, or through Redis Sentinel.
package struct RedisClientConfiguration: Sendable, Equatable {
    /// A name or an IP literal (IPv6 without brackets); unused with `sentinels`.
    package var host: String
    package var port: Int
    /// The database every connection selects (`SELECT`); 0 is the one a connection starts on.
    package var database: Int = 0
    /// The ACL user (Redis 6 and later); nil: the default user.
    package var user: String? = nil
    package var password: String? = nil
    /// TLS to the primary and to the sentinels alike; nil: plain TCP.
    package var tls: RedisTLS? = nil
    /// The primary is the one these sentinels name.
    package var sentinels: RedisSentinels? = nil
    package var connectTimeout: Double
    package var commandTimeout: Double

    package init(host: String, port: Int, connectTimeout: Double, commandTimeout: Double) {
        self.host = host
        self.port = port
        self.connectTimeout = connectTimeout
        self.commandTimeout = commandTimeout
    }
}

/// The sentinels that monitor a primary under the name `master`, asked in turn, with their own
/// password (`requirepass` on the sentinels) when there is one.
package struct RedisSentinels: Sendable, Equatable {
    package var master: String
    package var addresses: [Authority]
    package var password: String?

    package init(master: String, addresses: [Authority], password: String? = nil) {
        self.master = master
        self.addresses = addresses
        self.password = password
    }

    /// A sentinel's `+switch-master` push (`message`, `+switch-master`, `<master> <old ip> <old port>
    /// <new ip> <new port>`, Redis Sentinel's Pub/Sub events): the new primary's `host:port` when the
    /// message is about `master`.
    package static func switchedPrimary(_ reply: RedisValue, master: String) -> String? {
        guard let (channel, payload) = reply.publishedMessage, channel == "+switch-master", let text = payload.text else { return nil }
        let words = text.split(separator: " ")
        guard words.count == 5, words[0] == master, let port = Int(words[4]) else { return nil }
        return Authority(host: String(words[3]), port: port).description
    }
}
