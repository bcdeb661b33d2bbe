import Foundation
import Sockets
import TLS
import TestSupport
import Testing

/// The TLS server context and sessions against real clients (curl, openssl s_client) as processes.
@Suite("TLS listener: handshakes with real clients", .serialized)
struct HandshakeTests {
    @Test("curl over TLS 1.2 and 1.3 negotiates ALPN http/1.1, also when it offers h2")
    func versionsAndALPN() throws {
        let fixtures = try Fixtures()
        let server = try fixtures.server()
        defer { server.stop() }
        for (flags, version) in [(["--tlsv1.2", "--tls-max", "1.2"], "tls12"), (["--tlsv1.3"], "tls13")] {
            let result = try curl(["-v", "--cacert", fixtures.caFile, "--http2"] + flags, url: server.localhostURL)
            #expect(result.status == 0, "\(result.output)")
            #expect(result.stdout == "version=\(version) alpn=http/1.1 sni=localhost\n")
            #expect(result.stderr.contains("ALPN: server accepted http/1.1"), "\(result.stderr)")
        }
    }

    @Test("keep-alive: two requests on one connection take one handshake")
    func keepAlive() throws {
        let fixtures = try Fixtures()
        let server = try fixtures.server()
        defer { server.stop() }
        let result = try runCommand(
            "curl", arguments: ["-sS", "--max-time", "10", "--cacert", fixtures.caFile, server.localhostURL, server.localhostURL], timeout: 20)
        #expect(result.status == 0, "\(result.output)")
        #expect(result.stdout.components(separatedBy: "alpn=http/1.1").count == 3)
        #expect(server.events.filter { if case .handshake = $0 { true } else { false } }.count == 1)
    }

    @Test("a client below TLS 1.2, and plain HTTP on the TLS port, fail with typed reasons")
    func refusedClients() throws {
        let fixtures = try Fixtures()
        let server = try fixtures.server()
        defer { server.stop() }
        let old = try runCommand(
            "openssl", arguments: ["s_client", "-connect", "127.0.0.1:\(server.port)", "-tls1_1", "-cipher", "DEFAULT@SECLEVEL=0"], stdin: Data(),
            timeout: 20)
        #expect(old.status != 0)
        #expect(server.waitFor { $0 == .failure(.noSharedVersion) } != nil, "\(server.events) \(old.output)")
        let h2Only = try runCommand(
            "openssl", arguments: ["s_client", "-connect", "127.0.0.1:\(server.port)", "-alpn", "h2", "-CAfile", fixtures.caFile], stdin: Data(),
            timeout: 20)
        #expect(h2Only.status != 0)
        #expect(server.waitFor { $0 == .failure(.noApplicationProtocol) } != nil, "\(server.events) \(h2Only.output)")
        let plain = try curl([], url: "http://127.0.0.1:\(server.port)/")
        #expect(plain.status != 0)
        #expect(server.waitFor { $0 == .failure(.notTLS) } != nil, "\(server.events)")
    }

    @Test("the SNI hook refuses a name: the handshake fails with unrecognized_name and no certificate is shown")
    func wrongServerName() throws {
        let fixtures = try Fixtures()
        let server = try TLSTestServer(
            context: TLSServerContext(certificateFile: fixtures.serverCertificate, keyFile: fixtures.serverKey),
            serverName: { name in name == "localhost" ? .useDefault : .refuse })
        defer { server.stop() }
        func sClient(_ name: String) throws -> CommandResult {
            try runCommand(
                "openssl", arguments: ["s_client", "-connect", "127.0.0.1:\(server.port)", "-servername", name, "-CAfile", fixtures.caFile],
                stdin: Data(), timeout: 20)
        }
        let refused = try sClient("evil.example")
        #expect(refused.status != 0)
        #expect(!refused.stdout.contains("BEGIN CERTIFICATE"))
        #expect(refused.output.contains("unrecognized name"), "\(refused.output)")
        #expect(server.waitFor { $0 == .failure(.serverNameRefused("evil.example")) } != nil, "\(server.events)")
        let accepted = try sClient("localhost")
        #expect(accepted.stdout.contains("BEGIN CERTIFICATE"))
        #expect(accepted.stdout.contains("Verify return code: 0 (ok)"), "\(accepted.output)")
    }

