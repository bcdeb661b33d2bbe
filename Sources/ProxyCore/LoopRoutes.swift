import Basics
import Config
import Credentials
import HTTP1
import Sockets
import Synchronization
import Upstream

/// What every loop shares about one route (docs/ROUTES.md): its token manager, its 401 storm
/// guard, its budget and its `callers_file`'s reader. Kept across reloads while the route's
/// credentials, budget and `callers_file` stay the same.
public final class RouteState: Sendable {
    public let name: String
    public let tokens: TokenManager
    /// Monotonic time until which upstream 401s are passed through without a refresh (CONTRACT point 3).
    private let stormGuardUntil = Mutex<Double>(0)
    /// `budget:` (nil: none), shared by every loop.
    let budget: RouteBudget?
    /// `placeholder.callers_file`'s one reader in the process (nil: none; PlaceholderGate.swift).
    let callersFile: CallersFileReader?
    public convenience init(name: String, tokens: TokenManager) {
        self.init(name: name, tokens: tokens, budget: nil, callersFile: nil)
    }
    init(name: String, tokens: TokenManager, budget: RouteBudget?, callersFile: CallersFileReader?) {
        self.name = name
        self.tokens = tokens
        self.budget = budget
        self.callersFile = callersFile
    }

    func refusingGoodTokens(now: Double) -> Bool { stormGuardUntil.withLock { now < $0 } }
    func upstreamRefusedFreshToken(now: Double) { stormGuardUntil.withLock { $0 = now + FixedLimits.stormGuardSeconds } }
}

/// One route as one event loop serves it: its checks, its head rewriting, its upstream pool and
/// its shared state. Touched only on the loop's thread.
final class LoopRoute {
    let state: RouteState
    let policy: AccessPolicy
    let forwarder: Forwarder
    let upstream: UpstreamConnector
    /// Sources that can produce a different token on demand; a static token cannot.
    let tokenCanChange: Bool
    /// Sources whose sessions begin with `tokenproxy login`: without one, requests get 401 login_required.
    let sessionNeedsLogin: Bool
    /// `credentials.dpop` is set: only then can a token carry a DPoP binding (RFC 9449).
    let dpopEnabled: Bool
    /// The name that errors from this route's token state carry, and that labels its series (nil
    /// for the file without `routes:`).
    let errorName: String?
    /// Where this route's counters are in `LoopMetrics.Counters.routes`.
    let metricsSlot: Int
    /// `tokenproxy_upstream_connect_seconds{tls}`: index 1 for an https upstream.
    let tlsIndex: Int
    // `forward:` values each request reads, kept apart from the configuration (reading them from
    // it would copy the route's whole settings per request).
    let requestBuffering: Int
    let requestBufferingDisk: Int
    /// Where a body spooled under `forward.request_buffering_disk` is kept (`forward.request_buffering_path`).
    let spoolFolder: String
    /// `forward.request_buffering_disk_total`: what all spooled bodies may hold together.
    let spoolTotal: Int
    let retryMemory: Int
    let retryBodyLimit: Int
    /// `type: aws`: the route's SigV4 signer (`CredentialPlacement.signed`; nil for every other
    /// type), for what comes before and after the head: holding a body to hash, reading a 403.
    let sigv4: SigV4RequestSigner?
    /// `type: aws` with a signed payload: a body up to this is read whole before its head goes.
    let signingBodyLimit: Int?
    /// `upstream: "https://{host}"`: this is the route's template; each request goes through the
    /// `LoopRoute` of its own host (`LoopRoutes.requestHostRoute`).
    let takesRequestHost: Bool
    /// The route's `budget` (RouteBudget.swift), read by each request; nil on a route without one.
    let budget: RouteBudget?
    /// What the audit log says of the route's credential.
    let audit: RouteAudit
    /// `scrub: true`: what makes each answer's scrubber (nil: the route does not scrub).
    let scrubbing: RouteScrubbing?

    var tokens: TokenManager { state.tokens }

