import Foundation
import TestSupport
import Testing

/// `rediss://` (CONTRACT.md "The fleet store in production", issue 33 point 1) against a real
/// redis-server that speaks TLS only (`--port 0 --tls-port`), with certificates made by openssl for
/// each run: the fleet's guarantees over TLS, client certificates, and a certificate for another
/// host refused with the host named and no fall back to plain text.
@Suite("Fleet over TLS (rediss://)", .serialized, .tags(.endToEnd, .redis), .timeLimit(.minutes(40)))
struct RedisTLSTests {
    /// A throwaway PKI whose keys only their owner may read (as tokenproxy demands of a key).
    static func pki() throws -> TestPKI {
        let pki = try TestPKI()
        for key in [pki.clientKey, pki.serverKey] {
            try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: key)
        }
        return pki
    }

    static func files(_ pki: TestPKI, authClients: Bool) -> RedisServer.TLSFiles {
        RedisServer.TLSFiles(certFile: pki.serverCert, keyFile: pki.serverKey, caFile: pki.caFile, authClients: authClients)
    }

    @Test("two serve processes share one session over rediss:// with a client certificate: 40 requests meeting 401s cost one refresh")
    func aFleetSharesItsSessionOverTLS() throws {
        let pki = try Self.pki()
        let fleet = try Fleet(
            idpArguments: ["--access-ttl", "3600", "--token-delay-ms", "300"], tls: Self.files(pki, authClients: true),
            storeExtra: "  ca_file: \(pki.caFile)\n  client_cert_file: \(pki.clientCert)\n  client_key_file: \(pki.clientKey)")
        defer { fleet.stop() }
        #expect(fleet.redis.url.hasPrefix("rediss://"))
        #expect(try fleet.login().status == 0)
        #expect(try fleet.stored()?["refresh_token"] != nil, "the session is in the TLS-only Redis")
        let proxies = try (0..<2).map { _ in try fleet.serve() }
        for proxy in proxies { #expect(try send(proxy).status == 200) }
        try fleet.life.api("/test/reject-seen")
        let results = concurrently(40) { index in try send(proxies[index % 2], "GET", "/orders/\(index)") }
        let statuses = results.map { (try? $0.get().status) ?? -1 }
        #expect(statuses == Array(repeating: 200, count: 40), "\(statuses)")
        #expect(try fleet.life.idpCalls("refresh_token") == 1)
        #expect(try fleet.idpStat("reuse_detected") == 0)
        for proxy in proxies { proxy.terminate() }
        for proxy in proxies { #expect(try proxy.waitForExit() == 0) }
    }

    @Test("over rediss://, the refresher killed with SIGKILL mid-refresh: another process refreshes after the lease, nothing is replayed")
    func refresherKilledMidRefreshOverTLS() throws {
        let pki = try Self.pki()
        let fleet = try Fleet(
            idpArguments: ["--access-ttl", "3600"], lease: "2s", tls: Self.files(pki, authClients: true),
            storeExtra: "  ca_file: \(pki.caFile)\n  client_cert_file: \(pki.clientCert)\n  client_key_file: \(pki.clientKey)")
        defer { fleet.stop() }
        #expect(fleet.redis.url.hasPrefix("rediss://"))
        try FleetTests.refresherKilledMidRefresh(in: fleet)
    }

    @Test("without the client certificate a server that demands one refuses the handshake, and the error says so")
    func aClientCertificateIsRequiredWhenTheServerAsks() throws {
        let pki = try Self.pki()
        let fleet = try Fleet(idpArguments: [], tls: Self.files(pki, authClients: true), storeExtra: "  ca_file: \(pki.caFile)")
        defer { fleet.stop() }
        let result = try fleet.login()
        #expect(result.status != 0)
        #expect(result.stderr.contains("redis 127.0.0.1:\(fleet.redis.port)") && result.stderr.contains("TLS"), "\(result.stderr)")
    }

    @Test("a certificate that is not for the host is refused, naming the host; nothing falls back to plain text")
    func aCertificateForAnotherHostIsRefused() throws {
        let pki = try Self.pki()
        // Also on 127.0.0.2, which the server certificate (127.0.0.1, localhost) does not name.
        let fleet = try Fleet(
            idpArguments: [], redisArguments: ["--bind", "127.0.0.1", "127.0.0.2"], tls: Self.files(pki, authClients: false),
            storeExtra: "  ca_file: \(pki.caFile)")
        defer { fleet.stop() }
        let yaml = fleet.life.config(extra: fleet.storeYAML.replacingOccurrences(of: "127.0.0.1:\(fleet.redis.port)", with: "127.0.0.2:\(fleet.redis.port)"))
        _ = try fleet.life.dir.write("tokenproxy.yaml", yaml)
        let result = try fleet.life.login()
        #expect(result.status != 0)
        #expect(result.stderr.contains("redis 127.0.0.2:\(fleet.redis.port): cannot connect over TLS"), "\(result.stderr)")
        #expect(result.stderr.contains("does not verify for the host 127.0.0.2"), "\(result.stderr)")
        // The same host named in the certificate works.
        #expect(try fleet.login().status == 0)
    }

    @Test("rediss:// to a server that speaks only plain text is refused, never spoken to in plain text")
    func plainTextIsNeverTheFallBack() throws {
        let pki = try Self.pki()
        let fleet = try Fleet(idpArguments: [], storeExtra: "  ca_file: \(pki.caFile)")
        defer { fleet.stop() }
        #expect(fleet.redis.url.hasPrefix("redis://"))
        let yaml = fleet.life.config(extra: fleet.storeYAML.replacingOccurrences(of: "redis://", with: "rediss://"))
        _ = try fleet.life.dir.write("tokenproxy.yaml", yaml)
        let result = try fleet.life.login()
        #expect(result.status != 0)
        #expect(result.stderr.contains("redis 127.0.0.1:\(fleet.redis.port): cannot connect over TLS"), "\(result.stderr)")
        #expect(try fleet.stored() == nil, "nothing was written over plain text")
    }
}
