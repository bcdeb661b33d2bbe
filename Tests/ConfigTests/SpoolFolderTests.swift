import Testing

@testable import Config

/// `forward.request_buffering_path` (docs/CONFIGURATION.md): the spool folder, resolved once at load;
/// by default `spool/` beside the store's file, as before the key existed.
@Suite struct SpoolFolderTests {
    @Test func theDefaultIsTheSpoolFolderBesideTheStoresFile() throws {
        #expect(try parse(minimalYAML).configuration.routes[0].spoolFolder == "/etc/tokenproxy/state/spool")
        let moved = try parse(minimalYAML + "\nstore: {path: /var/lib/tp/session.json}")
        #expect(moved.configuration.routes[0].spoolFolder == "/var/lib/tp/spool")
        // A Redis store keeps no file: the folder is beside `store.path`'s default, as it was.
        let redis = try parse(minimalYAML + "\nstore: {backend: redis, url: \"redis://127.0.0.1:6379/0\"}")
        #expect(redis.configuration.routes[0].spoolFolder == "/etc/tokenproxy/state/spool")
    }

    @Test func aConfiguredFolderIsResolvedAgainstTheFilesFolder() throws {
        let yaml = minimalYAML + "\nforward: {request_buffering_disk: 8MiB, request_buffering_path: bodies/spool}"
        let loaded = try parse(yaml)
        #expect(loaded.configuration.routes[0].spoolFolder == "/etc/tokenproxy/bodies/spool")
        #expect(loaded.configuration.routes[0].forward.requestBufferingPath == "/etc/tokenproxy/bodies/spool")
        #expect(loaded.warnings.isEmpty)
        #expect(try parse(minimalYAML + "\nforward: {request_buffering_path: /srv/spool}").configuration.routes[0].spoolFolder == "/srv/spool")
    }

    @Test func aFolderWithoutDiskBufferingIsAWarning() throws {
        let loaded = try parse(minimalYAML + "\nforward: {request_buffering_path: /srv/spool}")
        #expect(loaded.warnings.contains { $0.hasPrefix("forward.request_buffering_path: used only with forward.request_buffering_disk") })
    }

    /// A route with a store of its own spools beside that store unless `forward` names a folder; a
    /// route that takes the top-level `forward` takes its folder too.
    @Test func eachRouteResolvesItsOwnFolder() throws {
        let own = """
              - name: own
                match: {path_prefix: /own/}
                upstream: https://own.internal
                credentials: {type: static, token_env: TOKEN}
                store: {path: /var/lib/own/tokens.json}
            """
        let yaml = RouteTests.routesFile(
            own + """

                  - name: shared
                    match: {path_prefix: /shared/}
                    upstream: https://shared.internal
                    credentials: {type: static, token_env: GH}
                """)
        let routes = try parse(yaml, environment: RouteTests.environment).configuration.routes
        #expect(routes.map(\.spoolFolder) == ["/var/lib/own/spool", "/etc/tokenproxy/state/spool"])
        let named = RouteTests.routesFile(own, top: "forward: {request_buffering_disk: 8MiB, request_buffering_path: /srv/spool}")
        #expect(try parse(named, environment: RouteTests.environment).configuration.routes.map(\.spoolFolder) == ["/srv/spool"])
    }
}
