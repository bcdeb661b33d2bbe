import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// Debian's `nginx` (installed by scripts/setup.sh) as a real upstream on a free loopback port: one
/// process (`master_process off`), its configuration, logs and temporary files in a folder of its
/// own. nginx decodes the path (`%2F` and `%2E` included) and resolves its dot-segments before it
/// picks a location, as many servers do, so it shows where a forwarded path really lands.
/// Start-up waits until the port answers. Stopped by `stop()` or when released.
public final class Nginx: @unchecked Sendable {
    public let port: Int
    public let directory: TempDir
    private let process: ChildProcess

    /// `server`: the directives of the one `server` block (locations), without `listen`. Every
    /// request is logged to `access.log` as `$uri` (the normalised path nginx served).
    /// `tls`: nginx listens with `ssl` and this certificate and key (`baseURL` is then https).
    public init(server: String, tls: TestCA.Issued? = nil, startupTimeout: TimeInterval = 15) throws {
        guard FileManager.default.isExecutableFile(atPath: "/usr/sbin/nginx") else { throw HarnessError("no nginx: run scripts/setup.sh") }
        let directory = try TempDir(prefix: "nginx")
        self.directory = directory
        scheme = tls == nil ? "http" : "https"
        let tlsDirectives = tls.map { "ssl_certificate \($0.certificate);\n    ssl_certificate_key \($0.key);" } ?? ""
        var attempt = 0
        while true {
            attempt += 1
            let port = try freePort()
            let config = try directory.write(
                "nginx.conf",
                """
                daemon off;
                master_process off;
                pid \(directory.file("nginx.pid"));
                error_log \(directory.file("error.log")) warn;
                events { worker_connections 256; }
                http {
                    log_format normalised '$uri';
                    access_log \(directory.file("access.log")) normalised;
                    client_body_temp_path \(directory.path);
                    proxy_temp_path \(directory.path);
                    fastcgi_temp_path \(directory.path);
                    uwsgi_temp_path \(directory.path);
                    scgi_temp_path \(directory.path);
                    default_type text/plain;
                    server {
                        listen 127.0.0.1:\(port)\(tls == nil ? "" : " ssl");
                        \(tlsDirectives)
                        \(server)
                    }
                }
                """)
            let child = try ChildProcess("/usr/sbin/nginx", arguments: ["-p", directory.path, "-c", config], environment: childEnvironment([:]))
            let deadline = Date().addingTimeInterval(startupTimeout)
            while Date() < deadline && child.isRunning {
                if (try? RawHTTPClient(port: port, timeout: 1)).map({ $0.close() }) != nil {
                    self.port = port
                    process = child
                    return
                }
                usleep(20_000)
            }
            child.stop(grace: 1)
            if attempt >= 3 {
                let log = (try? String(contentsOfFile: directory.file("error.log"), encoding: .utf8)) ?? ""
                throw HarnessError("nginx did not start: \(child.stderr.text) \(log)")
            }
        }
    }

    deinit { stop() }

    /// `http` or `https`.
    public let scheme: String

    /// `http://127.0.0.1:PORT` (`https://` with TLS)
    public var baseURL: String { "\(scheme)://127.0.0.1:\(port)" }

    /// The normalised path of every request served so far, one per line.
    public func servedPaths() -> [String] {
        let log = (try? String(contentsOfFile: directory.file("access.log"), encoding: .utf8)) ?? ""
        return log.split(separator: "\n").map(String.init)
    }

    public func stop() {
        process.stop(grace: 5)
    }
}
