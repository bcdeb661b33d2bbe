import Foundation
import Sockets
import Synchronization
import TLS
import TestSupport
import Testing

/// The forward proxy's local CA and the host certificates it signs, checked by openssl and curl.
@Suite("TLS: the local CA and minted host certificates", .serialized)
struct MintingTests {
    /// A new CA, its certificate in a file, and its leaf cache (a day's lifetime).
    private func madeAuthority() throws -> (TempDir, caFile: String, LeafCertificates) {
        let directory = try TempDir(prefix: "tls-minted")
        let authority = try CertificateAuthority.create()
        let caFile = try directory.write("ca.pem", String(decoding: authority.certificatePEM, as: UTF8.self))
        return (directory, caFile, LeafCertificates(authority: authority, lifetime: 24 * 3600))
    }

    @Test("a made CA is written with its key 0600 and read back the same; one file alone is an error")
    func authorityFiles() throws {
        let directory = try TempDir(prefix: "tls-ca")
        let certificateFile = directory.file("ca.pem")
        let keyFile = directory.file("ca-key.pem")
        let made = try CertificateAuthority.loadOrCreate(certificateFile: certificateFile, keyFile: keyFile)
        #expect(FileKind.mode(of: keyFile) == 0o600)
        let again = try CertificateAuthority.loadOrCreate(certificateFile: certificateFile, keyFile: keyFile)
        #expect(again.serialNumber == made.serialNumber)
        #expect(again.certificatePEM == made.certificatePEM)
        let text = try runCommand("openssl", arguments: ["x509", "-noout", "-text", "-in", certificateFile])
        #expect(text.stdout.contains("CA:TRUE"))
        #expect(text.stdout.contains("prime256v1"))
        #expect(text.stdout.contains("Certificate Sign"))

        chmod(keyFile, 0o640)
        try giveToNonRootOwner(keyFile)
        let open = try #require(KeyFilePermissions.of(keyFile))
        #expect(throws: TLSSetupError.keyFileNotPrivate(path: keyFile, permissions: open)) {
            _ = try CertificateAuthority.load(certificateFile: certificateFile, keyFile: keyFile)
        }
        try FileManager.default.removeItem(atPath: keyFile)
        #expect(throws: TLSSetupError.incompleteAuthority(missing: keyFile)) {
            _ = try CertificateAuthority.loadOrCreate(certificateFile: certificateFile, keyFile: keyFile)
        }
        let nowhere = directory.file("missing-folder/ca-key.pem")
        do {
            _ = try CertificateAuthority.loadOrCreate(certificateFile: directory.file("missing-folder/ca.pem"), keyFile: nowhere)
            Issue.record("a CA was written into a folder that does not exist")
        } catch {
            guard case .cannotWrite(let path, _) = error else { throw error }
            #expect(path == nowhere)
        }
    }

    @Test("a server certificate is not accepted as a CA")
    func leafIsNoAuthority() throws {
        let fixtures = try Fixtures()
        #expect(throws: TLSSetupError.notAnAuthority(path: fixtures.serverCertificate)) {
            _ = try CertificateAuthority.load(certificateFile: fixtures.serverCertificate, keyFile: fixtures.serverKey)
        }
    }

    @Test("minted leaves verify against the CA with openssl verify, name the host in subjectAltName and are cached")
    func mintedLeaves() throws {
        let (directory, caFile, leaves) = try madeAuthority()
        for (host, expected) in [("API.Example.test", "DNS:api.example.test"), ("10.1.2.3", "IP Address:10.1.2.3"), ("[::1]", "IP Address:0:0:0:0:0:0:0:1")] {
            let leaf = try leaves.certificate(for: host)
            let leafFile = try directory.write("leaf.pem", String(decoding: leaf.certificatePEM, as: UTF8.self))
            let verify = try runCommand("openssl", arguments: ["verify", "-purpose", "sslserver", "-CAfile", caFile, leafFile])
            #expect(verify.status == 0, "\(verify.output)")
            let text = try runCommand("openssl", arguments: ["x509", "-noout", "-text", "-in", leafFile]).stdout
            #expect(text.contains(expected), "\(text)")
            #expect(text.contains("CA:FALSE"))
            #expect(text.contains("TLS Web Server Authentication"))
            #expect(try leaves.certificate(for: host) === leaf)
        }
        #expect(leaves.count == 3)
        #expect(throws: TLSSetupError.invalidHostName("bad,DNS:evil")) { _ = try leaves.certificate(for: "bad,DNS:evil") }
        let other = try CertificateAuthority.create()
        let otherFile = try directory.write("other.pem", String(decoding: other.certificatePEM, as: UTF8.self))
        let leafFile = try directory.write("leaf.pem", String(decoding: try leaves.certificate(for: "api.example.test").certificatePEM, as: UTF8.self))
        #expect(try runCommand("openssl", arguments: ["verify", "-CAfile", otherFile, leafFile]).status != 0)
    }

    @Test("a leaf is reused until a quarter of its lifetime is left, then a new one is minted")
    func leafRenewal() throws {
        let now = Mutex<Double>(1_800_000_000)
        let leaves = LeafCertificates(authority: try CertificateAuthority.create(), lifetime: 8 * 3600, clock: { now.withLock { $0 } })
        let first = try leaves.certificate(for: "api.example.test")
        now.withLock { $0 += 6 * 3600 - 1 }
        #expect(try leaves.certificate(for: "api.example.test") === first)
        now.withLock { $0 += 2 }
        let second = try leaves.certificate(for: "api.example.test")
        #expect(second !== first)
        #expect(second.serialNumber != first.serialNumber)
    }

    @Test("the cache keeps at most its capacity")
    func leafCapacity() throws {
        let leaves = LeafCertificates(authority: try CertificateAuthority.create(), lifetime: 3600 * 24, capacity: 2)
        for host in ["a.example", "b.example", "c.example"] { _ = try leaves.certificate(for: host) }
        #expect(leaves.count == 2)
    }

    @Test("curl trusts a minted leaf chosen by the SNI hook (--resolve), and a name the hook refuses fails")
    func curlThroughMintedLeaf() throws {
        let (directory, caFile, leaves) = try madeAuthority()
        defer { withExtendedLifetime(directory) {} }  // the CA file lives until curl is done
        let context = try TLSServerContext(certificate: try leaves.certificate(for: "default.example.test"))
        let server = try TLSTestServer(context: context) { name in
            guard let name, name == "api.example.test", let leaf = try? leaves.certificate(for: name) else { return .refuse }
            return .use(leaf)
        }
        defer { server.stop() }
        func fetch(_ host: String) throws -> CommandResult {
            try curl(["--cacert", caFile, "--resolve", "\(host):\(server.port):127.0.0.1"], url: "https://\(host):\(server.port)/")
        }
        let result = try fetch("api.example.test")
        #expect(result.status == 0, "\(result.output)")
        #expect(result.stdout.contains("sni=api.example.test"))
        let refused = try fetch("other.example.test")
        #expect(refused.status != 0)
        #expect(server.waitFor { $0 == .failure(.serverNameRefused("other.example.test")) } != nil, "\(server.events)")
    }
}
