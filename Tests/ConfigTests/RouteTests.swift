import Testing

@testable import Config

/// CONTRACT.md "Several APIs in one process: routes": the file's `routes:` and the table that picks a route.
@Suite struct RouteTests {
    static let environment = ["TOKEN": "t1", "GH": "t2"]

    static func routesFile(_ routes: String, top: String = "") -> String {
        """
        listen: 127.0.0.1:8080
        store:
          path: ./state/tokens.json
        \(top)
        routes:
        \(routes)
        """
    }

    static let three = routesFile(
        """
          - name: orders
            match: {path_prefix: /orders/}
            upstream: https://orders.internal/v1
            credentials: {type: static, token_env: TOKEN}
          - name: github
            match: {host: api.github.com}
            upstream: https://api.github.com
            credentials: {type: static, token_env: GH}
          - name: wild
            match: {host: "*.example.com"}
            upstream: https://wild.example.net
            credentials: {type: static, token_env: GH}
          - name: billing
            match: {listen: 127.0.0.1:8081}
            upstream: https://billing.example.com/api
            credentials: {type: static, token_env: TOKEN}
            access: {allow_paths: [/invoices/]}
          - name: rest
            upstream: https://rest.example.com
            credentials: {type: static, token_env: TOKEN}
        """)

    @Test func aFileWithoutRoutesIsTheRouteNamedDefault() throws {
        let c = try parse(minimalYAML).configuration
        #expect(c.routes.map(\.name) == ["default"])
        #expect(c.routes[0].match == nil)
        #expect(!c.hasRoutes)
        #expect(RouteTable(c.routes).isSingle)
    }

    @Test func routesAreReadWithTheirMatchesAndStores() throws {
        let c = try parse(Self.three, environment: Self.environment).configuration
        #expect(c.hasRoutes)
        #expect(c.routes.map(\.name) == ["orders", "github", "wild", "billing", "rest"])
        #expect(c.routes[0].match?.pathPrefix == "/orders/")
        #expect(c.routes[0].match?.stripPrefix == true)
        #expect(c.routes[1].match?.hosts == ["api.github.com"])
        #expect(c.routes[3].match?.listen == .tcp(host: "127.0.0.1", port: 8081))
        #expect(c.routes[3].access.allowPaths == ["/invoices/"])
        #expect(c.routes[0].access.allowPaths == nil)
        #expect(c.routes[0].store.path == "/etc/tokenproxy/state/orders.json")
        #expect(c.routes[4].store.path == "/etc/tokenproxy/state/rest.json")
        #expect(c.routes[1].credentials.asStatic?.token.value == "t2")
        let printed = c.resolvedDescription()
        for name in ["orders", "github", "wild", "billing", "rest"] { #expect(printed.contains("route \(name):")) }
        #expect(printed.contains("routes.orders.match.path_prefix: /orders/"))
    }

    @Test func aTopLevelSectionIsEveryRoutesDefaultAndARouteSectionReplacesItWhole() throws {
        let c = try parse(
            Self.routesFile(
                """
                  - name: a
                    match: {path_prefix: /a/}
                    upstream: https://a.example.com
                    credentials: {type: static, token_env: TOKEN}
                  - name: b
                    upstream: https://b.example.com
                    credentials: {type: static, token_env: TOKEN}
                    forward: {preserve_host: true}
                """,
                top: "forward: {client_authorization: keep}"), environment: Self.environment
        ).configuration
        #expect(c.routes[0].forward.clientAuthorization == .keep)
        #expect(c.routes[1].forward.clientAuthorization == .replace)
        #expect(c.routes[1].forward.preserveHost)
    }

    @Test func everyRouteErrorIsFoundAtOnce() throws {
        let error = try #require(
            parseError(
                """
                upstream: https://top.example.com
                credentials: {type: static, token_env: TOKEN}
                routes:
                  - name: Bad Name
                    match: {path_prefix: /a/}
                    upstream: https://a.example.com
                    credentials: {type: static, token_env: TOKEN}
                  - name: twin
                    match: {host: api.example.com}
                    upstream: https://b.example.com
                    credentials: {type: static, token_env: TOKEN}
                  - name: twin
                    match: {host: api.example.com}
                    upstream: https://c.example.com
                    credentials: {type: static, token_env: GH}
                  - name: x
                    upstream: https://d.example.com
                    credentials: {type: static, token_env: TOKEN}
                    store: {path: /tmp/shared.json}
                  - name: y
                    upstream: https://e.example.com
                    credentials: {type: static, token_env: GH}
                    store: {path: /tmp/shared.json}
                  - name: z
                    match: {path_prefix: nope}
                    credentials: {type: static, token_env: TOKEN}
                """, environment: Self.environment))
        let keys = error.all.map(\.keyPath)
        #expect(keys.contains("upstream"), "\(error)")
        #expect(keys.contains("credentials"))
        #expect(keys.contains("routes[0].name"))
        #expect(keys.contains("routes[2].name"))
        #expect(keys.contains("routes[2].match.host"))
        #expect(keys.contains("routes[4].match"), "a second route without match")
        #expect(keys.contains("routes[4].store"), "a store shared with other credentials")
        #expect(keys.contains("routes[5].upstream"))
        #expect(keys.contains("routes[5].match.path_prefix"))
    }

