import Foundation
import TestSupport
import Testing

@testable import Config

/// CONTRACT.md "HTTPS for clients", beyond ClientTLSConfigurationTests: each key of `tls:` and
/// `forward_proxy:` by its error, the modes a key file may and may not have, where a made CA lives
/// (routes, `store.backend: redis`), the key table for docs and what `check` prints.
@Suite struct ClientTLSKeyTests {
    @Test func bothFilesOfTheListenerAreRequiredAndEachMissingOneIsNamed() throws {
        let folder = try tlsFolder()
        defer { folder.remove() }
        #expect(errors(minimalYAML + "\ntls: {cert_file: tls/server.pem}", base: folder.path).map(\.keyPath) == ["tls.key_file"])
        #expect(Set(errors(minimalYAML + "\ntls: {client_ca_file: tls/clients.pem}", base: folder.path).map(\.keyPath)) == ["tls.cert_file", "tls.key_file"])
        let missingKey = errors(minimalYAML + "\ntls: {cert_file: tls/server.pem, key_file: tls/nothing-key.pem}", base: folder.path)
        #expect(missingKey.map(\.keyPath) == ["tls.key_file"])
        #expect(missingKey.first?.reason.contains("nothing-key.pem") == true)
        let missingCA = errors(
            minimalYAML + "\ntls: {cert_file: tls/server.pem, key_file: tls/server-key.pem, client_ca_file: tls/none.pem}", base: folder.path)
        #expect(missingCA.map(\.keyPath) == ["tls.client_ca_file"])
        let aFolder = errors(minimalYAML + "\ntls: {cert_file: tls, key_file: tls/server-key.pem}", base: folder.path)
        #expect(aFolder.map(\.keyPath) == ["tls.cert_file"])
        #expect(aFolder.first?.reason.contains("folder") == true)
    }

    @Test(arguments: [0o640, 0o604, 0o666])
    func aKeyFileOthersCanReadIsRefusedWhateverTheBit(mode: Int) throws {
        let folder = try tlsFolder(keyMode: mode)
        defer { folder.remove() }
        try giveToNonRootOwner(folder.path + "/tls/server-key.pem")
        let found = errors(minimalYAML + "\ntls: {cert_file: tls/server.pem, key_file: tls/server-key.pem}", base: folder.path)
        #expect(found.map(\.keyPath) == ["tls.key_file"])
        #expect(found.first?.reason.contains("0" + String(mode, radix: 8)) == true, "\(found)")
    }

    @Test func aKeyFileOnlyItsOwnerReadsIsAccepted() throws {
        for mode in [0o400, 0o600] {
            let folder = try tlsFolder(keyMode: mode)
            defer { folder.remove() }
            let yaml = minimalYAML + "\ntls: {cert_file: tls/server.pem, key_file: tls/server-key.pem}"
            #expect(try parse(yaml, base: folder.path).configuration.listenTLS?.keyFile == folder.resolved + "/tls/server-key.pem")
        }
    }

    @Test func aRoutesOwnTLSErrorsCarryTheRoutesPrefix() throws {
        let folder = try tlsFolder(keyMode: 0o644)
        defer { folder.remove() }
        let found = errors(
            billingRoutes("    match: {listen: 127.0.0.1:8443}\n    tls: {cert_file: tls/server.pem, key_file: tls/server-key.pem}"), base: folder.path)
        #expect(found.map(\.keyPath) == ["routes[0].tls.key_file"])
        #expect(found.first?.reason.contains("0644") == true)
        let unknown = errors(billingRoutes("    match: {listen: 127.0.0.1:8443}\n    tls: {cert: x}"), base: folder.path)
        #expect(Set(unknown.map(\.keyPath)) == ["routes[0].tls.cert", "routes[0].tls.cert_file", "routes[0].tls.key_file"])
    }

    @Test func aConfiguredCAKeyIsModeCheckedAndMayNotExistYet() throws {
        let open = try tlsFolder(caKeyMode: 0o644)
        defer { open.remove() }
        let found = errors(minimalYAML + "\nforward_proxy: {ca_cert_file: ca/ca.pem, ca_key_file: ca/ca-key.pem}", base: open.path)
        #expect(found.map(\.keyPath) == ["forward_proxy.ca_key_file"])
        #expect(found.first?.reason.contains("ca-key.pem") == true)
        #expect(found.first?.reason.contains("0644") == true)

        let empty = try TemporaryFolder()
        defer { empty.remove() }
        let yaml = minimalYAML + "\nforward_proxy: {ca_cert_file: /var/lib/tp/ca.pem, ca_key_file: /var/lib/tp/ca-key.pem}"
        let forward = try #require(try parse(yaml, base: empty.path).configuration.forwardProxy)
        #expect(forward.caKeyFile == "/var/lib/tp/ca-key.pem")
        #expect(forward.caConfigured)
    }

    @Test func theLeafLifetimeIsAtLeastTwoHoursAndADuration() throws {
        let folder = try tlsFolder()
        defer { folder.remove() }
        func forward(_ body: String) throws -> ForwardProxyConfiguration? {
            try parse(minimalYAML + "\nforward_proxy: " + body, base: folder.path).configuration.forwardProxy
        }
        #expect(try forward("{leaf_lifetime: 2h}")?.leafLifetime == 2 * 3600)
        #expect(try forward("{leaf_lifetime: 168h}")?.leafLifetime == 7 * 24 * 3600)
        for short in ["119m", "0s", "-3h"] {
            let found = errors(minimalYAML + "\nforward_proxy: {leaf_lifetime: \(short)}", base: folder.path)
            #expect(found.map(\.keyPath) == ["forward_proxy.leaf_lifetime"], "\(short)")
        }
        let words = errors(minimalYAML + "\nforward_proxy: {leaf_lifetime: a day}", base: folder.path)
        #expect(words.map(\.keyPath) == ["forward_proxy.leaf_lifetime"])
        let notAMapping = errors(minimalYAML + "\nforward_proxy: yes", base: folder.path)
        #expect(notAMapping.map(\.keyPath) == ["forward_proxy"])
    }

