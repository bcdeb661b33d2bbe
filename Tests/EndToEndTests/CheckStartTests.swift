import Foundation
import TestSupport
import Testing

/// CONTRACT.md, "HTTPS for clients" (issue 39 points 6 and 21): the key files a Kubernetes Secret
/// gives.
@Suite struct CheckStartTests {
    static let runsAsRoot = geteuid() == 0

    /// A Secret volume as the kubelet writes it: the files in a timestamped folder, `..data` a link
    /// to it, and each name a link through `..data` (so mode and owner are the target's).
    static func secretVolume(in dir: TempDir, files: [String: String], mode: Int, owner: UInt32, group: UInt32) throws -> String {
        let volume = dir.file("secret")
        let data = "..2026_12_06_19_00_00.000000001"
        for (name, source) in files {
            let target = try dir.write("secret/\(data)/\(name)", try String(contentsOfFile: source, encoding: .utf8), mode: mode)
            guard chown(target, owner, group) == 0 else { throw HarnessError("chown \(target) failed: errno \(errno)") }
            try FileManager.default.createSymbolicLink(atPath: "\(volume)/\(name)", withDestinationPath: "..data/\(name)")
        }
        try FileManager.default.createSymbolicLink(atPath: "\(volume)/..data", withDestinationPath: data)
        return volume
    }

    /// A Secret mounted with `fsGroup` (the README's Deployment): root's file, mode 0440, the pod's
    /// group. `check` passes and `serve` answers over TLS with that key; the same mode on a file a
    /// user owns, or a key others may read, is refused naming the file, its mode and its owner.
    @Test(.enabled(if: runsAsRoot, "only root can make a root-owned file for the test"))
    func aKeyFromASecretMountedWithFSGroupIsServed() throws {
        let ca = try TestCA()
        let dir = try TempDir(prefix: "fsgroup-key")
        let pair = try ca.issue(file: "issued/server", in: dir)
        let volume = try Self.secretVolume(
            in: dir, files: ["tls.crt": pair.certificate, "tls.key": pair.key], mode: 0o440, owner: 0, group: 10001)
        let upstream = try PythonServer("echo_upstream")
        defer { upstream.stop() }
        let config = """
            listen: 127.0.0.1:0
            upstream: \(upstream.baseURL)/base
            workers: 1
            drain_timeout: 2s
            credentials: {type: static, token_env: E2E_TOKEN}
            tls: {cert_file: \(volume)/tls.crt, key_file: \(volume)/tls.key}
            """
        let path = try dir.write("tokenproxy.yaml", config)
        let check = try ProxyProcess.run(args: ["check", "--config", path], env: ["E2E_TOKEN": e2eToken])
        #expect(check.status == 0, "\(check.output)")

        let proxy = try ProxyProcess(config: config, directory: dir, environment: ["E2E_TOKEN": e2eToken])
        let answer = try curl(["--cacert", ca.certificate, "https://127.0.0.1:\(proxy.port)/k8s"])
        #expect(answer.status == 200, "\(answer.stderr) \(proxy.stderr.suffix(2000))")
        #expect(try Echo(answer.body).value("Authorization") == "Bearer \(e2eToken)")
        proxy.terminate(signal: SIGTERM)
        #expect(try proxy.waitForExit(timeout: 15) == 0, "\(proxy.stderr.suffix(2000))")

        let data = try FileManager.default.destinationOfSymbolicLink(atPath: "\(volume)/..data")
        let target = "\(volume)/\(data)/tls.key"
        for (owner, mode, reason) in [
            (UInt32(10001), 0o440, "(mode 0440, owner uid 10001): its group may read it and root does not own it"),
            (UInt32(0), 0o444, "(mode 0444, owner uid 0): others may read it"),
        ] {
            guard chown(target, owner, 10001) == 0, chmod(target, mode_t(mode)) == 0 else { throw HarnessError("chown/chmod failed") }
            for command in ["check", "serve"] {
                let refused = try ProxyProcess.run(args: [command, "--config", path], env: ["E2E_TOKEN": e2eToken], timeout: 30)
                #expect(refused.status == 2, "\(command): \(refused.output)")
                #expect(refused.stderr.contains("tls.key_file") && refused.stderr.contains("\(volume)/tls.key \(reason)"), "\(command): \(refused.stderr)")
            }
        }
    }

    /// Issue 39 point 21: `tls_client_auth`'s key at 0644 is refused like every private key.
    @Test func aTLSClientAuthKeyOthersMayReadIsRefused() throws {
        let ca = try TestCA()
        let dir = try TempDir(prefix: "tls-client-auth-key")
        let client = try ca.issue(["svc"], purpose: .client, file: "client", in: dir)
        guard chmod(client.key, 0o644) == 0 else { throw HarnessError("chmod failed") }
        let path = try dir.write(
            "tokenproxy.yaml",
            """
            upstream: http://127.0.0.1:9
            credentials:
              type: oauth2_client_credentials
              token_url: https://127.0.0.1:9/token
              client_id: svc
              client_auth: tls_client_auth
              client_cert_file: ./client.pem
              client_key_file: ./client-key.pem
            store: {path: ./state/tokens.json}
            """)
        let result = try ProxyProcess.run(args: ["check", "--config", path])
        #expect(result.status == 2, "\(result.output)")
        #expect(result.stderr.contains("credentials.client_key_file: \(client.key) (mode 0644, owner uid "), "\(result.stderr)")
        guard chmod(client.key, 0o600) == 0 else { throw HarnessError("chmod failed") }
        #expect(try ProxyProcess.run(args: ["check", "--config", path]).status == 0)
    }
}