    /// What a sealed session names as its route (CONTRACT.md "The fleet store in production"): the
    /// route's own, and for routes that share one store the first of them, so that their one session
    /// opens for each (`login --route` of either, the manager they share).
    @Test func aStoreNamesTheRouteWhoseSessionItKeeps() throws {
        #expect(try parse(minimalYAML).configuration.routes[0].store.sessionRoute == "default")
        let c = try parse(
            Self.routesFile(
                """
                  - name: own
                    match: {path_prefix: /own/}
                    upstream: https://a.example.com
                    credentials: {type: static, token_env: TOKEN}
                  - name: second
                    match: {path_prefix: /second/}
                    upstream: https://b.example.com
                    credentials: {type: static, token_env: TOKEN}
                    store: {path: /tmp/shared.json}
                  - name: first
                    match: {path_prefix: /first/}
                    upstream: https://c.example.com
                    credentials: {type: static, token_env: TOKEN}
                    store: {path: /tmp/shared.json}
                """), environment: Self.environment
        ).configuration
        #expect(c.routes.map(\.store.sessionRoute) == ["own", "second", "second"])
        #expect(c.routes[1].store == c.routes[2].store, "one session: one manager")
    }

    @Test func theTablePicksExactHostThenWildcardThenLongestPathThenFallback() throws {
        let c = try parse(
            Self.routesFile(
                """
                  - name: short
                    match: {path_prefix: /api/}
                    upstream: https://a.example.com
                    credentials: {type: static, token_env: TOKEN}
                  - name: long
                    match: {path_prefix: /api/v2/, strip_prefix: false}
                    upstream: https://b.example.com
                    credentials: {type: static, token_env: TOKEN}
                  - name: exact
                    match: {host: [API.example.com, other.test:8443]}
                    upstream: https://c.example.com
                    credentials: {type: static, token_env: TOKEN}
                  - name: wild
                    match: {host: "*.example.com"}
                    upstream: https://d.example.com
                    credentials: {type: static, token_env: TOKEN}
                  - name: fallback
                    upstream: https://e.example.com
                    credentials: {type: static, token_env: TOKEN}
                """), environment: Self.environment
        ).configuration
        let table = RouteTable(c.routes)
        #expect(!table.isSingle)
        #expect(table.match(host: "api.example.com", path: "/api/x") == .route(2, strip: 0))
        #expect(table.match(host: "Api.Example.COM:80", path: "/") == .route(2, strip: 0))
        #expect(table.match(host: "x.y.example.com", path: "/api/x") == .route(3, strip: 0))
        #expect(table.match(host: "example.com", path: "/api/x") == .route(0, strip: 5), "*. needs a label before the suffix")
        #expect(table.match(host: "localhost:8080", path: "/api/v2/z") == .route(1, strip: 0), "the longest prefix, kept")
        #expect(table.match(host: "localhost:8080", path: "/api/v1") == .route(0, strip: 5))
        #expect(table.match(host: "localhost:8080", path: "/other") == .route(4, strip: 0))
        #expect(table.match(host: "other.test:8443", path: "/") == .route(2, strip: 0))
        #expect(table.match(host: "other.test", path: "/") == .route(4, strip: 0), "the port must match when given")
        #expect(table.match(host: "nobody.test", path: "/api/x", absoluteForm: true) == .forbiddenTarget)
        #expect(table.match(host: "api.example.com", path: "/x", absoluteForm: true) == .route(2, strip: 0))
        // A name with a trailing dot is the same name (RFC 1034 §3.1; issue 39 point 20).
        #expect(table.match(host: "API.example.com.", path: "/x", absoluteForm: true) == .route(2, strip: 0))
        #expect(table.match(host: "other.test.:8443", path: "/") == .route(2, strip: 0))
        #expect(table.match(host: "x.example.com.", path: "/x", absoluteForm: true) == .route(3, strip: 0))
        #expect(table.match(host: "api.example.com..", path: "/x", absoluteForm: true) == .forbiddenTarget, "one dot only")
        #expect(table.match(host: ".", path: "/x", absoluteForm: true) == .forbiddenTarget)
    }

