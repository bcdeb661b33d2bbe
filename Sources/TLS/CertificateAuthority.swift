internal import COpenSSL
import Sockets

/// The forward proxy's local CA: an EC P-256 key and a self-signed certificate that signs a short-lived
/// certificate for each intercepted host (CONTRACT.md, "HTTPS for clients"). Built with OpenSSL's X509
/// API, so a minted leaf is an OpenSSL object a handshake uses as it is (docs/ARCHITECTURE.md, "TLS").
// @unchecked: the certificate and key are only read after init (signing reads the key), which OpenSSL
// allows from several threads at once.
public final class CertificateAuthority: @unchecked Sendable {
    let pair: CertificatePair
    public static let lifetime: Double = 10 * 365 * 86400

    private init(pair: CertificatePair) { self.pair = pair }

    /// A new CA valid from now for `lifetime` seconds.
    public static func create(commonName: String = "tokenproxy local CA", now: Double = Syscall.wallClock(), lifetime: Double = lifetime)
        throws(TLSSetupError) -> CertificateAuthority
    {
        // RFC 5280 §4.2.1.9 and §4.2.1.3: a CA that signs end-entity certificates only.
        let pair = try makePair(
            subject: [("O", "tokenproxy"), ("CN", commonName)], issuer: nil, notBefore: now - 3600, notAfter: now + lifetime,
            extensions: [
                (NID_basic_constraints, "critical,CA:TRUE,pathlen:0"), (NID_key_usage, "critical,keyCertSign,cRLSign"),
                (NID_subject_key_identifier, "hash"),
            ], alternativeName: nil)
        return CertificateAuthority(pair: pair)
    }

    /// Reads a CA's certificate and key (PEM); the key file must not be readable by group or others.
    public static func load(certificateFile: String, keyFile: String) throws(TLSSetupError) -> CertificateAuthority {
        let pair = try CertificatePair.load(certificateFile: certificateFile, keyFile: keyFile)
        guard X509_check_ca(pair.certificate) >= 1 else { throw .notAnAuthority(path: certificateFile) }
        return CertificateAuthority(pair: pair)
    }

    /// The CA in these two files, made and written first when neither exists (the key with mode 0600).
    /// One file without the other is an error: a lost key is never silently replaced.
    /// Two processes starting at once must hold a lock around this (the caller's `FileLock`).
    public static func loadOrCreate(certificateFile: String, keyFile: String) throws(TLSSetupError) -> CertificateAuthority {
        switch (FileKind.of(certificateFile) != nil, FileKind.of(keyFile) != nil) {
        case (true, true):
            return try load(certificateFile: certificateFile, keyFile: keyFile)
        case (false, false):
            let authority = try create()
            try authority.write(certificateFile: certificateFile, keyFile: keyFile)
            return authority
        case (true, false):
            throw .incompleteAuthority(missing: keyFile)
        case (false, true):
            throw .incompleteAuthority(missing: certificateFile)
        }
    }

    /// Writes the key (mode 0600) and then the certificate (0644), each atomically.
    public func write(certificateFile: String, keyFile: String) throws(TLSSetupError) {
        let key = PEM.write { PEM_write_bio_PrivateKey($0, pair.key, nil, nil, 0, nil, nil) }
        do { try AtomicFile.write(key, to: keyFile, mode: 0o600) } catch { throw .cannotWrite(path: keyFile, reason: "\(error)") }
        do { try AtomicFile.write(certificatePEM, to: certificateFile, mode: 0o644) } catch {
            throw .cannotWrite(path: certificateFile, reason: "\(error)")
        }
    }

    /// The CA certificate (PEM), for clients to trust (`tokenproxy ca`).
    public var certificatePEM: [UInt8] { pair.certificatePEM }

    public var serialNumber: String { pair.serialNumber }

    /// A certificate for `name` with a key of its own, signed by this CA: a TLS server certificate
    /// (RFC 5280 §4.2.1.3 digitalSignature, §4.2.1.12 serverAuth) naming the host only in its
    /// subjectAltName, which is what clients match (RFC 6125 §6.4.4).
    public func issue(for name: CertificateName, validity: LeafValidity) throws(TLSSetupError) -> CertificatePair {
        // A subject commonName holds at most 64 characters (RFC 5280 Appendix A, ub-common-name).
        let subject = name.text.utf8.count <= 64 ? [("O", "tokenproxy"), ("CN", name.text)] : [("O", "tokenproxy")]
        return try Self.makePair(
            subject: subject, issuer: pair, notBefore: validity.notBefore, notAfter: validity.notAfter,
            extensions: [
                (NID_basic_constraints, "critical,CA:FALSE"), (NID_key_usage, "critical,digitalSignature"),
                (NID_ext_key_usage, "serverAuth"), (NID_subject_key_identifier, "hash"),
                (NID_authority_key_identifier, "keyid:always"),
            ], alternativeName: name)
    }