    /// `configuration`: the file reduced to this route (`Configuration.selecting(route:)`);
    /// `placeholders`: the loop's gate of the route (a request host's route shares its template's).
    init(state: RouteState, configuration: Configuration, placeholders: PlaceholderGate?, named: Bool, loop: EventLoop, metrics: LoopMetrics) {
        self.state = state
        budget = state.budget
        let route = configuration.routes[0]
        let tls = route.upstreamTLS
        upstream = UpstreamConnector(
            loop: loop,
            settings: UpstreamSettings(
                caFile: tls.caFile, clientCertFile: tls.clientCertFile, clientKeyFile: tls.clientKeyFile,
                insecureSkipVerify: tls.insecureSkipVerify, headTimeout: configuration.limits.upstreamTimeout,
                proxy: ProxyEnvironment(scheme: route.upstream.scheme)),
            origin: route.upstream.origin, maxIdle: configuration.limits.upstreamKeepalive,
            idleTimeout: configuration.limits.upstreamKeepaliveTimeout)
        let slot = metrics.slot(for: state.name)
        metricsSlot = slot
        tlsIndex = route.upstream.urlScheme.isTLS ? 1 : 0
        upstream.retirementObserver = { [metrics] reason in metrics.counters.routes[slot].retirements[reason.rawValue] += 1 }
        // One credential for the check and the writer: both read the same placement.
        let credential = RouteCredential(route)
        policy = AccessPolicy(configuration: configuration, credential: credential, placeholders: placeholders)
        forwarder = Forwarder(configuration: configuration, credential: credential)
        dpopEnabled = credential.dpopEnabled
        tokenCanChange = route.credentials.type.tokenCanChange
        sessionNeedsLogin = route.credentials.type.sessionNeedsLogin
        errorName = named ? route.name : nil
        takesRequestHost = route.upstream.takesRequestHost
        audit = RouteAudit(route)
        requestBuffering = route.forward.requestBuffering
        requestBufferingDisk = route.forward.requestBufferingDisk
        spoolFolder = route.spoolFolder
        spoolTotal = route.forward.requestBufferingDiskTotal
        retryMemory = route.forward.retryMemory
        retryBodyLimit = route.forward.retryBodyLimit
        sigv4 = credential.signer
        scrubbing = route.scrub ? RouteScrubbing(placement: credential.placement) : nil
        signingBodyLimit = credential.signer?.rules.holdsBodies == true ? route.forward.retryBodyLimit : nil
    }
}

/// The routes of one configuration as one loop serves them, and the table that picks one. A reload
/// gives the loop a new one; an exchange keeps the `LoopRoute` it started with.
final class LoopRoutes {
    let table: RouteTable
    let routes: [LoopRoute]
    /// The one route of a file without `routes:`: no lookup per request.
    let single: LoopRoute?
    private let byName: [String: LoopRoute]
    // What a route of a request's own host is made from.
    private let configuration: Configuration
    private let loop: EventLoop
    private let metrics: LoopMetrics

    /// A route with `upstream: "https://{host}"` as one host's requests take it.
    private struct RequestHost: Hashable {
        let route: Int
        let name: String
    }
    /// The routes of the hosts met so far: each its own Host to send and sign, and its own pool
    /// (a connection to one host never serves another).
    private var requestHostRoutes: [RequestHost: LoopRoute] = [:]
    /// Beyond this many hosts on one loop, the ones kept are let go (their idle connections closed).
    static let maxRequestHostRoutes = 256

    init(configuration: Configuration, states: [RouteState], loop: EventLoop, metrics: LoopMetrics) {
        table = RouteTable(configuration.routes)
        routes = states.indices.map { i in
            LoopRoute(
                state: states[i], configuration: configuration.selecting(route: i),
                placeholders: PlaceholderGate(configuration.routes[i], reader: states[i].callersFile), named: configuration.hasRoutes,
                loop: loop, metrics: metrics)
        }
        single = table.isSingle ? routes[0] : nil
        var byName: [String: LoopRoute] = [:]
        for route in routes { byName[route.state.name] = route }
        self.byName = byName
        self.configuration = configuration
        self.loop = loop
        self.metrics = metrics
    }

    /// Every route that may hold upstream connections: the routes, and those of request hosts.
    var withConnections: [LoopRoute] { routes + requestHostRoutes.values }

    /// Route `index` (`upstream: "https://{host}"`) for requests to `name`, a checked host name
    /// (`RouteTable.requestHostName`): its upstream URL with that host, the rest as configured.
    private func requestHostRoute(_ index: Int, name: String) -> LoopRoute {
        let key = RequestHost(route: index, name: name)
        if let known = requestHostRoutes[key] { return known }
        if requestHostRoutes.count >= Self.maxRequestHostRoutes {
            for route in requestHostRoutes.values { route.upstream.closeIdle() }
            requestHostRoutes.removeAll()
        }
        var one = configuration.selecting(route: index)
        one.routes[0].upstream.host = name
        let route = LoopRoute(
            state: routes[index].state, configuration: one, placeholders: routes[index].policy.placeholders, named: configuration.hasRoutes, loop: loop,
            metrics: metrics)
        requestHostRoutes[key] = route
        return route
    }

    /// The route of a request on the shared listener (`ownRoute` nil) or on a route's own listener,
    /// with the length of path prefix to strip and the target as parsed; or the error that comes
    /// first (CONTRACT point 10: 400, CONNECT, `no_route`; `forbidden_target` for an absolute-form
    /// request no host route names).
    struct Selection {
        let route: LoopRoute
        /// How many leading bytes of the path the route strips.
        let strip: Int
        let target: AccessPolicy.ParsedTarget
    }