    /// A prefix matches whole segments: `/orders` is `/orders` and `/orders/…`, never `/orders..`
    /// (which would leave `..` to climb out of the upstream's base path) or `/ordersx`.
    @Test func aPathPrefixMatchesWholeSegments() throws {
        let c = try parse(
            Self.routesFile(
                """
                  - name: bare
                    match: {path_prefix: /orders}
                    upstream: https://a.example.com/v1
                    credentials: {type: static, token_env: TOKEN}
                  - name: slashed
                    match: {path_prefix: /items/}
                    upstream: https://b.example.com/v1
                    credentials: {type: static, token_env: TOKEN}
                """), environment: Self.environment
        ).configuration
        let table = RouteTable(c.routes)
        #expect(table.match(host: nil, path: "/orders") == .route(0, strip: 7))
        #expect(table.match(host: nil, path: "/orders/7") == .route(0, strip: 7))
        #expect(table.match(host: nil, path: "/orders..") == .noRoute)
        #expect(table.match(host: nil, path: "/orders../admin") == .noRoute)
        #expect(table.match(host: nil, path: "/orders%2e%2e/admin") == .noRoute)
        #expect(table.match(host: nil, path: "/ordersx") == .noRoute)
        #expect(table.match(host: nil, path: "/items/") == .route(1, strip: 7))
        #expect(table.match(host: nil, path: "/items/x") == .route(1, strip: 7))
        #expect(table.match(host: nil, path: "/itemsx/") == .noRoute)
    }

    /// Issue 33 drifts: a top-level sink is every route's, so two sessions would overwrite each
    /// other's token in it; TOKENPROXY_UPSTREAM has no route to apply to; `check` names each route's
    /// store, sink, access and forward lines.
    @Test func oneSinkForTwoSessionsIsRefused() throws {
        let routes = """
              - name: a
                match: {path_prefix: /a/}
                upstream: https://a.example.com
                credentials: {type: static, token_env: TOKEN}
              - name: b
                upstream: https://b.example.com
                credentials: {type: static, token_env: GH}
            """
        let error = try #require(parseError(Self.routesFile(routes, top: "sink: {path: ./token.txt}"), environment: Self.environment))
        #expect(error.all.contains { $0.keyPath == "routes[1].sink.path" && $0.reason.contains("routes[0]") }, "\(error)")
        // Each route its own sink: valid.
        let own = Self.routesFile(
            """
              - name: a
                match: {path_prefix: /a/}
                upstream: https://a.example.com
                credentials: {type: static, token_env: TOKEN}
                sink: {path: ./a.txt}
              - name: b
                upstream: https://b.example.com
                credentials: {type: static, token_env: GH}
                sink: {path: ./b.txt}
            """)
        #expect(parseError(own, environment: Self.environment) == nil)
    }

    @Test func theUpstreamVariableIsSaidToBeIgnoredWithRoutes() throws {
        var environment = Self.environment
        environment[ConfigurationLoader.upstreamEnvironmentKey] = "https://elsewhere.example.com"
        let loaded = try parse(Self.three, environment: environment)
        #expect(loaded.warnings.contains { $0.hasPrefix("TOKENPROXY_UPSTREAM: ignored") }, "\(loaded.warnings)")
        #expect(!loaded.configuration.routes.contains { $0.upstream.host == "elsewhere.example.com" })
        #expect(!(try parse(Self.three, environment: Self.environment)).warnings.contains { $0.hasPrefix("TOKENPROXY_UPSTREAM") })
    }

    @Test func checkNamesTheRouteOfEachLine() throws {
        let shown = try parse(Self.three, environment: Self.environment).configuration.resolvedDescription()
        for name in ["orders", "github"] {
            for key in ["store.backend", "store.path", "sink.path", "access.allow_hosts", "forward.preserve_host", "upstream_tls.ca_file"] {
                #expect(shown.contains("\nroutes.\(name).\(key): "), "routes.\(name).\(key) in\n\(shown)")
            }
        }
        #expect(!shown.contains("\nstore.path: "), "a route's line without its route in\n\(shown)")
    }

