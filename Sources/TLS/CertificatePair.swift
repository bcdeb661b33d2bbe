internal import COpenSSL
import Sockets

/// A certificate (with its chain) and its private key, as OpenSSL objects, ready for a handshake.
/// Immutable once made: sessions take their own references (SSL_use_cert_and_key), so replacing the
/// pair a context hands out never touches a live session.
// @unchecked: the OpenSSL objects are only read after init, which OpenSSL allows from any thread.
public final class CertificatePair: @unchecked Sendable {
    /// X509*, EVP_PKEY*, and STACK_OF(X509)* (the intermediates, possibly empty).
    let certificate: OpaquePointer
    let key: OpaquePointer
    let chain: OpaquePointer

    /// Takes ownership of the three objects.
    init(certificate: OpaquePointer, key: OpaquePointer, chain: OpaquePointer) {
        self.certificate = certificate
        self.key = key
        self.chain = chain
    }

    deinit {
        X509_free(certificate)
        EVP_PKEY_free(key)
        tp_x509_stack_free(chain)
    }

    /// Reads a PEM certificate chain (leaf first) and its PEM private key. The key file must be one
    /// `KeyFilePermissions` accepts; a key protected by a passphrase counts as no key (no prompt).
    public static func load(certificateFile: String, keyFile: String) throws(TLSSetupError) -> CertificatePair {
        let certificatePEM = try readFile(certificateFile)
        if let permissions = KeyFilePermissions.of(keyFile), permissions.refusal != nil {
            throw .keyFileNotPrivate(path: keyFile, permissions: permissions)
        }
        let keyPEM = try readFile(keyFile)
        let certificates = PEM.certificates(certificatePEM)
        guard let leaf = certificates.first else { throw .noCertificate(path: certificateFile) }
        guard let chain = tp_x509_stack_new() else {
            for certificate in certificates { X509_free(certificate) }
            throw OpenSSLErrors.setup("sk_X509_new_null")
        }
        for intermediate in certificates.dropFirst() { _ = tp_x509_stack_push(chain, intermediate) }
        guard let key = PEM.privateKey(keyPEM) else {
            X509_free(leaf)
            tp_x509_stack_free(chain)
            throw .noPrivateKey(path: keyFile)
        }
        let pair = CertificatePair(certificate: leaf, key: key, chain: chain)
        guard X509_check_private_key(leaf, key) == 1 else {
            ERR_clear_error()
            throw .keyDoesNotMatchCertificate(certificatePath: certificateFile, keyPath: keyFile)
        }
        return pair
    }

    /// The certificate's serial number in upper-case hex (as `openssl x509 -serial` prints it), for logs.
    public var serialNumber: String {
        guard let bignum = ASN1_INTEGER_to_BN(X509_get0_serialNumber(certificate), nil) else { return "" }
        defer { BN_free(bignum) }
        guard let hex = BN_bn2hex(bignum) else { return "" }
        defer { CRYPTO_free(hex, #file, #line) }
        return String(cString: hex)
    }

    /// The certificate alone, PEM.
    public var certificatePEM: [UInt8] { PEM.write { PEM_write_bio_X509($0, certificate) } }

    static func readFile(_ path: String) throws(TLSSetupError) -> [UInt8] {
        switch SmallFile.read(path, limit: 1 << 20) {
        case .success(let bytes): return bytes
        case .failure(let failure): throw .unreadableFile(path: path, errno: failure.code)
        }
    }
}

/// PEM in and out through memory BIOs.
enum PEM {
    /// Every certificate in `bytes`, in order; ownership passes to the caller.
    static func certificates(_ bytes: [UInt8]) -> [OpaquePointer] {
        withReader(bytes) { bio in
            var found: [OpaquePointer] = []
            while let certificate = PEM_read_bio_X509(bio, nil, nil, nil) { found.append(certificate) }
            ERR_clear_error()  // the read past the last certificate leaves "no start line" behind
            return found
        }
    }

    /// The first private key in `bytes`; nil when there is none or it is encrypted.
    static func privateKey(_ bytes: [UInt8]) -> OpaquePointer? {
        withReader(bytes) { bio in
            // A passphrase callback that answers nothing, so OpenSSL never prompts on a terminal.
            let key = PEM_read_bio_PrivateKey(bio, nil, { _, _, _, _ in 0 }, nil)
            ERR_clear_error()
            return key
        }
    }

    static func withReader<T>(_ bytes: [UInt8], _ body: (OpaquePointer) -> T) -> T {
        bytes.withUnsafeBytes { raw in
            guard let bio = BIO_new_mem_buf(raw.baseAddress, Int32(raw.count)) else { preconditionFailure("BIO_new_mem_buf: out of memory") }
            defer { BIO_free(bio) }
            return body(bio)
        }
    }

    /// What `body` writes into a memory BIO.
    static func write(_ body: (OpaquePointer) -> Int32) -> [UInt8] {
        guard let bio = BIO_new(BIO_s_mem()) else { preconditionFailure("BIO_new: out of memory") }
        defer { BIO_free(bio) }
        guard body(bio) == 1 else {
            ERR_clear_error()
            return []
        }
        var data: UnsafeMutablePointer<CChar>?
        let count = tp_bio_mem_data(bio, &data)
        guard let data, count > 0 else { return [] }
        return Array(UnsafeRawBufferPointer(start: data, count: count))
    }
}