    /// A new key and a certificate for it, signed by `issuer` (nil: by the new key itself).
    private static func makePair(
        subject: [(String, String)], issuer: CertificatePair?, notBefore: Double, notAfter: Double, extensions: [(Int32, String)],
        alternativeName: CertificateName?
    ) throws(TLSSetupError) -> CertificatePair {
        let key = try newKey()
        let certificate: OpaquePointer
        do {
            certificate = try X509Builder.sign(
                subject: subject, publicKey: key, issuer: issuer?.certificate, issuerKey: issuer?.key ?? key,
                notBefore: notBefore, notAfter: notAfter, extensions: extensions, alternativeName: alternativeName)
        } catch {
            EVP_PKEY_free(key)
            throw error
        }
        guard let chain = tp_x509_stack_new() else { preconditionFailure("sk_X509_new_null: out of memory") }
        return CertificatePair(certificate: certificate, key: key, chain: chain)
    }

    /// An EC P-256 key (FIPS 186-4; what every TLS client accepts, and cheap to sign with).
    static func newKey() throws(TLSSetupError) -> OpaquePointer {
        guard let key = tp_ec_p256_generate() else { throw OpenSSLErrors.setup("EVP_EC_gen") }
        return key
    }
}

/// One X.509 v3 certificate assembled and signed through OpenSSL's API (no ASN.1 written here).
enum X509Builder {
    /// The signed certificate (X509*, owned by the caller). `issuer` nil: self-signed.
    static func sign(
        subject: [(String, String)], publicKey: OpaquePointer, issuer: OpaquePointer?, issuerKey: OpaquePointer,
        notBefore: Double, notAfter: Double, extensions: [(Int32, String)], alternativeName: CertificateName?
    ) throws(TLSSetupError) -> OpaquePointer {
        guard let certificate = X509_new() else { throw OpenSSLErrors.setup("X509_new") }
        guard build(certificate, subject, publicKey, issuer, notBefore, notAfter, extensions, alternativeName) else {
            X509_free(certificate)
            throw OpenSSLErrors.setup("X509 assembly")
        }
        guard X509_sign(certificate, issuerKey, EVP_sha256()) > 0 else {
            X509_free(certificate)
            throw OpenSSLErrors.setup("X509_sign")
        }
        return certificate
    }

    private static func build(
        _ certificate: OpaquePointer, _ subject: [(String, String)], _ publicKey: OpaquePointer, _ issuer: OpaquePointer?,
        _ notBefore: Double, _ notAfter: Double, _ extensions: [(Int32, String)], _ alternativeName: CertificateName?
    ) -> Bool {
        guard X509_set_version(certificate, Int(X509_VERSION_3)) == 1, setRandomSerial(certificate),
            ASN1_TIME_set(X509_getm_notBefore(certificate), time_t(notBefore)) != nil,
            ASN1_TIME_set(X509_getm_notAfter(certificate), time_t(notAfter)) != nil,
            X509_set_pubkey(certificate, publicKey) == 1, let name = X509_get_subject_name(certificate)
        else { return false }
        for (field, value) in subject where tp_x509_name_add(name, field, value) != 1 { return false }
        guard X509_set_issuer_name(certificate, issuer.map { X509_get_subject_name($0) } ?? name) == 1 else { return false }
        // The context lets "hash" and "keyid" find the subject's and the issuer's keys (x509v3_config(5)).
        var context = X509V3_CTX()
        X509V3_set_ctx(&context, issuer ?? certificate, certificate, nil, nil, 0)
        for (nid, value) in extensions {
            guard let made = X509V3_EXT_conf_nid(nil, &context, nid, value) else { return false }
            defer { X509_EXTENSION_free(made) }
            guard X509_add_ext(certificate, made, -1) == 1 else { return false }
        }
        if let alternativeName {
            let isAddress: Int32 = if case .address = alternativeName { 1 } else { 0 }
            guard tp_x509_add_subject_alt_name(certificate, alternativeName.text, isAddress) == 1 else { return false }
        }
        return true
    }

    /// A positive serial of 127 random bits, top bit set so it is never zero (RFC 5280 §4.1.2.2: unique
    /// per CA, at most 20 octets; random so that two CAs' leaves never collide).
    private static func setRandomSerial(_ certificate: OpaquePointer) -> Bool {
        guard let bignum = BN_new() else { return false }
        defer { BN_free(bignum) }
        return BN_rand(bignum, 127, BN_RAND_TOP_ONE, BN_RAND_BOTTOM_ANY) == 1
            && BN_to_ASN1_INTEGER(bignum, X509_get_serialNumber(certificate)) != nil
    }
}