    /// `tunnelHost`: in a forward-proxy tunnel, the CONNECT host, which stands for an absent Host.
    func select(_ head: RequestHead, ownRoute: String?, tunnelHost: String? = nil) -> Result<Selection, ProxyError> {
        let target: AccessPolicy.ParsedTarget
        do {
            target = try AccessPolicy.parse(head)
        } catch {
            return .failure(error)
        }
        if let ownRoute {
            guard let route = byName[ownRoute] else { return .failure(.noRoute) }
            return .success(Selection(route: route, strip: 0, target: target))
        }
        var host = target.authority ?? head.first("host") ?? tunnelHost
        // The port a host without one stands for: only host routes compare ports (`RouteTable.match`),
        // so a table without them needs none.
        let defaultPort =
            !table.hasHostRoutes ? 0 : tunnelHost != nil && target.absolute == nil ? 443 : Authority.defaultPort(scheme: target.absolute?.scheme)
        var path = target.path
        // In a tunnel the host is the request's target as in absolute form: a path no route of that
        // host takes is forbidden_target, never another route's (its token would go with it).
        let hostIsTarget = target.absolute != nil || tunnelHost != nil
        let outcome = path.withUTF8 { p -> RouteTable.Outcome in
            guard host != nil else { return table.match(host: nil, defaultPort: defaultPort, path: p, absoluteForm: hostIsTarget) }
            return host!.withUTF8 { table.match(host: $0, defaultPort: defaultPort, path: p, absoluteForm: hostIsTarget) }
        }
        switch outcome {
        case .route(let index, let strip):
            guard routes[index].takesRequestHost else { return .success(Selection(route: routes[index], strip: strip, target: target)) }
            // The host the route's `*.` name matched goes upstream: only a real host name.
            guard let name = host.flatMap(RouteTable.requestHostName) else {
                return .failure(.badRequest("the request's host is not a host name, and this route sends each request to its own host"))
            }
            return .success(Selection(route: requestHostRoute(index, name: name), strip: strip, target: target))
        case .noRoute: return .failure(.noRoute)
        case .forbiddenTarget: return .failure(.forbiddenTarget)
        }
    }
}

/// The token managers a configuration's routes need, reusing the ones of the configuration in
/// effect where a route's credentials, store and sink are the same (so a reload keeps its session
/// and token, docs/ROUTES.md), and sharing one between routes with the same credential set.
public struct RouteStatePlan {
    public var states: [RouteState]
    /// Managers made for this configuration: start them before it takes effect.
    public var created: [TokenManager]
    /// Managers of the old configuration no route uses any more: stop them after.
    public var retired: [TokenManager]

    /// `make` builds a manager from the file reduced to one route.
    public init(
        _ configuration: Configuration, previous: (configuration: Configuration, states: [RouteState])?,
        make: (Configuration) throws -> TokenManager
    ) rethrows {
        var known: [(route: RouteConfiguration, tokens: TokenManager)] = []
        if let previous {
            for (route, state) in zip(previous.configuration.routes, previous.states) { known.append((route, state.tokens)) }
        }
        var states: [RouteState] = []
        var created: [TokenManager] = []
        for i in configuration.routes.indices {
            let route = configuration.routes[i]
            let tokens: TokenManager
            if let same = known.first(where: { RouteStatePlan.sameSession($0.route, route) }) {
                tokens = same.tokens
            } else {
                tokens = try make(configuration.selecting(route: i))
                created.append(tokens)
                known.append((route, tokens))
            }
            // A route whose manager, budget and callers_file did not change keeps its storm guard,
            // budget's counts and callers too.
            if let previous,
                let old = previous.states.first(where: {
                    $0.name == route.name && $0.tokens === tokens && $0.budget?.configuration == route.budget
                        && $0.callersFile?.path == route.placeholder?.callersFile
                })
            {
                states.append(old)
            } else {
                states.append(
                    RouteState(
                        name: route.name, tokens: tokens, budget: route.budget.map(RouteBudget.init),
                        callersFile: route.placeholder.flatMap { CallersFileReader($0, now: 0) }))
            }
        }
        let used = Set(states.map { ObjectIdentifier($0.tokens) })
        var retired: [TokenManager] = []
        for state in previous?.states ?? [] where !used.contains(ObjectIdentifier(state.tokens)) {
            if !retired.contains(where: { $0 === state.tokens }) { retired.append(state.tokens) }
        }
        self.states = states
        self.created = created
        self.retired = retired
    }

    /// Whether two routes keep one session: the same credentials, store and sink.
    static func sameSession(_ a: RouteConfiguration, _ b: RouteConfiguration) -> Bool {
        a.credentials == b.credentials && a.store == b.store && a.sink == b.sink
    }
}
