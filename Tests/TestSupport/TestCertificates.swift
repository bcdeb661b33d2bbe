import Foundation

/// A throwaway certificate authority made with the `openssl` command line in a folder of its own
/// (EC P-256, key files 0600), and the certificates it issues: server certificates for the TLS
/// listener and the TLS upstreams, client certificates for mTLS. Nothing here is a secret worth
/// keeping; the folder goes away with the object.
public final class TestCA: Sendable {
    public let directory: TempDir
    /// The CA's certificate (PEM): what a client trusts, or a listener's `client_ca_file`.
    public let certificate: String
    private let key: String

    public init(name: String = "tokenproxy test CA") throws {
        directory = try TempDir(prefix: "test-ca")
        key = try Self.makeKey(directory.file("ca-key.pem"))
        certificate = directory.file("ca.pem")
        try Self.openssl([
            "req", "-x509", "-new", "-key", key, "-subj", "/CN=\(name)", "-days", "3", "-out", certificate,
            "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign",
        ])
    }

    /// What a certificate is for (its extendedKeyUsage).
    public enum Purpose: String, Sendable {
        case server = "serverAuth"
        case client = "clientAuth"
    }

    /// A certificate and its key (0600), issued by this CA.
    public struct Issued: Sendable {
        public let certificate: String
        public let key: String
    }

    /// Issues a certificate for `names` (DNS names or IP addresses, in subjectAltName), with a
    /// random serial, into `directory` (this CA's folder when nil) as `<file>.pem` and `<file>-key.pem`.
    public func issue(
        _ names: [String] = ["localhost", "127.0.0.1"],
        purpose: Purpose = .server,
        file: String = "leaf-\(UUID().uuidString.prefix(8).lowercased())",
        in directory: TempDir? = nil
    ) throws -> Issued {
        let folder = directory ?? self.directory
        for place in [folder, self.directory] {
            try FileManager.default.createDirectory(
                at: place.url.appendingPathComponent(file).deletingLastPathComponent(), withIntermediateDirectories: true)
        }
        let leafKey = try Self.makeKey(folder.file("\(file)-key.pem"))
        let request = self.directory.file("\(file).csr")
        try Self.openssl(["req", "-new", "-key", leafKey, "-subj", "/CN=\(names.first ?? "test")", "-out", request])
        let alternatives = names.map { name in
            name.allSatisfy { $0.isNumber || $0 == "." || $0 == ":" } ? "IP:\(name)" : "DNS:\(name)"
        }
        let extensions = try self.directory.write(
            "\(file).ext",
            """
            basicConstraints = critical, CA:FALSE
            keyUsage = critical, digitalSignature
            extendedKeyUsage = \(purpose.rawValue)
            subjectAltName = \(alternatives.joined(separator: ", "))
            authorityKeyIdentifier = keyid
            subjectKeyIdentifier = hash

            """)
        let serial = "0x" + UUID().uuidString.replacingOccurrences(of: "-", with: "").prefix(16).lowercased()
        let leaf = folder.file("\(file).pem")
        try Self.openssl([
            "x509", "-req", "-in", request, "-CA", certificate, "-CAkey", key, "-set_serial", serial, "-days", "2",
            "-extfile", extensions, "-out", leaf,
        ])
        return Issued(certificate: leaf, key: leafKey)
    }

    /// A new EC P-256 key at `path`, mode 0600.
    private static func makeKey(_ path: String) throws -> String {
        try openssl(["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", path])
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: path)
        return path
    }

    /// Runs the `openssl` command line; throws with its stderr when it fails.
    @discardableResult
    public static func openssl(_ arguments: [String], stdin: Data? = nil) throws -> CommandResult {
        let result = try runCommand("openssl", arguments: arguments, stdin: stdin, timeout: 60)
        guard result.status == 0 else { throw HarnessError("openssl \(arguments.joined(separator: " ")): \(result.stderr)") }
        return result
    }
}

/// The SHA-256 fingerprint of a PEM certificate (the first in `pem`), lowercase hex without colons.
public func certificateFingerprint(pem: String) throws -> String {
    let result = try TestCA.openssl(["x509", "-noout", "-fingerprint", "-sha256"], stdin: Data(pem.utf8))
    // "sha256 Fingerprint=AB:CD:..."
    guard let equals = result.stdout.firstIndex(of: "=") else { throw HarnessError("no fingerprint in: \(result.stdout)") }
    return result.stdout[result.stdout.index(after: equals)...]
        .trimmingCharacters(in: .whitespacesAndNewlines).replacingOccurrences(of: ":", with: "").lowercased()
}

/// The fingerprint of the certificate file at `path`.
public func certificateFingerprint(file path: String) throws -> String {
    try certificateFingerprint(pem: String(contentsOfFile: path, encoding: .utf8))
}

/// The fingerprint of the certificate a TLS server on 127.0.0.1:`port` presents to a new
/// handshake, read with `openssl s_client` (no verification: only what is presented counts).
public func presentedCertificateFingerprint(port: Int, serverName: String = "localhost") throws -> String {
    let result = try runCommand(
        "openssl", arguments: ["s_client", "-connect", "127.0.0.1:\(port)", "-servername", serverName], stdin: Data(), timeout: 30)
    guard let begin = result.stdout.range(of: "-----BEGIN CERTIFICATE-----"),
        let end = result.stdout.range(of: "-----END CERTIFICATE-----", range: begin.upperBound..<result.stdout.endIndex)
    else {
        throw HarnessError("openssl s_client saw no certificate on port \(port): \(result.stderr.suffix(500))")
    }
    return try certificateFingerprint(pem: String(result.stdout[begin.lowerBound..<end.upperBound]))
}