    @Test func noRouteWithoutAFallback() throws {
        let c = try parse(
            Self.routesFile(
                """
                  - name: only
                    match: {path_prefix: /only/}
                    upstream: https://a.example.com
                    credentials: {type: static, token_env: TOKEN}
                  - name: own
                    match: {listen: 127.0.0.1:0}
                    upstream: https://b.example.com
                    credentials: {type: static, token_env: TOKEN}
                """), environment: Self.environment
        ).configuration
        let table = RouteTable(c.routes)
        #expect(table.match(host: "localhost", path: "/only") == .noRoute, "a prefix is matched whole")
        #expect(table.match(host: "localhost", path: "/only/x") == .route(0, strip: 6))
        #expect(table.ownListeners.map(\.route) == [1])
    }

    @Test func aRouteAloneIsAFileOfItsOwn() throws {
        let c = try parse(Self.three, environment: Self.environment).configuration
        let one = c.selecting(route: 1)
        #expect(one.routes.count == 1)
        #expect(one.upstream.host == "api.github.com")
        #expect(one.store.path.hasSuffix("/state/github.json"))
    }

    // MARK: upstream: "https://{host}" (issue 39, point 9)

    static func requestHostRoute(match: String, upstream: String = "\"https://{host}\"") -> String {
        routesFile(
            """
              - name: s3
                match: \(match)
                upstream: \(upstream)
                credentials: {type: static, token_env: TOKEN}
            """)
    }

    @Test func aStarHostRouteMayTakeTheRequestsOwnHost() throws {
        let c = try parse(Self.requestHostRoute(match: "{host: [\"*.s3.eu-west-1.amazonaws.com\", s3.eu-west-1.amazonaws.com]}"), environment: Self.environment)
            .configuration
        #expect(c.routes[0].upstream.takesRequestHost)
        #expect(c.routes[0].upstream.scheme == "https")
        #expect(c.routes[0].upstream.port == 443)
        let other = try parse(
            Self.requestHostRoute(match: "{host: \"*.example.com\"}", upstream: "\"http://{host}:8080/base/\""), environment: Self.environment
        )
        .configuration.routes[0].upstream
        #expect(other.takesRequestHost && other.port == 8080 && other.explicitPort && other.basePath == "/base")
        // A name that only starts with {host} is no placeholder, and not a host name either.
        let error = try #require(
            parseError(Self.requestHostRoute(match: "{host: \"*.example.com\"}", upstream: "\"https://{host}x\""), environment: Self.environment))
        #expect(error.all.contains { $0.keyPath == "routes[0].upstream" }, "\(error)")
    }

    @Test func theRequestsOwnHostNeedsAStarHost() throws {
        for match in ["{host: api.example.com}", "{path_prefix: /s3/}", "{listen: 127.0.0.1:8081}"] {
            let error = try #require(parseError(Self.requestHostRoute(match: match), environment: Self.environment), "\(match)")
            #expect(
                error.all.contains { $0.keyPath == "routes[0].upstream" && $0.reason.contains("{host}") && $0.reason.contains("*.") }, "\(match): \(error)")
        }
        // The fallback route, and the one-API file (its upstream, or TOKENPROXY_UPSTREAM), take any Host.
        let fallback = Self.routesFile("  - name: s3\n    upstream: \"https://{host}\"\n    credentials: {type: static, token_env: TOKEN}")
        #expect(try #require(parseError(fallback, environment: Self.environment)).all.contains { $0.keyPath == "routes[0].upstream" })
        let single = minimalYAML.replacingOccurrences(of: "upstream: https://api.example.com", with: "upstream: \"https://{host}\"")
        #expect(try #require(parseError(single)).all.contains { $0.keyPath == "upstream" && $0.reason.contains("{host}") })
        var environment = minimalEnvironment
        environment["TOKENPROXY_UPSTREAM"] = "https://{host}"
        #expect(try #require(parseError(minimalYAML, environment: environment)).all.contains { $0.keyPath == "TOKENPROXY_UPSTREAM" })
    }

    @Test func theRequestsHostGoesUpstreamOnlyWhenItIsAHostName() {
        #expect(RouteTable.requestHostName("MyBucket.S3.eu-west-1.amazonaws.com") == "mybucket.s3.eu-west-1.amazonaws.com")
        #expect(RouteTable.requestHostName("my_bucket.s3.eu-west-1.amazonaws.com.:443") == "my_bucket.s3.eu-west-1.amazonaws.com")
        for bad in [
            "evil.com/x?.s3.eu-west-1.amazonaws.com", "user@evil.com#.s3.amazonaws.com", "a..s3.amazonaws.com", ".s3.amazonaws.com", "",
            "[::1]", "a b.example.com", "a%2e.example.com", String(repeating: "a", count: 64) + ".example.com",
        ] {
            #expect(RouteTable.requestHostName(bad) == nil, "\(bad)")
        }
    }
}
