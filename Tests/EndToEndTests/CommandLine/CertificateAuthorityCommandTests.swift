import Foundation
import TestSupport
import Testing

/// CONTRACT.md "HTTPS for clients": `tokenproxy ca` (the forward proxy's CA on stdout, made once) and
/// what `check` says about a listener's certificate pair, run as the real binary.
@Suite(.tags(.endToEnd), .timeLimit(.minutes(35))) struct CertificateAuthorityCommandTests {
    static let api = """
        listen: 127.0.0.1:0
        upstream: http://127.0.0.1:9/base
        credentials:
          type: static
          token_env: E2E_TOKEN
        """
    static let env = ["E2E_TOKEN": e2eToken]

    /// The base64 lines of a PEM file: what must never show in any output.
    static func pemBody(_ path: String) throws -> [String] {
        try String(contentsOfFile: path, encoding: .utf8).split(separator: "\n").map(String.init).filter { !$0.hasPrefix("-----") && $0.count >= 16 }
    }

    static func mode(_ path: String) throws -> Int {
        try (FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? NSNumber)?.intValue ?? -1
    }

    /// An EC P-256 certificate and its key, made by openssl (mode 0600 for the key unless told).
    static func makePair(in dir: TempDir, _ name: String) throws -> (cert: String, key: String) {
        let cert = dir.file("\(name).pem")
        let key = dir.file("\(name)-key.pem")
        try FileManager.default.createDirectory(atPath: (cert as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
        let made = try runCommand(
            "/usr/bin/openssl",
            arguments: [
                "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", key, "-out", cert,
                "-subj", "/CN=localhost", "-days", "2",
            ], timeout: 60)
        guard made.status == 0 else { throw HarnessError("openssl req: \(made.stderr)") }
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: key)
        return (cert, key)
    }

    @Test func theCAIsMadeOnceAndPrintedAgain() throws {
        let dir = try TempDir()
        let config = try dir.write(
            "tokenproxy.yaml", Self.api + "\nstore: {path: ./state/tokens.json}\nforward_proxy: {leaf_lifetime: 12h}\n")
        #expect(!FileManager.default.fileExists(atPath: dir.file("state")))

        let first = try ProxyProcess.run(args: ["ca", "--config", config], env: Self.env)
        #expect(first.status == 0, "\(first.output)")
        #expect(first.stdout.hasPrefix("-----BEGIN CERTIFICATE-----"), "\(first.stdout)")
        #expect(first.stdout.hasSuffix("-----END CERTIFICATE-----\n"), "\(first.stdout)")
        #expect(first.stdout.components(separatedBy: "BEGIN CERTIFICATE").count == 2)
        #expect(!first.output.contains("PRIVATE KEY"))

        let certFile = dir.file("state/forward-proxy-ca.pem")
        let keyFile = dir.file("state/forward-proxy-ca-key.pem")
        #expect(try Self.mode(keyFile) & 0o777 == 0o600)
        #expect(try Self.mode(dir.file("state")) & 0o777 == 0o700)
        #expect(try String(contentsOfFile: certFile, encoding: .utf8) == first.stdout)
        let keyLines = try Self.pemBody(keyFile)
        #expect(!keyLines.isEmpty)

        // The second run reads what the first made (TOKENPROXY_CONFIG instead of --config).
        let second = try ProxyProcess.run(args: ["ca"], env: Self.env.merging(["TOKENPROXY_CONFIG": config]) { $1 })
        #expect(second.status == 0, "\(second.output)")
        #expect(second.stdout == first.stdout)
        #expect(try Self.pemBody(keyFile) == keyLines)
        for line in keyLines {
            #expect(!first.output.contains(line) && !second.output.contains(line))
        }
    }

    @Test func theCAIsAnECP256Authority() throws {
        let dir = try TempDir()
        let config = try dir.write("tokenproxy.yaml", Self.api + "\nforward_proxy: {}\n")
        let made = try ProxyProcess.run(args: ["ca", "--config", config], env: Self.env)
        #expect(made.status == 0, "\(made.output)")
        let text = try runCommand("/usr/bin/openssl", arguments: ["x509", "-noout", "-text"], stdin: Data(made.stdout.utf8), timeout: 30)
        #expect(text.status == 0, "\(text.stderr)")
        #expect(text.stdout.contains("CA:TRUE"), "\(text.stdout)")
        #expect(text.stdout.contains("id-ecPublicKey"), "\(text.stdout)")
        #expect(text.stdout.contains("prime256v1") || text.stdout.contains("P-256"), "\(text.stdout)")
        // The default place: the folder of the default store path.
        #expect(FileManager.default.fileExists(atPath: dir.file("state/forward-proxy-ca-key.pem")))
    }

    @Test func aConfiguredCAIsPrintedAsItIs() throws {
        let dir = try TempDir()
        // An EC CA made by openssl (req -x509 marks it CA:TRUE).
        let pair = try Self.makePair(in: dir, "ca/own")
        let config = try dir.write("tokenproxy.yaml", Self.api + "\nforward_proxy: {ca_cert_file: ca/own.pem, ca_key_file: ca/own-key.pem}\n")
        let printed = try ProxyProcess.run(args: ["ca", "--config", config], env: Self.env)
        #expect(printed.status == 0, "\(printed.output)")
        let fingerprint = { (pem: Data) throws -> String in
            try runCommand("/usr/bin/openssl", arguments: ["x509", "-noout", "-fingerprint", "-sha256"], stdin: pem, timeout: 30).stdout
        }
        #expect(try fingerprint(Data(printed.stdout.utf8)) == fingerprint(Data(contentsOf: URL(fileURLWithPath: pair.cert))))
        for line in try Self.pemBody(pair.key) { #expect(!printed.output.contains(line)) }
        #expect(!FileManager.default.fileExists(atPath: dir.file("state/forward-proxy-ca.pem")))
    }

    @Test func withoutForwardProxyOrWithABadFileTheExitIsTwo() throws {
        let dir = try TempDir()
        let plain = try dir.write("plain.yaml", Self.api + "\n")
        let without = try ProxyProcess.run(args: ["ca", "--config", plain], env: Self.env)
        #expect(without.status == 2, "\(without.output)")
        #expect(without.stderr.contains("forward_proxy"), "\(without.stderr)")
        #expect(without.stdout.isEmpty)

        let invalid = try dir.write("invalid.yaml", Self.api + "\nforward_proxy: {leaf_lifetime: 1h}\n")
        let refused = try ProxyProcess.run(args: ["ca", "--config", invalid], env: Self.env)
        #expect(refused.status == 2, "\(refused.output)")
        #expect(refused.stderr.contains("forward_proxy.leaf_lifetime"), "\(refused.stderr)")

        try dir.write("ca/open-key.pem", "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n", mode: 0o644)
        try dir.write("ca/open.pem", "x\n")
        let open = try dir.write("open.yaml", Self.api + "\nforward_proxy: {ca_cert_file: ca/open.pem, ca_key_file: ca/open-key.pem}\n")
        let openResult = try ProxyProcess.run(args: ["ca", "--config", open], env: Self.env)
        #expect(openResult.status == 2, "\(openResult.output)")
        #expect(openResult.stderr.contains("forward_proxy.ca_key_file") && openResult.stderr.contains("0644"), "\(openResult.stderr)")

        let noConfig = try ProxyProcess.run(args: ["ca"], env: Self.env)
        #expect(noConfig.status == 2, "\(noConfig.output)")
    }

    @Test func aCAThatCannotBeReadOrMadeIsExitOneNamingTheFile() throws {
        let dir = try TempDir()
        try dir.write("ca/bad.pem", "not a certificate\n")
        try dir.write("ca/bad-key.pem", "not a key\n", mode: 0o600)
        let bad = try dir.write("bad.yaml", Self.api + "\nforward_proxy: {ca_cert_file: ca/bad.pem, ca_key_file: ca/bad-key.pem}\n")
        let unreadable = try ProxyProcess.run(args: ["ca", "--config", bad], env: Self.env)
        #expect(unreadable.status == 1, "\(unreadable.output)")
        #expect(unreadable.stderr.contains(dir.file("ca/bad")), "\(unreadable.stderr)")
        #expect(unreadable.stdout.isEmpty)

        // Half a CA: the certificate without its key is not replaced by a new CA.
        try dir.write("half/ca.pem", "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n")
        let half = try dir.write("half.yaml", Self.api + "\nforward_proxy: {ca_cert_file: half/ca.pem, ca_key_file: half/ca-key.pem}\n")
        let halfResult = try ProxyProcess.run(args: ["ca", "--config", half], env: Self.env)
        #expect(halfResult.status == 1, "\(halfResult.output)")
        #expect(halfResult.stderr.contains(dir.file("half/ca-key.pem")), "\(halfResult.stderr)")
        #expect(!FileManager.default.fileExists(atPath: dir.file("half/ca-key.pem")))

        // A store folder that cannot be made: its parent is a file.
        try dir.write("blocked", "a file, not a folder\n")
        let blocked = try dir.write("blocked.yaml", Self.api + "\nstore: {path: blocked/state/tokens.json}\nforward_proxy: {}\n")
        let blockedResult = try ProxyProcess.run(args: ["ca", "--config", blocked], env: Self.env)
        #expect(blockedResult.status == 1, "\(blockedResult.output)")
        #expect(blockedResult.stderr.contains(dir.file("blocked")), "\(blockedResult.stderr)")
    }

    @Test func caHasHelp() throws {
        let help = try ProxyProcess.run(args: ["ca", "--help"])
        #expect(help.status == 0, "\(help.output)")
        #expect(help.output.contains("--config"), "\(help.output)")
        #expect(help.output.contains("CA"), "\(help.output)")
        let top = try ProxyProcess.run(args: ["--help"])
        #expect(top.output.split(separator: "\n").contains { $0.trimmingCharacters(in: .whitespaces).hasPrefix("ca ") }, "\(top.output)")
    }

    @Test func checkRefusesAListenerKeyOthersCanReadNamingFileAndMode() throws {
        let dir = try TempDir()
        let pair = try Self.makePair(in: dir, "tls/server")
        try FileManager.default.setAttributes([.posixPermissions: 0o644], ofItemAtPath: pair.key)
        let config = try dir.write("tokenproxy.yaml", Self.api + "\ntls: {cert_file: tls/server.pem, key_file: tls/server-key.pem}\n")
        for command in ["check", "serve"] {
            let result = try ProxyProcess.run(args: [command, "--config", config], env: Self.env, timeout: 30)
            #expect(result.status == 2, "\(command): \(result.output)")
            #expect(result.stderr.contains("tls.key_file"), "\(command): \(result.stderr)")
            #expect(result.stderr.contains(pair.key) && result.stderr.contains("0644"), "\(command): \(result.stderr)")
            for line in try Self.pemBody(pair.key) { #expect(!result.output.contains(line)) }
        }
    }

    @Test func checkLoadsTheListenerPairAndNamesTheFileAtFault() throws {
        let dir = try TempDir()
        let server = try Self.makePair(in: dir, "tls/server")
        let other = try Self.makePair(in: dir, "tls/other")
        try dir.write("tls/empty.pem", "no certificate here\n")

        let good = try dir.write("good.yaml", Self.api + "\ntls: {cert_file: tls/server.pem, key_file: tls/server-key.pem}\n")
        let accepted = try ProxyProcess.run(args: ["check", "--config", good], env: Self.env)
        #expect(accepted.status == 0, "\(accepted.output)")
        #expect(accepted.stdout.contains("tls.cert_file: \(server.cert)"), "\(accepted.stdout)")
        #expect(accepted.stdout.contains("tls.key_file: \(server.key)"), "\(accepted.stdout)")
        for line in try Self.pemBody(server.key) { #expect(!accepted.output.contains(line)) }

        let mismatched = try dir.write("mismatched.yaml", Self.api + "\ntls: {cert_file: tls/server.pem, key_file: tls/other-key.pem}\n")
        let wrongKey = try ProxyProcess.run(args: ["check", "--config", mismatched], env: Self.env)
        #expect(wrongKey.status == 2, "\(wrongKey.output)")
        #expect(wrongKey.stderr.contains("tls.key_file"), "\(wrongKey.stderr)")
        for line in try Self.pemBody(other.key) { #expect(!wrongKey.output.contains(line)) }

        let notACertificate = try dir.write("empty.yaml", Self.api + "\ntls: {cert_file: tls/empty.pem, key_file: tls/server-key.pem}\n")
        let noCertificate = try ProxyProcess.run(args: ["check", "--config", notACertificate], env: Self.env)
        #expect(noCertificate.status == 2, "\(noCertificate.output)")
        #expect(noCertificate.stderr.contains("tls.cert_file"), "\(noCertificate.stderr)")

        let badClientCA = try dir.write(
            "clients.yaml", Self.api + "\ntls: {cert_file: tls/server.pem, key_file: tls/server-key.pem, client_ca_file: tls/empty.pem}\n")
        let noClientCA = try ProxyProcess.run(args: ["check", "--config", badClientCA], env: Self.env)
        #expect(noClientCA.status == 2, "\(noClientCA.output)")
        #expect(noClientCA.stderr.contains("tls.client_ca_file"), "\(noClientCA.stderr)")
        let goodClientCA = try dir.write(
            "mtls.yaml", Self.api + "\ntls: {cert_file: tls/server.pem, key_file: tls/server-key.pem, client_ca_file: tls/other.pem}\n")
        #expect(try ProxyProcess.run(args: ["check", "--config", goodClientCA], env: Self.env).status == 0)

        let routed = try dir.write(
            "routed.yaml",
            """
            routes:
              - name: billing
                match: {listen: 127.0.0.1:0}
                upstream: http://127.0.0.1:9/base
                credentials: {type: static, token_env: E2E_TOKEN}
                tls: {cert_file: tls/server.pem, key_file: tls/other-key.pem}
            """)
        let routeResult = try ProxyProcess.run(args: ["check", "--config", routed], env: Self.env)
        #expect(routeResult.status == 2, "\(routeResult.output)")
        #expect(routeResult.stderr.contains("routes[0].tls.key_file"), "\(routeResult.stderr)")
    }
}
