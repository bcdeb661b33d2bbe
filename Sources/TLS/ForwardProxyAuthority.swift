import Sockets

/// The forward proxy's CA as `serve` and `tokenproxy ca` both get it: read from its two files, or
/// made and written first when neither exists (CONTRACT.md "HTTPS for clients").
public enum ForwardProxyAuthority {
    /// The folder is made 0700 when missing; a lock file beside the key keeps two processes starting
    /// at once from making two CAs.
    public static func prepare(certificateFile: String, keyFile: String) throws(TLSSetupError) -> CertificateAuthority {
        let folder = AtomicFile.parentFolder(of: keyFile)
        do {
            try AtomicFile.ensureFolder(folder)
        } catch {
            throw .cannotWrite(path: folder, reason: "\(error)")
        }
        let result: Result<CertificateAuthority, TLSSetupError>
        do {
            result = try FileLock.withExclusiveLock(keyFile + ".lock") {
                do throws(TLSSetupError) {
                    return .success(try CertificateAuthority.loadOrCreate(certificateFile: certificateFile, keyFile: keyFile))
                } catch {
                    return .failure(error)
                }
            }
        } catch {
            throw .cannotWrite(path: keyFile + ".lock", reason: "\(error)")
        }
        return try result.get()
    }
}
