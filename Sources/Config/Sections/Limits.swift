/// Every limit of the proxy, declared once: the `limits:` keys (name, parser, meaning; the default is
/// `LimitsConfiguration`'s) that the loader parses, `check` prints and docs/CONFIGURATION.md lists, and the fixed
/// limits with their reasons (`FixedLimits`). ShippingTests check that docs/CONFIGURATION.md shows this table.
public enum Limits {
    /// One `limits:` key.
    public struct Key: Sendable {
        /// How the value is written and where it lives.
        public enum Value: Sendable {
            /// A size (`64KiB`) of at least `minimum`; `zero`: what 0 means, when it means something.
            case size(WritableKeyPath<LimitsConfiguration, Int> & Sendable, minimum: Int, zero: String?)
            /// A plain number of at least `minimum`; `zero`: what 0 means, when it means something.
            case count(WritableKeyPath<LimitsConfiguration, Int> & Sendable, minimum: Int, zero: String?)
            /// A duration (`10s`) above 0.
            case duration(WritableKeyPath<LimitsConfiguration, Double> & Sendable)
        }

        public let name: String
        public let value: Value
        /// What the limit does, for docs/CONFIGURATION.md.
        public let meaning: String

        /// `limits.<name>`.
        public var keyPath: String { "limits." + name }

        /// The value as `check` prints it and docs/CONFIGURATION.md shows the default.
        public func format(_ limits: LimitsConfiguration) -> String {
            switch value {
            case .size(let field, _, let zero):
                let n = limits[keyPath: field]
                if n == 0, let zero { return "0 (\(zero))" }
                return Units.formatSize(n)
            case .count(let field, _, let zero):
                let n = limits[keyPath: field]
                if n == 0, let zero { return "0 (\(zero))" }
                return String(n)
            case .duration(let field):
                return Units.formatDuration(limits[keyPath: field])
            }
        }
    }

    /// The `limits:` keys in the order `check` prints them and docs/CONFIGURATION.md lists them (docs/CONTRACT.md).
    public static var keys: [Key] {
        [
            Key(
                name: "max_header_bytes", value: .size(\.maxHeaderBytes, minimum: 1, zero: nil),
                meaning: "larger request heads get 431"),
            Key(
                name: "max_body_bytes", value: .size(\.maxBodyBytes, minimum: 0, zero: "unlimited"),
                meaning: "larger request bodies get 413; `0`: unlimited, streamed"),
            Key(
                name: "max_connections", value: .count(\.maxConnections, minimum: 1, zero: nil),
                meaning: "beyond it, 503 `overloaded`; the proxy then reads and drops what the client still sends, for up to "
                    + "2 s, so that the answer is not lost to a connection reset (RFC 9112 §9.6)"),
            Key(
                name: "client_header_timeout", value: .duration(\.clientHeaderTimeout),
                meaning: "the whole request head must arrive within this, counted from its first byte (blank lines before a "
                    + "request count too) (else 408)"),
            Key(
                name: "client_idle_timeout", value: .duration(\.clientIdleTimeout),
                meaning: "no byte from the client for this long: an idle keep-alive connection is closed, a request in "
                    + "progress gets 408"),
            Key(
                name: "upstream_timeout", value: .duration(\.upstreamTimeout),
                meaning: "until the upstream's response head, counted from the last request byte written to it (else 504)"),
            Key(
                name: "upstream_idle_timeout", value: .duration(\.upstreamIdleTimeout),
                meaning: "no byte from the upstream for this long while a body streams"),
            Key(
                name: "client_send_timeout", value: .duration(\.clientSendTimeout),
                meaning: "the client took no byte of the answer for this long: the connection is closed (nginx's `send_timeout`)"),
            Key(
                name: "upstream_keepalive", value: .count(\.upstreamKeepalive, minimum: 0, zero: nil),
                meaning: "idle upstream connections kept per event loop for reuse (nginx's `keepalive`); `0` keeps none"),
            Key(
                name: "upstream_keepalive_timeout", value: .duration(\.upstreamKeepaliveTimeout),
                meaning: "an idle upstream connection is closed after this (nginx's `keepalive_timeout`)"),
            Key(
                name: "refresh_wait", value: .duration(\.refreshWait),
                meaning: "the longest a request waits for a refresh before 503 `token_unavailable`"),
        ]
    }

    /// The docs/CONFIGURATION.md rows of the `limits:` keys, defaults from `LimitsConfiguration()`.
    public static var readmeRows: [String] {
        let defaults = LimitsConfiguration()
        return keys.map { "| `\($0.keyPath)` | `\($0.format(defaults))` | \($0.meaning) |" }
    }

    /// One limit that is not a configuration key: its value as a person reads it, and why it is so.
    public struct Fixed: Sendable {
        public let what: String
        public let value: String
        public let reason: String
    }

