import Foundation
import Sockets
import TLS
import TestSupport
import Testing

@Suite("TLS: pure pieces")
struct PureTests {
    /// A ProtocolNameList as a ClientHello carries it (RFC 7301 §3.1).
    private func list(_ names: [String]) -> [UInt8] { names.flatMap { [UInt8($0.utf8.count)] + Array($0.utf8) } }

    @Test("ALPN finds http/1.1 wherever it is in the client's list, and nothing in a list without it or a malformed one")
    func alpn() {
        #expect(list(["http/1.1"]).withUnsafeBytes { ALPN.offsetOfHTTP11(in: $0) } == 1)
        #expect(list(["h2", "http/1.1"]).withUnsafeBytes { ALPN.offsetOfHTTP11(in: $0) } == 4)
        #expect(list(["h2", "http/1.0"]).withUnsafeBytes { ALPN.offsetOfHTTP11(in: $0) } == nil)
        #expect(list(["http/1.12"]).withUnsafeBytes { ALPN.offsetOfHTTP11(in: $0) } == nil)
        #expect([UInt8]([8]).withUnsafeBytes { ALPN.offsetOfHTTP11(in: $0) } == nil)  // the length runs past the end
        #expect(([0] + list(["http/1.1"])).withUnsafeBytes { ALPN.offsetOfHTTP11(in: $0) } == nil)  // an empty name
        #expect([UInt8]().withUnsafeBytes { ALPN.offsetOfHTTP11(in: $0) } == nil)
    }

    @Test("certificate names: DNS names folded to lower case, IP literals as addresses, anything else refused")
    func certificateNames() {
        #expect(CertificateName("API.Example.com") == .dns("api.example.com"))
        #expect(CertificateName("api.example.com.") == .dns("api.example.com"))
        #expect(CertificateName("127.0.0.1") == .address("127.0.0.1"))
        #expect(CertificateName("[2001:db8::1]") == .address("2001:db8::1"))
        #expect(CertificateName("2001:db8::1") == .address("2001:db8::1"))
        for bad in [
            "", ".", "a..b", "-a.example", "a-.example", "a_b.example", "a,DNS:b", "a b", "*.example.com", "1.2.3", "[not-v6]",
            String(repeating: "a", count: 64) + ".example", "é.example",
        ] {
            #expect(CertificateName(bad) == nil, "\(bad)")
        }
        #expect(CertificateName(String(repeating: "a", count: 63) + ".example") != nil)
    }

    @Test("leaf validity: backdated by at most an hour, reusable until a quarter of the lifetime is left")
    func leafValidity() {
        let day = LeafValidity(madeAt: 100_000, lifetime: 86400)
        #expect(day.notBefore == 100_000 - 3600)
        #expect(day.notAfter == 100_000 + 86400)
        #expect(day.isReusable(at: 100_000 + 64800 - 1, lifetime: 86400))
        #expect(!day.isReusable(at: 100_000 + 64800, lifetime: 86400))
        #expect(!day.isReusable(at: 100_000 - 3601, lifetime: 86400))  // the clock went back past notBefore
        let short = LeafValidity(madeAt: 100_000, lifetime: 7200)
        #expect(short.notBefore == 100_000 - 1800)
    }

    /// CONTRACT.md "HTTPS for clients": others never read a key; its group only when root owns it
    /// (a Kubernetes Secret mounted with fsGroup: 0440, root, the pod's group).
    @Test("a key file is refused when others may read it, or its group while root does not own it")
    func keyModes() {
        for mode: UInt32 in [0o600, 0o400, 0o700, 0o620] {
            #expect(KeyFilePermissions(mode: mode, owner: 1000).refusal == nil, "\(String(mode, radix: 8))")
        }
        for mode: UInt32 in [0o440, 0o640, 0o600] {
            #expect(KeyFilePermissions(mode: mode, owner: 0).refusal == nil, "\(String(mode, radix: 8))")
        }
        for mode: UInt32 in [0o640, 0o440, 0o460] {
            #expect(KeyFilePermissions(mode: mode, owner: 1000).refusal == "its group may read it and root does not own it")
        }
        for (mode, owner): (UInt32, UInt32) in [(0o604, 1000), (0o644, 0), (0o444, 0), (0o404, 1000)] {
            #expect(KeyFilePermissions(mode: mode, owner: owner).refusal == "others may read it")
        }
        let reason = KeyFilePermissions(mode: 0o640, owner: 1000).reason(for: "/k/key.pem")
        #expect(reason?.hasPrefix("/k/key.pem (mode 0640, owner uid 1000): its group may read it") == true, "\(reason ?? "")")
    }

    @Test("loading a pair: a missing file, a file without a certificate, a group-readable key and a foreign key are typed errors")
    func loadErrors() throws {
        let fixtures = try Fixtures()
        let missing = fixtures.directory.file("missing.pem")
        #expect(throws: TLSSetupError.unreadableFile(path: missing, errno: 2)) {
            _ = try CertificatePair.load(certificateFile: missing, keyFile: fixtures.serverKey)
        }
        #expect(throws: TLSSetupError.noCertificate(path: fixtures.serverKey)) {
            _ = try CertificatePair.load(certificateFile: fixtures.serverKey, keyFile: fixtures.serverKey)
        }
        let certificateAsKey = try fixtures.directory.write("no-key.pem", try String(contentsOfFile: fixtures.serverCertificate, encoding: .utf8), mode: 0o600)
        #expect(throws: TLSSetupError.noPrivateKey(path: certificateAsKey)) {
            _ = try CertificatePair.load(certificateFile: fixtures.serverCertificate, keyFile: certificateAsKey)
        }
        #expect(throws: TLSSetupError.keyDoesNotMatchCertificate(certificatePath: fixtures.serverCertificate, keyPath: fixtures.clientKey)) {
            _ = try CertificatePair.load(certificateFile: fixtures.serverCertificate, keyFile: fixtures.clientKey)
        }
        chmod(fixtures.serverKey, 0o644)
        let open = try #require(KeyFilePermissions.of(fixtures.serverKey))
        #expect(throws: TLSSetupError.keyFileNotPrivate(path: fixtures.serverKey, permissions: open)) {
            _ = try CertificatePair.load(certificateFile: fixtures.serverCertificate, keyFile: fixtures.serverKey)
        }
        #expect(throws: TLSSetupError.unusableClientCA(path: fixtures.clientKey)) {
            _ = try TLSServerContext(certificateFile: fixtures.secondCertificate, keyFile: fixtures.secondKey, clientCAFile: fixtures.clientKey)
        }
    }
}

@Suite("TLS: handshake failure logging")
struct FailureLogLimitTests {
    @Test("one line per address and minute; other addresses are not held back")
    func oncePerMinute() {
        let limit = FailureLogLimit()
        #expect(limit.shouldLog(address: "10.0.0.1", now: 1000))
        #expect(!limit.shouldLog(address: "10.0.0.1", now: 1059.9))
        #expect(limit.shouldLog(address: "10.0.0.2", now: 1010))
        #expect(limit.shouldLog(address: "10.0.0.1", now: 1060))
    }

    @Test("a flood of addresses stays within the capacity")
    func bounded() {
        let limit = FailureLogLimit(capacity: 2)
        #expect(limit.shouldLog(address: "a", now: 0))
        #expect(limit.shouldLog(address: "b", now: 1))
        #expect(limit.shouldLog(address: "c", now: 2))  // full and all recent: forgets everything
        #expect(limit.shouldLog(address: "a", now: 3))
        #expect(!limit.shouldLog(address: "c", now: 4))
    }
}