    @Test("mTLS: a client certificate from client_ca_file is accepted; none, or one from another CA, is refused")
    func clientCertificates() throws {
        let fixtures = try Fixtures()
        let context = try TLSServerContext(
            certificateFile: fixtures.serverCertificate, keyFile: fixtures.serverKey, clientCAFile: fixtures.clientCAFile)
        #expect(context.requiresClientCertificate)
        let server = try TLSTestServer(context: context)
        defer { server.stop() }
        let url = server.localhostURL
        for version in ["1.2", "1.3"] {
            let pinned = ["--cacert", fixtures.caFile, "--tlsv\(version)", "--tls-max", version]
            let accepted = try curl(pinned + ["--cert", fixtures.clientCertificate, "--key", fixtures.clientKey], url: url)
            #expect(accepted.status == 0, "\(accepted.output)")
            #expect(accepted.stdout.hasPrefix("version="))
            let without = try curl(pinned, url: url)
            #expect(without.status != 0)
            #expect(without.stdout.isEmpty)
            let stranger = try curl(pinned + ["--cert", fixtures.strangerCertificate, "--key", fixtures.strangerKey], url: url)
            #expect(stranger.status != 0)
            #expect(stranger.stdout.isEmpty)
        }
        #expect(server.events.filter { $0 == .failure(.clientCertificateMissing) }.count == 2, "\(server.events)")
        #expect(server.events.filter { $0 == .failure(.clientCertificateRejected) }.count == 2, "\(server.events)")
    }

    @Test("a reloaded pair: new handshakes see the new serial, a session made before keeps working with the old one")
    func reload() throws {
        let fixtures = try Fixtures()
        let context = try TLSServerContext(certificateFile: fixtures.serverCertificate, keyFile: fixtures.serverKey)
        #expect(context.certificate.serialNumber == "1001")
        let server = try TLSTestServer(context: context)
        defer { server.stop() }
        let old = try ChildProcess(
            "openssl", arguments: ["s_client", "-connect", "127.0.0.1:\(server.port)", "-servername", "localhost", "-CAfile", fixtures.caFile],
            environment: childEnvironment([:]), withStdin: true)
        defer { old.stop() }
        let deadline = Date().addingTimeInterval(10)
        let oldPEM = old.stdout.wait(until: deadline) { text -> String? in
            guard let start = text.range(of: "-----BEGIN CERTIFICATE-----"), let end = text.range(of: "-----END CERTIFICATE-----") else { return nil }
            return text[start.lowerBound..<end.upperBound] + "\n"
        }
        #expect(try serialNumber(ofPEM: try #require(oldPEM)) == "1001")
        #expect(old.stdout.wait(until: deadline) { $0.contains("Verify return code: 0") ? true : nil } == true)

        try context.reloadCertificate(certificateFile: fixtures.secondCertificate, keyFile: fixtures.secondKey)
        #expect(context.certificate.serialNumber == "2002")
        let fresh = try runCommand(
            "openssl", arguments: ["s_client", "-connect", "127.0.0.1:\(server.port)", "-servername", "localhost", "-CAfile", fixtures.caFile],
            stdin: Data(), timeout: 20)
        #expect(try serialNumber(ofPEM: fresh.stdout) == "2002")

        old.writeStdin(Array("GET / HTTP/1.1\r\nHost: localhost\r\n\r\n".utf8))
        #expect(old.stdout.wait(until: Date().addingTimeInterval(10)) { $0.contains("sni=localhost") ? true : nil } == true, "\(old.stdout.text)")
    }

    @Test("a reload that fails keeps the current pair")
    func failedReload() throws {
        let fixtures = try Fixtures()
        let context = try TLSServerContext(certificateFile: fixtures.serverCertificate, keyFile: fixtures.serverKey)
        #expect(throws: TLSSetupError.keyDoesNotMatchCertificate(certificatePath: fixtures.secondCertificate, keyPath: fixtures.serverKey)) {
            try context.reloadCertificate(certificateFile: fixtures.secondCertificate, keyFile: fixtures.serverKey)
        }
        #expect(context.certificate.serialNumber == "1001")
    }

    @Test("a client that connects and sends nothing, or half a ClientHello, does not delay another client's handshake")
    func stalledHandshake() throws {
        let fixtures = try Fixtures()
        let server = try fixtures.server()
        defer { server.stop() }
        let silent = try RawSocket(port: server.port)
        let partial = try RawSocket(port: server.port)
        partial.send([0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00])  // a record header and the start of a ClientHello
        let started = Date()
        let result = try curl(["--cacert", fixtures.caFile], url: server.localhostURL)
        #expect(result.status == 0, "\(result.output)")
        #expect(Date().timeIntervalSince(started) < 5)
        #expect(server.events.count == 1)
        // A connection closed before its ClientHello, or in the middle of it, is no failed handshake
        // (CONTRACT.md: nothing to log).
        silent.close()
        partial.close()
        #expect(try curl(["--cacert", fixtures.caFile], url: server.localhostURL).status == 0)
        #expect(server.waitFor(seconds: 1) { if case .handshake = $0 { false } else { true } } == nil, "\(server.events)")
    }
}

/// A plain TCP client socket that sends what it is told and nothing else.
struct RawSocket {
    let fd: Int32

    init(port: Int) throws {
        fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard result == 0 else { throw HarnessError("connect: errno \(errno)") }
    }

    func send(_ bytes: [UInt8]) { _ = bytes.withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) } }

    func close() { Glibc.close(fd) }
}
