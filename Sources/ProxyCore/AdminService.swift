import Config

/// What the admin listener answers from (CONTRACT.md "Signals, admin, logs"): the proxy's readiness,
/// metrics and commands, not the proxy itself. `Server` makes the admin connections and is their
/// service; Admin knows only this protocol, so the two do not depend on each other.
protocol AdminService: AnyObject, Sendable {
    /// The configuration in effect: whether it has routes, and the admin's Host rules.
    var configuration: Configuration { get }
    /// Whether the proxy (or the route `route`) could serve a request now; the reason when not.
    func readiness(route: String?) -> (ready: Bool, why: String)
    /// The /metrics text, handed to `done` on some loop's thread once every loop has counted.
    func collectMetrics(_ done: @escaping @Sendable (String) -> Void)
    /// `POST /refresh[?route=NAME]`; nil when no route has that name.
    func forceRefresh(route: String?) -> ForcedRefreshResult?
    /// Runs `POST /reload`'s reloads; nil when the process cannot reload.
    var reloadWorker: ReloadWorker? { get }
}

/// What a forced refresh of one route or of every route did.
public struct ForcedRefreshResult: Sendable, Equatable {
    /// Routes whose refresh started (or joined one in flight).
    public var started: [String] = []
    /// Routes without a session: nothing to refresh (`login_required`).
    public var withoutSession: [String] = []
    /// Routes whose forced refreshes came too often: each is done once the back-off allows, after
    /// at most the longest wait among them.
    public var deferred: [String] = []
    public var retryAfter = 0
}
