/// The proxy's limits that are not configuration keys, each declared once with the reason for its
/// value (the configurable ones are the `limits:` section, docs/CONTRACT.md). README.md lists them.
enum FixedLimits {
    // MARK: buffers (docs/ENGINE.md, "One exchange", points 3 and 6)

    /// One read from a client socket (the loop's buffer).
    static let clientReadBytes = 64 * 1024
    /// Unparsed client bytes above which the client socket is no longer read.
    static let unparsedClientHighWater = 64 * 1024
    /// One read from an upstream connection (the loop's buffer): a large answer passes in fewer
    /// loop turns and larger writes.
    static let upstreamReadBytes = 256 * 1024
    /// Bytes of the answer waiting for the client above which the upstream is no longer read…
    static let answerHighWater = 256 * 1024
    /// …and below which it is read again.
    static let answerLowWater = 64 * 1024
    /// Request body bytes waiting for the upstream above which the client is no longer read.
    static let bodyHighWater = 256 * 1024
    /// The body of an upstream 401 held for a retry (CONTRACT point 3); a larger one goes on as it came.
    static let held401Body = 64 * 1024

    // MARK: closing

    /// How long a connection closed with unread input keeps reading and dropping it after its last
    /// answer, so that the kernel's reset does not destroy that answer (RFC 9112 §9.6).
    static let lingerSeconds = 2.0
    /// Refused (503 `overloaded`) connections of one acceptor lingering at once; past that, one is
    /// closed right after its answer.
    static let maxLingeringRefused = 256
    /// How long accepting stops after a failed accept (out of descriptors): the connection stays in
    /// the backlog, and retrying at once would spin. nginx turns its accept events off likewise.
    static let pauseAfterAcceptFailure = 0.1
    /// A request to the admin listener must arrive and be answered within this.
    static let adminRequestSeconds = 10.0
}
