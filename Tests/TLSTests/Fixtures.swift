import Foundation
import TLS
import TestSupport

/// Certificates made by the `openssl` command (independent of the module under test): a server CA
/// with two server certificates for localhost and 127.0.0.1 (serials 1001 and 2002), a client CA with
/// one client certificate, and a client certificate from the wrong CA.
struct Fixtures {
    let directory: TempDir
    var caFile: String { directory.file("ca.pem") }
    var serverCertificate: String { directory.file("server.pem") }
    var serverKey: String { directory.file("server-key.pem") }
    var secondCertificate: String { directory.file("second.pem") }
    var secondKey: String { directory.file("second-key.pem") }
    var clientCAFile: String { directory.file("client-ca.pem") }
    var clientCertificate: String { directory.file("client.pem") }
    var clientKey: String { directory.file("client-key.pem") }
    var strangerCertificate: String { directory.file("stranger.pem") }
    var strangerKey: String { directory.file("stranger-key.pem") }

    /// A test server with the server certificate and key, and no more settings.
    func server() throws -> TLSTestServer {
        try TLSTestServer(context: TLSServerContext(certificateFile: serverCertificate, keyFile: serverKey))
    }

    init() throws {
        directory = try TempDir(prefix: "tls-fixtures")
        try makeAuthority("ca")
        try makeAuthority("client-ca")
        let server = "subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n"
        try makeLeaf("server", signer: "ca", serial: "0x1001", extensions: server)
        try makeLeaf("second", signer: "ca", serial: "0x2002", extensions: server)
        try makeLeaf("client", signer: "client-ca", serial: "0x3003", extensions: "extendedKeyUsage=clientAuth\n")
        try makeLeaf("stranger", signer: "ca", serial: "0x4004", extensions: "extendedKeyUsage=clientAuth\n")
    }

    private func makeAuthority(_ name: String) throws {
        try openssl([
            "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-days", "2",
            "-keyout", directory.file("\(name)-key.pem"), "-out", directory.file("\(name).pem"), "-subj", "/CN=test \(name)",
            "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign",
        ])
    }

    private func makeLeaf(_ name: String, signer: String, serial: String, extensions: String) throws {
        let extensionFile = try directory.write("\(name).ext", extensions)
        try openssl([
            "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", directory.file("\(name)-key.pem"),
            "-out", directory.file("\(name).csr"), "-subj", "/CN=\(name)",
        ])
        try openssl([
            "x509", "-req", "-in", directory.file("\(name).csr"), "-CA", directory.file("\(signer).pem"), "-CAkey",
            directory.file("\(signer)-key.pem"), "-set_serial", serial, "-days", "2", "-out", directory.file("\(name).pem"),
            "-extfile", extensionFile,
        ])
        chmod(directory.file("\(name)-key.pem"), 0o600)
    }

    private func openssl(_ arguments: [String]) throws {
        let result = try runCommand("openssl", arguments: arguments)
        guard result.status == 0 else { throw HarnessError("openssl \(arguments.joined(separator: " ")): \(result.output)") }
    }
}

/// Runs curl against the test server; `arguments` come before the URL.
func curl(_ arguments: [String], url: String) throws -> CommandResult {
    try runCommand("curl", arguments: ["-sS", "--max-time", "10"] + arguments + [url], timeout: 20)
}

/// The serial number `openssl x509 -serial` prints for the first certificate in `pem`.
func serialNumber(ofPEM pem: String) throws -> String {
    let result = try runCommand("openssl", arguments: ["x509", "-noout", "-serial"], stdin: Data(pem.utf8))
    return result.stdout.trimmingCharacters(in: .whitespacesAndNewlines).replacingOccurrences(of: "serial=", with: "")
}
