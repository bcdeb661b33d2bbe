import Testing

/// The tags a run can pick or leave out (`swift test --filter` matches names, so scripts/test.sh
/// and Tests/README.md select by folder; the tags say what a suite needs from the machine).
extension Tag {
    /// Starts the real `tokenproxy` binary and talks to it over sockets (Tests/EndToEndTests).
    @Tag public static var endToEnd: Self
    /// Starts a real `redis-server` (and Sentinels) on free ports.
    @Tag public static var redis: Self
    /// Needs root: network namespaces (`unshare`, `nsenter`), root-owned files, another user.
    @Tag public static var root: Self
    /// Takes minutes; the slowest run only with `TOKENPROXY_SLOW_TESTS=1`.
    @Tag public static var slow: Self
}
