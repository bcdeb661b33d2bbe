import Foundation
import TestSupport
import Testing

/// The forward proxy's egress policy (CONTRACT.md "Programs in a sandbox", "Egress policy"):
/// `tunnel_hosts` and `deny_addresses`, against the real binary, its system resolver and a real
/// TLS server. The names come from `/etc/hosts`: `localhost` (127.0.0.1 and ::1) on any machine;
/// the other addresses in a network namespace whose `/etc/hosts` the test writes (root only), since
/// the binary has no resolver of its own to point anywhere else, and it must not have one.
@Suite(.tags(.endToEnd), .timeLimit(.minutes(20))) struct SandboxEgressTests {
    static var route: ForwardProxyFixture.Route { .init(name: "api", host: "api.example.test", upstream: "http://127.0.0.1:9/never") }

    /// A TLS echo server on 127.0.0.1 for `localhost`, and the CA its certificate comes from.
    static func localTLSServer() throws -> (server: PythonServer, ca: TestCA) {
        let ca = try TestCA(name: "local server CA")
        let pair = try ca.issue(["localhost"])
        return (try PythonServer("echo_upstream", arguments: ["--tls-cert", pair.certificate, "--tls-key", pair.key]), ca)
    }

    @Test func aNameOutsideTunnelHostsOrOnAnotherPortIsRefused() throws {
        let f = try ForwardProxyFixture(
            routes: [Self.route], forwardProxy: "  other_hosts: tunnel\n  tunnel_hosts: [\"pypi.example.test\", \"*.pkg.example.test:8443\"]")
        for target in ["other.example.test:443", "pypi.example.test:8443", "a.pkg.example.test:443", "pkg.example.test:8443", "localhost:443"] {
            let outcome = try f.connect(target)
            expectRefusedConnect(outcome, status: 403, code: "forbidden_target")
            #expect(outcome.connectJSON?["message"] as? String == "\(target) is not in forward_proxy.tunnel_hosts", "\(outcome)")
        }
        // The route's own host is still intercepted.
        #expect(try f.connect("api.example.test:443").connectStatus == 200)
        try f.finish()
    }

    /// `localhost` resolves to loopback: the default list refuses it, a list of its own that holds
    /// loopback too; `[]`, or a list without it, lets the tunnel reach the real TLS server.
    @Test(arguments: [
        ("default", false), ("[\"127.0.0.0/8\"]", false), ("[\"127.0.0.1/32\", \"::1/128\"]", false), ("[]", true),
        ("[\"10.0.0.0/8\", \"fc00::/7\"]", true),
    ])
    func loopbackIsRefusedUnlessTheListLeavesItOut(deny: String, tunnelled: Bool) throws {
        let (server, ca) = try Self.localTLSServer()
        let f = try ForwardProxyFixture(
            routes: [Self.route], forwardProxy: "  other_hosts: tunnel\n  tunnel_hosts: [\"localhost:\(server.port)\"]\n  deny_addresses: \(deny)")
        let r = try curl(["https://localhost:\(server.port)/hello?x=1"], environment: ["HTTPS_PROXY": f.proxyURL, "CURL_CA_BUNDLE": ca.certificate])
        if tunnelled {
            #expect(r.status == 200, "\(r.bodyString) \(f.proxy.stderr.suffix(2000))")
            let seen = try Echo(r.body)
            #expect(seen.path == "/hello?x=1")
            #expect(!seen.has("Authorization") && !seen.has("X-Forwarded-For"), "nothing injected: \(seen.headers)")
        } else {
            #expect(r.status != 200, "\(r.bodyString)")
            let outcome = try f.connect("localhost:\(server.port)")
            expectRefusedConnect(outcome, status: 403, code: "forbidden_target")
            let message = outcome.connectJSON?["message"] as? String ?? ""
            #expect(message.contains("deny_addresses") && !message.contains("127.0.0.1"), "the answer names no address: \(message)")
            #expect(f.proxy.waitForStderr(containing: "in deny_addresses ("), "\(f.proxy.stderr.suffix(2000))")
        }
        try f.finish()
        server.stop()
    }

    /// Names that resolve to 127.0.0.1, 10.x, the metadata address, an IPv4-mapped loopback, NAT64's
    /// form of the metadata address, a unique local address (fc00::/7), or to a public address and
    /// a private one: each refused by the default list, and nothing is connected to.
    @Test(.enabled(if: NetworkNamespace.isAvailable, "needs root, unshare and nsenter"), .tags(.root))
    func namesThatResolveToDeniedAddressesAreRefused() throws {
        let denied = [
            ("loopback.example.test", "127.0.0.1"), ("private.example.test", "10.1.2.3"), ("metadata.example.test", "169.254.169.254"),
            ("mapped.example.test", "::ffff:127.0.0.1"), ("nat64.example.test", "64:ff9b::a9fe:a9fe"), ("ula.example.test", "fd00::1"),
            ("mixed.example.test", "93.184.215.14"), ("mixed.example.test", "192.168.0.7"),
        ]
        let namespace = try NetworkNamespace(hosts: [("real.example.test", "10.77.0.10")], names: denied)
        let proxy = try namespace.forwardProxy("  other_hosts: tunnel", prefix: "egress-denied")
        let names = Array(Set(denied.map(\.0))).sorted() + ["real.example.test"]
        for name in names {
            let command = namespace.command("curl", ["--silent", "--show-error", "--max-time", "30", "--insecure", "https://\(name)/"])
            let run = try runCommand(
                command.executable, arguments: command.arguments, environment: childEnvironment(["HTTPS_PROXY": proxy.baseURL]), timeout: 60)
            #expect(run.status == 56 && run.stderr.contains("403"), "\(name): \(run.output)")
        }
        // Each refusal is logged with the address and the block, and one access-log line per CONNECT.
        #expect(proxy.waitForStderr(containing: "it resolves to 169.254.169.254, in deny_addresses (169.254.0.0/16)"), "\(proxy.stderr.suffix(3000))")
        #expect(proxy.stderr.contains("in deny_addresses (fc00::/7)"), "\(proxy.stderr.suffix(3000))")
        #expect(proxy.stderr.contains("in deny_addresses (192.168.0.0/16)"), "\(proxy.stderr.suffix(3000))")
        let refused = proxy.stderr.split(separator: "\n").filter { $0.contains("method=CONNECT") && $0.contains("status=403") }
        #expect(refused.count == names.count, "\(refused)")
        proxy.terminate(signal: SIGTERM)
        #expect(try proxy.waitForExit(timeout: 15) == 0)
    }

    /// pip's settings from the environment replaced by a clean slate that trusts only `ca`: this
    /// machine's PIP_CERT, PIP_FIND_LINKS and REQUESTS_CA_BUNDLE would otherwise win over `--cert`.
    static func pipEnvironment(trusting ca: String) -> [String: String] {
        var environment = ["PIP_CONFIG_FILE": "/dev/null", "PYTHONDONTWRITEBYTECODE": "1", "PIP_CERT": ca, "REQUESTS_CA_BUNDLE": ca, "PIP_FIND_LINKS": ""]
        for (name, _) in ProcessInfo.processInfo.environment where name.hasPrefix("PIP_") && environment[name] == nil { environment[name] = "" }
        return environment
    }

    /// pip, unmodified, through the forward proxy to a listed host (`tunnel_hosts: [pypi.org]`): it
    /// fetches a PEP 503 index and a wheel over its own TLS (the proxy sees only bytes) and checks
    /// the wheel's hash. In a network namespace where `pypi.org` is 10.77.0.10, a private address,
    /// so `deny_addresses: []`; a name not in the list is refused on the same proxy.
    @Test(.enabled(if: NetworkNamespace.isAvailable, "needs root, unshare and nsenter"), .tags(.root))
    func pipDownloadsAWheelThroughATunnelToAListedHost() throws {
        let namespace = try NetworkNamespace(hosts: [("pypi.org", "10.77.0.10")], names: [("files.example.test", "10.77.0.10")])
        let serverCA = try TestCA(name: "index CA")
        let pair = try serverCA.issue(["pypi.org", "files.example.test"])
        let folder = try TempDir(prefix: "simple-index")
        let server = try namespace.pythonServer(
            "simple_index.py",
            ["--host", "10.77.0.10", "--port", "443", "--folder", folder.path, "--wheel", "tpdemo==1.0", "--tls-cert", pair.certificate, "--tls-key", pair.key])
        defer { server.stop(grace: 1) }
        let proxy = try namespace.forwardProxy("  other_hosts: tunnel\n  tunnel_hosts: [pypi.org]\n  deny_addresses: []", prefix: "egress-pip")

        func pip(index: String, into destination: TempDir) throws -> CommandResult {
            let command = namespace.command(
                "python3",
                [
                    "-m", "pip", "download", "tpdemo==1.0", "--no-deps", "--dest", destination.path, "--index-url", index, "--cert",
                    serverCA.certificate, "--proxy", proxy.baseURL, "--no-cache-dir", "--disable-pip-version-check", "--retries", "0",
                    "--timeout", "30",
                ])
            return try runCommand(
                command.executable, arguments: command.arguments,
                environment: childEnvironment(Self.pipEnvironment(trusting: serverCA.certificate)), timeout: 180)
        }
        let downloads = try TempDir(prefix: "pip-downloads")
        let run = try pip(index: "https://pypi.org/simple/", into: downloads)
        #expect(run.status == 0, "\(run.output) \(proxy.stderr.suffix(2000))")
        #expect(FileManager.default.fileExists(atPath: downloads.file("tpdemo-1.0-py3-none-any.whl")), "\(run.output)")
        // The same index under a name the list does not hold: refused at the CONNECT.
        let elsewhere = try TempDir(prefix: "pip-refused")
        let refused = try pip(index: "https://files.example.test/simple/", into: elsewhere)
        #expect(refused.status != 0, "\(refused.output)")
        #expect(!FileManager.default.fileExists(atPath: elsewhere.file("tpdemo-1.0-py3-none-any.whl")))
        let connects = proxy.stderr.split(separator: "\n").filter { $0.contains("method=CONNECT") }
        #expect(connects.contains { $0.contains("files.example.test") && $0.contains("status=403") }, "\(connects)")
        proxy.terminate(signal: SIGTERM)
        #expect(try proxy.waitForExit(timeout: 15) == 0)
    }
}
