import Foundation
import TestSupport
import Testing

/// CONTRACT.md, `check` and "HTTPS for clients" (issue 39 points 6, 7 and 21): the key files a
/// Kubernetes Secret gives, and what `serve` needs at start, checked by `check` as the user it runs
/// as. "Another user" is `nobody` through `setpriv`, which only a root test run can use.
@Suite(.tags(.endToEnd), .timeLimit(.minutes(35))) struct CheckStartTests {
    static let runsAsRoot = geteuid() == 0
    static let canSwitchUser = runsAsRoot && FileManager.default.isExecutableFile(atPath: "/usr/bin/setpriv")
    static let nobody: UInt32 = 65534

    /// `tokenproxy check` as `nobody`, with the environment the test gives.
    static func checkAsNobody(_ config: String, env: [String: String] = [:]) throws -> CommandResult {
        try runCommand(
            "/usr/bin/setpriv",
            arguments: ["--reuid=\(nobody)", "--regid=\(nobody)", "--clear-groups", RepositoryPaths.tokenproxyBinary.path, "check", "--config", config],
            environment: childEnvironment(env), timeout: 60)
    }

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

    /// A Secret mounted with `fsGroup` (deploy/kubernetes/sidecar.yaml): root's file, mode 0440, the pod's
    /// group. `check` passes and `serve` answers over TLS with that key; the same mode on a file a
    /// user owns, or a key others may read, is refused naming the file, its mode and its owner.
    @Test(.enabled(if: runsAsRoot, "only root can make a root-owned file for the test"), .tags(.root))
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
        let (path, result) = try checkClientCredentials(
            in: dir, tokenURL: "https://127.0.0.1:9/token", clientID: "svc",
            "client_auth: tls_client_auth\nclient_cert_file: ./client.pem\nclient_key_file: ./client-key.pem", top: "store: {path: ./state/tokens.json}")
        #expect(result.status == 2, "\(result.output)")
        #expect(result.stderr.contains("credentials.client_key_file: \(client.key) (mode 0644, owner uid "), "\(result.stderr)")
        guard chmod(client.key, 0o600) == 0 else { throw HarnessError("chmod failed") }
        #expect(try ProxyProcess.run(args: ["check", "--config", path]).status == 0)
    }

    /// A seed's variable, or an AWS key's, that is not set: `serve` would start without a session
    /// (or without keys); `check` names each key and variable, all in one run.
    @Test func checkNamesEveryVariableThatIsNotSet() throws {
        let dir = try TempDir(prefix: "check-env")
        let path = try dir.write(
            "tokenproxy.yaml",
            """
            listen: 127.0.0.1:0
            store: {path: ./state/tokens.json}
            routes:
              - name: orders
                match: {path_prefix: /orders/}
                upstream: http://127.0.0.1:9
                credentials:
                  type: oauth2_refresh
                  token_url: http://127.0.0.1:9/token
                  client_id: cli
                  refresh_token_env: CHECK_SEED_REFRESH_TOKEN
              - name: s3
                match: {path_prefix: /s3/}
                upstream: http://127.0.0.1:9
                credentials:
                  type: aws
                  region: eu-west-1
                  service: s3
                  source: environment
                  access_key_id_env: CHECK_AWS_KEY_ID
                  secret_access_key_env: CHECK_AWS_SECRET
            """)
        let missing = try ProxyProcess.run(args: ["check", "--config", path], env: ["CHECK_AWS_KEY_ID": "AKIDEXAMPLE"])
        #expect(missing.status == 2, "\(missing.output)")
        for line in [
            "routes[0].credentials.refresh_token_env: the environment variable CHECK_SEED_REFRESH_TOKEN is not set",
            "routes[1].credentials.secret_access_key_env: the environment variable CHECK_AWS_SECRET is not set",
        ] {
            #expect(missing.stderr.contains(line), "\(missing.stderr)")
        }
        #expect(!missing.stderr.contains("CHECK_AWS_KEY_ID is not set"), "\(missing.stderr)")
        let set = try ProxyProcess.run(
            args: ["check", "--config", path],
            env: ["CHECK_AWS_KEY_ID": "AKIDEXAMPLE", "CHECK_AWS_SECRET": "check-secret-\(UUID().uuidString)", "CHECK_SEED_REFRESH_TOKEN": "seed"])
        #expect(set.status == 0, "\(set.output)")
    }

    /// The Docker image's case: the configuration's folder is read-only to the service user, and the
    /// default store (`./state/tokens.json` beside the file) cannot be made there. Root may; `nobody`
    /// may not, and `check` as `nobody` says so with the key. So does a token file only root may read.
    @Test(.enabled(if: canSwitchUser, "needs root and setpriv to run check as another user"), .tags(.root))
    func checkAsTheServiceUserNamesAStoreFolderItCannotWriteAndAFileItCannotRead() throws {
        let dir = try TempDir(prefix: "check-as-nobody")
        guard chmod(dir.path, 0o755) == 0 else { throw HarnessError("chmod failed") }
        let config = try dir.write(
            "tokenproxy.yaml",
            """
            listen: 127.0.0.1:0
            routes:
              - name: api
                match: {path_prefix: /api/}
                upstream: http://127.0.0.1:9
                credentials:
                  type: oauth2_client_credentials
                  token_url: http://127.0.0.1:9/token
                  client_id: svc
                  client_secret_env: CHECK_CLIENT_SECRET
              - name: files
                match: {path_prefix: /files/}
                upstream: http://127.0.0.1:9
                credentials: {type: file, path: ./token}
            """, mode: 0o644)
        try dir.write("token", "a-token\n", mode: 0o600)
        let env = ["CHECK_CLIENT_SECRET": "check-secret-\(UUID().uuidString)"]
        let asRoot = try ProxyProcess.run(args: ["check", "--config", config], env: env)
        #expect(asRoot.status == 0, "\(asRoot.output)")
        #expect(FileManager.default.fileExists(atPath: dir.file("state")) == false, "check made the store's folder")

        let asNobody = try Self.checkAsNobody(config, env: env)
        #expect(asNobody.status == 2, "\(asNobody.output)")
        #expect(asNobody.stderr.contains("2 configuration errors"), "\(asNobody.stderr)")
        #expect(
            asNobody.stderr.contains("routes[1].credentials.path: cannot read \(dir.url.standardizedFileURL.path)/token as uid 65534"),
            "\(asNobody.stderr)")
        #expect(
            asNobody.stderr.contains("routes[0].store.path: \(dir.url.standardizedFileURL.path)/state/api.json: cannot create files in"),
            "\(asNobody.stderr)")
        #expect(!asNobody.output.contains(env["CHECK_CLIENT_SECRET"]!))
    }

    /// A store under a folder the service user cannot even enter: named as one it cannot reach, not
    /// as one to make in the folder above.
    @Test(.enabled(if: canSwitchUser, "needs root and setpriv to run check as another user"), .tags(.root))
    func checkAsTheServiceUserNamesAStoreFolderItCannotReach() throws {
        let dir = try TempDir(prefix: "check-reach")
        guard chmod(dir.path, 0o777) == 0 else { throw HarnessError("chmod failed") }
        try FileManager.default.createDirectory(atPath: dir.file("private/state"), withIntermediateDirectories: true)
        guard chmod(dir.file("private"), 0o700) == 0 else { throw HarnessError("chmod failed") }
        let config = try dir.write(
            "tokenproxy.yaml",
            """
            upstream: http://127.0.0.1:9
            credentials: {type: oauth2_client_credentials, token_url: http://127.0.0.1:9/token, client_id: svc, client_secret_env: CHECK_CLIENT_SECRET}
            store: {path: ./private/state/tokens.json}
            """, mode: 0o644)
        let env = ["CHECK_CLIENT_SECRET": "check-secret-\(UUID().uuidString)"]
        #expect(try ProxyProcess.run(args: ["check", "--config", config], env: env).status == 0)
        let asNobody = try Self.checkAsNobody(config, env: env)
        #expect(asNobody.status == 2, "\(asNobody.output)")
        let folder = "\(dir.url.standardizedFileURL.path)/private/state"
        #expect(asNobody.stderr.contains("store.path: \(folder)/tokens.json: cannot reach \(folder) as uid 65534"), "\(asNobody.stderr)")
    }

    /// A forward proxy CA that root made (`tokenproxy ca` run as root): the service user cannot read
    /// its key, and `check` as that user names it; `check` as root passes.
    @Test(.enabled(if: canSwitchUser, "needs root and setpriv to run check as another user"), .tags(.root))
    func checkAsTheServiceUserNamesACARootMade() throws {
        let dir = try TempDir(prefix: "check-ca")
        guard chmod(dir.path, 0o777) == 0 else { throw HarnessError("chmod failed") }
        let config = try dir.write(
            "tokenproxy.yaml",
            """
            listen: 127.0.0.1:0
            store: {path: ./state/tokens.json}
            forward_proxy: {}
            routes:
              - name: api
                match: {host: api.example.test}
                upstream: http://127.0.0.1:9
                credentials: {type: static, token_env: E2E_TOKEN}
            """, mode: 0o644)
        let env = ["E2E_TOKEN": e2eToken]
        #expect(try Self.checkAsNobody(config, env: env).status == 0, "nobody can make the CA in a folder it may write")
        let made = try ProxyProcess.run(args: ["ca", "--config", config], env: env)
        #expect(made.status == 0, "\(made.output)")
        guard chmod(dir.file("state"), 0o755) == 0 else { throw HarnessError("chmod failed") }
        #expect(try ProxyProcess.run(args: ["check", "--config", config], env: env).status == 0)
        let asNobody = try Self.checkAsNobody(config, env: env)
        #expect(asNobody.status == 2, "\(asNobody.output)")
        let key = "\(dir.url.standardizedFileURL.path)/state/forward-proxy-ca-key.pem"
        #expect(asNobody.stderr.contains("forward_proxy: cannot read \(key) as uid 65534"), "\(asNobody.stderr)")
    }
}
