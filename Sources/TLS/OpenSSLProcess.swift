internal import COpenSSL

/// OpenSSL's state for the whole process, and what becomes of it when the process exits.
public enum OpenSSLProcess {
    /// Keeps OpenSSL's global state until the process is gone (`OPENSSL_INIT_NO_ATEXIT`,
    /// OPENSSL_init_crypto(3)); call it first, before anything uses OpenSSL, since only the first
    /// initialisation's options count.
    ///
    /// Why: by default exit(3) runs OpenSSL's cleanup, which frees the global state that each
    /// thread's OpenSSL state points to. `serve` exits right after telling its event loops to stop,
    /// and a loop that ran TLS (a client's, or an intercepted CONNECT tunnel's) has OpenSSL state on
    /// its thread, freed by a destructor when the thread ends: the two could run at once, and the
    /// thread's destructor then read freed memory, so a SIGTERM could end in a crash instead of
    /// status 0. The kernel takes back a process's memory anyway, so nothing needs freeing at exit.
    public static func keepStateUntilExit() {
        _ = OPENSSL_init_crypto(UInt64(OPENSSL_INIT_NO_ATEXIT), nil)
    }
}
