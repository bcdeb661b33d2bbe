import Config
import Logging
import Sockets
import Synchronization
import TLS

/// The TLS of one listener (`tls:`, CONTRACT.md "HTTPS for clients"): its server context, which every
/// loop's connections share, and the watch on its certificate pair's files: a change is read again
/// for new handshakes; open connections keep the pair they started with.
final class ListenerTLS: Sendable {
    let settings: ListenerTLSConfiguration
    let context: TLSServerContext
    /// The two files' signatures when the pair was last read (the reload's own `FileWatch`).
    private let watch: Mutex<FileWatch<FileSignature>>

    init(_ settings: ListenerTLSConfiguration) throws(TLSSetupError) {
        self.settings = settings
        watch = Mutex(FileWatch(watchesConfiguration: false, configuration: nil, files: [settings.certFile, settings.keyFile], signature: FileSignature.of))
        context = try TLSServerContext(certificateFile: settings.certFile, keyFile: settings.keyFile, clientCAFile: settings.clientCAFile)
    }

    /// Reads the pair again when either file changed since the last look (a Kubernetes Secret swaps
    /// both through its `..data` link). A pair that does not load keeps the last good one, with a
    /// warning once per change. Called about once a second from one thread.
    func reloadIfChanged(logger: Logger) {
        guard watch.withLock({ $0.look(configuration: nil, signature: FileSignature.of) }) == .files else { return }
        do {
            try context.reloadCertificate(certificateFile: settings.certFile, keyFile: settings.keyFile)
            logger.info("tls: read the certificate pair again (\(settings.certFile)); new handshakes use it")
        } catch {
            logger.warning("tls: \(error); new handshakes keep the last good certificate pair")
        }
    }
}

/// The forward proxy's TLS (`forward_proxy`): the CA's host certificates and the context tunnels'
/// handshakes run in. Shared by every loop; replaced by a reload that changes `forward_proxy`.
final class ForwardProxyTLS: Sendable {
    let settings: ForwardProxyConfiguration
    let leaves: LeafCertificates
    let context: TLSServerContext

    init(_ settings: ForwardProxyConfiguration, authority: CertificateAuthority) throws(TLSSetupError) {
        self.settings = settings
        leaves = LeafCertificates(authority: authority, lifetime: settings.leafLifetime)
        // The context needs a pair to exist; every tunnel's session is given its host's own.
        context = try TLSServerContext(certificate: leaves.certificate(for: "forward-proxy.invalid"))
    }

    /// A session for a tunnel to `host` on `fd`: the host's certificate, and an SNI that names
    /// another host fails the handshake (the pin, docs/FORWARD-PROXY.md).
    func session(fd: Int32, host: String) throws(TLSSetupError) -> TLSSession {
        let pair = try leaves.certificate(for: host)
        return try context.makeSession(fd: fd, pair: pair) { serverName in
            ForwardProxyRules.serverNameAllowed(serverName, tunnelHost: host) ? .useDefault : .refuse
        }
    }
}

/// The host a forward-proxy tunnel was opened for (its CONNECT line), which every request in it must name.
struct TunnelPin: Equatable {
    let host: String
    let port: Int

    /// A CONNECT target as the access log may show it: printable ASCII, at most 255 bytes.
    static func loggable(_ target: String) -> String {
        String(decoding: target.utf8.prefix(255).map { $0 > 0x20 && $0 < 0x7F ? $0 : UInt8(ascii: "?") }, as: UTF8.self)
    }
}

/// Reads and writes of a client connection that speaks TLS, as `IOResult`s the connection's plain
/// code already handles.
enum ClientTLSIO {
    /// Decrypted bytes into `buffer`, as many as OpenSSL and the socket hold now (several records),
    /// so that a short result means nothing is left to read before epoll says so again.
    /// `wantsWrite`: OpenSSL must write before it can read on (a TLS 1.3 key update's answer).
    static func read(_ session: TLSSession, _ buffer: UnsafeMutableRawBufferPointer, wantsWrite: inout Bool) -> IOResult {
        var total = 0
        while total < buffer.count {
            switch session.read(into: UnsafeMutableRawBufferPointer(rebasing: buffer[total...])) {
            case .done(let n):
                total += n
            case .wantRead:
                return total > 0 ? .done(total) : .wouldBlock
            case .wantWrite:
                wantsWrite = true
                return total > 0 ? .done(total) : .wouldBlock
            case .closed, .failed:
                // What came before the end is delivered first; the next read reports the end.
                return total > 0 ? .done(total) : .closed
            }
        }
        return .done(total)
    }

    static func write(_ session: TLSSession, _ bytes: UnsafeRawBufferPointer) -> IOResult {
        switch session.write(bytes) {
        case .done(let n): .done(n)
        case .wantWrite, .wantRead: .wouldBlock
        case .closed, .failed: .closed
        }
    }
}