    /// The fixed limits (`FixedLimits`) as docs/CONFIGURATION.md lists them.
    public static var fixed: [Fixed] {
        let f = FixedLimits.self
        return [
            Fixed(what: "one read from a client", value: Units.formatSize(f.clientReadBytes), reason: "the loop's read buffer"),
            Fixed(
                what: "one read from an upstream", value: Units.formatSize(f.upstreamReadBytes),
                reason: "a large answer passes in fewer loop turns and larger writes"),
            Fixed(
                what: "unparsed client bytes", value: Units.formatSize(f.unparsedClientHighWater),
                reason: "above it the client is not read until the parser catches up"),
            Fixed(
                what: "request body waiting for the upstream", value: Units.formatSize(f.bodyHighWater),
                reason: "above it the client is not read (a body waited for under `forward.request_buffering` is bounded by that)"),
            Fixed(
                what: "answer waiting for the client", value: Units.formatSize(f.answerHighWater) + " / " + Units.formatSize(f.answerLowWater),
                reason: "above the first the upstream is not read, below the second it is read again: memory per connection is bounded"),
            Fixed(
                what: "upstream 401 body held for a retry", value: Units.formatSize(f.held401Body),
                reason: "a larger one is passed on as it came (CONTRACT point 3)"),
            Fixed(
                what: "lingering close", value: Units.formatDuration(f.lingerSeconds),
                reason: "a connection closed with unread input reads and drops it this long, so the kernel's reset does not destroy the answer (RFC 9112 §9.6)"),
            Fixed(
                what: "refused connections lingering per acceptor", value: String(f.maxLingeringRefused),
                reason: "past it, a refused (503 `overloaded`) connection is closed right after its answer"),
            Fixed(
                what: "pause after a failed accept", value: Units.formatDuration(f.pauseAfterAcceptFailure),
                reason: "out of descriptors: the connection stays in the backlog, and retrying at once would spin"),
            Fixed(
                what: "timeout sweep", value: Units.formatDuration(f.sweepInterval),
                reason: "how often each loop checks its connections' timeouts: a timeout fires up to this late"),
            Fixed(
                what: "refresh-storm guard", value: Units.formatDuration(f.stormGuardSeconds),
                reason:
                    "after a freshly refreshed token is refused too, or a refresh hands back the very credential refused, 401s pass on without a refresh this long (CONTRACT point 3)"
            ),
            Fixed(
                what: "admin request", value: Units.formatDuration(f.adminRequestSeconds),
                reason: "a request to the admin listener must arrive and be answered within this"),
        ]
    }

    /// The docs/CONFIGURATION.md rows of the fixed limits.
    public static var fixedReadmeRows: [String] {
        fixed.map { "| \($0.what) | \($0.value) | \($0.reason) |" }
    }
}

/// The proxy's limits that are not configuration keys, each declared once; `Limits.fixed` gives
/// their reasons and docs/CONFIGURATION.md lists them.
public enum FixedLimits {
    // Buffers (docs/ENGINE.md, "One exchange", points 3 and 6).
    public static let clientReadBytes = 64 * 1024
    public static let unparsedClientHighWater = 64 * 1024
    public static let upstreamReadBytes = 256 * 1024
    public static let answerHighWater = 256 * 1024
    public static let answerLowWater = 64 * 1024
    public static let bodyHighWater = 256 * 1024
    public static let held401Body = 64 * 1024

    // Time.
    public static let lingerSeconds = 2.0
    public static let maxLingeringRefused = 256
    public static let pauseAfterAcceptFailure = 0.1
    public static let sweepInterval = 0.2
    public static let stormGuardSeconds = 30.0
    public static let adminRequestSeconds = 10.0
}

public struct LimitsConfiguration: Sendable, Equatable {
    public var maxHeaderBytes: Int = 64 << 10
    public var maxBodyBytes: Int = 0  // 0: unlimited
    public var maxConnections: Int = 4096
    public var clientHeaderTimeout: Double = 10
    public var clientIdleTimeout: Double = 60
    public var upstreamTimeout: Double = 60
    public var upstreamIdleTimeout: Double = 60
    /// The client took no byte of the answer for this long: the connection is closed (nginx's `send_timeout`).
    public var clientSendTimeout: Double = 60
    /// Idle upstream connections kept per event loop for reuse (nginx's `keepalive`); 0 keeps none.
    public var upstreamKeepalive: Int = 256
    /// How long an idle upstream connection is kept (nginx's `keepalive_timeout`). Minutes, not
    /// nginx's 60 s: clients of a credential proxy come in bursts minutes apart, and each burst
    /// after an emptied pool pays a new TLS handshake per connection (docs/ENGINE.md, "The pool";
    /// TCP keep-alive probes keep such a connection known to NATs and load balancers).
    public var upstreamKeepaliveTimeout: Double = 300
    public var refreshWait: Double = 10
    public init() {}
}

extension LimitsConfiguration {
    static func parse(_ s: YAMLSection, in load: LoadContext) -> LimitsConfiguration {
        load.found.collect { try s.rejectUnknownKeys(Keys.sections["limits"]!) }
        var l = LimitsConfiguration()
        for key in Limits.keys {
            load.found.collect {
                switch key.value {
                case .size(let field, let minimum, _):
                    guard let value = try s.size(key.name) else { return }
                    guard value >= minimum else { throw ConfigurationError(keyPath: key.keyPath, reason: Self.atLeast(minimum)) }
                    l[keyPath: field] = value
                case .count(let field, let minimum, _):
                    guard let value = try s.int(key.name) else { return }
                    guard value >= minimum else { throw ConfigurationError(keyPath: key.keyPath, reason: Self.atLeast(minimum)) }
                    l[keyPath: field] = value
                case .duration(let field):
                    if let value = try load.positiveDuration(s, key.name) { l[keyPath: field] = value }
                }
            }
        }
        return l
    }

    /// The reason a number below `minimum` is refused.
    private static func atLeast(_ minimum: Int) -> String {
        minimum == 1 ? "must be 1 or more" : "must be \(minimum) or more"
    }
}
