import Foundation
import Testing

@testable import Config

/// CONTRACT.md "HTTPS for clients": `tls:` at the top and in a route with its own listener, and
/// `forward_proxy:`, with every error `check` names by key and reason.
@Suite struct ClientTLSConfigurationTests {
    @Test func topLevelTLSIsReadWithPathsResolvedAgainstTheFile() throws {
        let folder = try tlsFolder()
        defer { folder.remove() }
        let yaml = minimalYAML + "\ntls: {cert_file: ./tls/server.pem, key_file: tls/server-key.pem, client_ca_file: ./tls/clients.pem}"
        let tls = try #require(try parse(yaml, base: folder.path).configuration.listenTLS)
        #expect(tls.certFile == folder.resolved + "/tls/server.pem")
        #expect(tls.keyFile == folder.resolved + "/tls/server-key.pem")
        #expect(tls.clientCAFile == folder.resolved + "/tls/clients.pem")
        #expect(try parse(minimalYAML, base: folder.path).configuration.listenTLS == nil)
    }

    @Test func aKeyReadableByGroupOrOthersIsRefusedNamingFileAndMode() throws {
        let folder = try tlsFolder(keyMode: 0o644)
        defer { folder.remove() }
        let found = errors(minimalYAML + "\ntls: {cert_file: tls/server.pem, key_file: tls/server-key.pem}", base: folder.path)
        #expect(found.map(\.keyPath) == ["tls.key_file"])
        #expect(found.first?.reason.contains("server-key.pem") == true)
        #expect(found.first?.reason.contains("0644") == true)
    }

    @Test func missingFilesAndUnknownKeysAreNamed() throws {
        let folder = try tlsFolder()
        defer { folder.remove() }
        #expect(errors(minimalYAML + "\ntls: {key_file: tls/server-key.pem}", base: folder.path).map(\.keyPath) == ["tls.cert_file"])
        #expect(
            errors(minimalYAML + "\ntls: {cert_file: tls/nothing.pem, key_file: tls/server-key.pem}", base: folder.path).map(\.keyPath) == ["tls.cert_file"])
        let unknown = errors(minimalYAML + "\ntls: {cert_file: tls/server.pem, key_file: tls/server-key.pem, ca_file: x}", base: folder.path)
        #expect(unknown.map(\.keyPath) == ["tls.ca_file"])
    }

    @Test func aRouteWithItsOwnListenerHasItsOwnTLS() throws {
        let folder = try tlsFolder()
        defer { folder.remove() }
        let yaml = billingRoutes("    match: {listen: 127.0.0.1:8443}\n    tls: {cert_file: tls/server.pem, key_file: tls/server-key.pem}")
        let route = try parse(yaml, base: folder.path).configuration.routes[0]
        #expect(route.ownListenerTLS?.certFile == folder.resolved + "/tls/server.pem")
        let shared = errors(
            billingRoutes("    match: {path_prefix: /b/}\n    tls: {cert_file: tls/server.pem, key_file: tls/server-key.pem}"), base: folder.path)
        #expect(shared.map(\.keyPath) == ["routes[0].tls"])
        #expect(shared.first?.reason.contains("match.listen") == true)
    }

    @Test func theForwardProxyMakesItsCABesideTheStoreByDefault() throws {
        let folder = try tlsFolder()
        defer { folder.remove() }
        let yaml = minimalYAML + "\nstore: {path: ./state/tokens.json}\nforward_proxy: {}"
        let forward = try #require(try parse(yaml, base: folder.path).configuration.forwardProxy)
        #expect(forward.caCertFile == folder.resolved + "/state/forward-proxy-ca.pem")
        #expect(forward.caKeyFile == folder.resolved + "/state/forward-proxy-ca-key.pem")
        #expect(!forward.caConfigured)
        #expect(forward.leafLifetime == 24 * 3600)
        #expect(forward.otherHosts == .refuse)
        #expect(try parse(minimalYAML, base: folder.path).configuration.forwardProxy == nil)
    }

    @Test func theForwardProxysOwnCAAndSettingsAreRead() throws {
        let folder = try tlsFolder()
        defer { folder.remove() }
        let yaml = minimalYAML + "\nforward_proxy: {ca_cert_file: ca/ca.pem, ca_key_file: ca/ca-key.pem, leaf_lifetime: 6h, other_hosts: tunnel}"
        let forward = try #require(try parse(yaml, base: folder.path).configuration.forwardProxy)
        #expect(forward.caCertFile == folder.resolved + "/ca/ca.pem")
        #expect(forward.caConfigured)
        #expect(forward.leafLifetime == 6 * 3600)
        #expect(forward.otherHosts == .tunnel)
    }

    @Test func forwardProxyErrorsAreNamed() throws {
        let folder = try tlsFolder()
        defer { folder.remove() }
        func keyPaths(_ body: String) -> [String] { errors(minimalYAML + "\nforward_proxy: " + body, base: folder.path).map(\.keyPath) }
        #expect(keyPaths("{ca_cert_file: ca.pem}") == ["forward_proxy.ca_key_file"])
        #expect(keyPaths("{ca_key_file: ca-key.pem}") == ["forward_proxy.ca_cert_file"])
        #expect(keyPaths("{leaf_lifetime: 1h}") == ["forward_proxy.leaf_lifetime"])
        #expect(keyPaths("{other_hosts: allow}") == ["forward_proxy.other_hosts"])
        #expect(keyPaths("{ca: x}") == ["forward_proxy.ca"])
        let inRoute = errors(billingRoutes("    match: {host: api.example.com}\n    forward_proxy: {}"), base: folder.path)
        #expect(inRoute.map(\.keyPath) == ["routes[0].forward_proxy"])
    }

    @Test func aForwardProxyWithoutHostRoutesIsWarnedAbout() throws {
        let loaded = try parse(minimalYAML + "\nforward_proxy: {}")
        #expect(loaded.warnings.contains { $0.hasPrefix("forward_proxy:") && $0.contains("match.host") })
    }
}