    @Test func aMadeCALivesInTheTopLevelStoresFolder() throws {
        let folder = try tlsFolder()
        defer { folder.remove() }
        // No store: the default store path, <config folder>/state/tokens.json.
        let plain = try #require(try parse(minimalYAML + "\nforward_proxy: {}", base: folder.path).configuration.forwardProxy)
        #expect(plain.caCertFile == folder.resolved + "/state/forward-proxy-ca.pem")
        #expect(plain.caKeyFile == folder.resolved + "/state/forward-proxy-ca-key.pem")
        // With routes: the top-level store, not a route's.
        let withRoutes = billingRoutes("    match: {host: billing.example.com}", top: "store: {path: /var/lib/tp/tokens.json}\nforward_proxy: {}")
        let routed = try #require(try parse(withRoutes, base: folder.path).configuration.forwardProxy)
        #expect(routed.caKeyFile == "/var/lib/tp/forward-proxy-ca-key.pem")
        // With Redis: store.path still names the local folder.
        let redis = minimalYAML + "\nstore: {backend: redis, url: \"redis://127.0.0.1:6379/0\", path: /srv/tp/tokens.json}\nforward_proxy: {}"
        let shared = try #require(try parse(redis, base: folder.path).configuration.forwardProxy)
        #expect(shared.caCertFile == "/srv/tp/forward-proxy-ca.pem")
        #expect(!shared.caConfigured)
    }

    @Test func aHostRouteSilencesTheWarning() throws {
        let loaded = try parse(billingRoutes("    match: {host: billing.example.com}", top: "forward_proxy: {}"))
        #expect(!loaded.warnings.contains { $0.contains("match.host") }, "\(loaded.warnings)")
        let listenOnly = try parse(billingRoutes("    match: {path_prefix: /b/}", top: "forward_proxy: {}"))
        #expect(listenOnly.warnings.contains { $0.hasPrefix("forward_proxy:") })
    }

    @Test func everyNewKeyIsListedForDocs() {
        let keys = Set(ConfigurationLoader.knownKeys)
        for key in [
            "tls", "tls.cert_file", "tls.key_file", "tls.client_ca_file", "forward_proxy", "forward_proxy.ca_cert_file",
            "forward_proxy.ca_key_file", "forward_proxy.leaf_lifetime", "forward_proxy.other_hosts",
        ] {
            #expect(keys.contains(key), "\(key)")
        }
    }

    @Test func checkPrintsPathsAndSettingsNeverContents() throws {
        let folder = try tlsFolder()
        defer { folder.remove() }
        let yaml =
            minimalYAML
            + "\ntls: {cert_file: tls/server.pem, key_file: tls/server-key.pem}\nforward_proxy: {leaf_lifetime: 6h, other_hosts: tunnel}"
        let text = try parse(yaml, base: folder.path).configuration.resolvedDescription()
        let lines = Set(text.split(separator: "\n").map(String.init))
        #expect(lines.contains("tls.cert_file: \(folder.resolved)/tls/server.pem"), "\(text)")
        #expect(lines.contains("tls.key_file: \(folder.resolved)/tls/server-key.pem"), "\(text)")
        #expect(lines.contains { $0.hasPrefix("tls.client_ca_file: none") }, "\(text)")
        #expect(lines.contains { $0.hasPrefix("forward_proxy.ca_cert_file: \(folder.resolved)/state/forward-proxy-ca.pem (made") }, "\(text)")
        #expect(lines.contains("forward_proxy.ca_key_file: \(folder.resolved)/state/forward-proxy-ca-key.pem"), "\(text)")
        #expect(lines.contains("forward_proxy.leaf_lifetime: 6h"), "\(text)")
        #expect(lines.contains("forward_proxy.other_hosts: tunnel"), "\(text)")
        #expect(!text.contains("contents of"))

        let configured = minimalYAML + "\nforward_proxy: {ca_cert_file: ca/ca.pem, ca_key_file: ca/ca-key.pem}"
        let own = try parse(configured, base: folder.path).configuration.resolvedDescription()
        #expect(own.contains("forward_proxy.ca_cert_file: \(folder.resolved)/ca/ca.pem\n"), "\(own)")
        #expect(own.contains("forward_proxy.other_hosts: refuse"), "\(own)")
        #expect(!own.contains("contents of"))
        #expect(try parse(minimalYAML).configuration.resolvedDescription().contains("forward_proxy: none"))

        let routed = billingRoutes(
            "    match: {listen: 127.0.0.1:8443}\n    tls: {cert_file: tls/server.pem, key_file: tls/server-key.pem, client_ca_file: tls/clients.pem}")
        let routeText = try parse(routed, base: folder.path).configuration.resolvedDescription()
        #expect(routeText.contains("routes.billing.tls.client_ca_file: \(folder.resolved)/tls/clients.pem"), "\(routeText)")
    }
}
