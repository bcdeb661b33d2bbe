import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// A network and mount namespace of its own (`unshare --net --mount`, as root), with only `lo`, an
/// extra address on it and an `/etc/hosts` that only processes inside read: a host name that
/// resolves to an address which is not loopback, with a real server listening there, on a
/// machine that has no network. Processes enter it with `nsenter -t PID -n -m`, which execs them
/// under the same PID (so stopping them is as usual).
public final class NetworkNamespace: Sendable {
    private let holder: ChildProcess
    private let hostsFolder: TempDir

    /// Whether this machine lets the tests make one: root, `unshare`, `nsenter` and `ip`, and a
    /// kernel (or container) that allows new namespaces, tried once.
    public static let isAvailable: Bool = {
        guard getuid() == 0, ["/usr/bin/unshare", "/usr/bin/nsenter", "/usr/sbin/ip"].allSatisfy({ FileManager.default.isExecutableFile(atPath: $0) })
        else { return false }
        return (try? runCommand("/usr/bin/unshare", arguments: ["--net", "--mount", "/bin/true"], timeout: 20))?.status == 0
    }()

    /// - Parameters:
    ///   - hosts: names and the IPv4 addresses they resolve to inside (each address is added to `lo`).
    ///   - names: more names and addresses (IPv4 or IPv6) for `/etc/hosts` only: nothing listens there.
    public init(hosts: [(name: String, address: String)], names: [(name: String, address: String)] = []) throws {
        hostsFolder = try TempDir(prefix: "netns")
        let hostsFile = try hostsFolder.write(
            "hosts", "127.0.0.1 localhost\n" + (hosts + names).map { "\($0.address) \($0.name)\n" }.joined())
        let steps = ["ip link set lo up"] + hosts.map { "ip addr add \($0.address)/32 dev lo" } + ["mount --bind \(hostsFile) /etc/hosts"]
        holder = try ChildProcess(
            "/usr/bin/unshare",
            arguments: [
                "--net", "--mount", "/bin/sh", "-c", steps.joined(separator: " && ") + " && echo READY && exec sleep 3600",
            ], environment: childEnvironment([:]))
        let ready = holder.stdout.wait(until: Date().addingTimeInterval(20)) { $0.contains("READY\n") ? true : nil }
        guard ready == true else {
            holder.stop(grace: 0)
            throw HarnessError("no namespace: \(holder.stderr.text)")
        }
    }

    /// The command line that runs `executable` with `arguments` inside.
    public func command(_ executable: String, _ arguments: [String]) -> (executable: String, arguments: [String]) {
        ("/usr/bin/nsenter", ["-t", String(holder.pid), "-n", "-m", executable] + arguments)
    }

    /// A server of Tests/servers (`script`, e.g. `echo_upstream.py`) run inside, once it has said READY.
    public func pythonServer(_ script: String, _ arguments: [String]) throws -> ChildProcess {
        let path = RepositoryPaths.servers.appendingPathComponent(script).path
        let inside = command("python3", ["-u", path] + arguments)
        let server = try ChildProcess(inside.executable, arguments: inside.arguments, environment: childEnvironment(["PYTHONDONTWRITEBYTECODE": "1"]))
        guard server.stdout.wait(until: Date().addingTimeInterval(30), { $0.contains("READY") ? true : nil }) == true else {
            server.stop(grace: 0)
            throw HarnessError("\(script) did not start inside the namespace: \(server.stderr.text)")
        }
        return server
    }

    /// tokenproxy inside: the forward proxy (`forwardProxy`: the lines under `forward_proxy:`) with one
    /// intercepted route, `api.example.test`, whose upstream nothing reaches; the static token `e2eToken`.
    public func forwardProxy(_ forwardProxy: String, prefix: String) throws -> ProxyProcess {
        let directory = try TempDir(prefix: prefix)
        let inside = command(RepositoryPaths.tokenproxyBinary.path, ["serve", "--config", directory.file("tokenproxy.yaml")])
        return try ProxyProcess(
            config: """
                \(routesProxyTop)
                forward_proxy:
                \(forwardProxy)
                routes:
                  - name: api
                    match: {host: api.example.test}
                    upstream: http://127.0.0.1:9/never
                    credentials: {type: static, token_env: E2E_TOKEN}
                """, directory: directory, environment: ["E2E_TOKEN": e2eToken], arguments: inside.arguments,
            binary: URL(fileURLWithPath: inside.executable))
    }

    deinit { holder.stop(grace: 1) }
}
