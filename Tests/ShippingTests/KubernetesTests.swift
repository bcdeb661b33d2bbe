import Foundation
import TestSupport
import Testing
import Yams

/// `deploy/kubernetes/*.yaml`: each ConfigMap's configuration passes the real `tokenproxy check`
/// with the files and variables its workload gives the tokenproxy container, and the manifest's
/// mounts agree with the configuration's paths. (The schemas and checkov: scripts/check-kubernetes.sh.)
@Suite struct KubernetesTests {
    typealias Object = [String: Any]

    static var folder: URL { RepositoryPaths.root.appendingPathComponent("deploy/kubernetes") }
    static var manifestNames: [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: folder.path)) ?? []).filter { $0.hasSuffix(".yaml") }.sorted()
    }

    static func documents(_ name: String) throws -> [Object] {
        let text = try ShippedFiles.text(folder.appendingPathComponent(name))
        return try Yams.load_all(yaml: text).compactMap { $0 as? Object }
    }

    /// A tokenproxy container of a Deployment or Pod, with the Pod spec it is in.
    struct Workload {
        var kind: String
        var pod: Object
        var tokenproxy: Object
        var isInit: Bool
        var others: [Object]
    }

    static func workloads(_ documents: [Object]) -> [Workload] {
        documents.compactMap { document -> Workload? in
            let kind = document["kind"] as? String ?? ""
            let spec = document["spec"] as? Object
            let pod: Object?
            switch kind {
            case "Deployment": pod = (spec?["template"] as? Object)?["spec"] as? Object
            case "Pod": pod = spec
            default: pod = nil
            }
            guard let pod else { return nil }
            let inits = pod["initContainers"] as? [Object] ?? []
            let mains = pod["containers"] as? [Object] ?? []
            let all = inits + mains
            guard let proxy = all.first(where: { ($0["image"] as? String ?? "").contains("/tokenproxy:") }) else {
                return Workload(kind: kind, pod: pod, tokenproxy: [:], isInit: false, others: all)
            }
            let isInit = inits.contains { $0["name"] as? String == proxy["name"] as? String }
            return Workload(kind: kind, pod: pod, tokenproxy: proxy, isInit: isInit, others: all.filter { $0["name"] as? String != proxy["name"] as? String })
        }
    }

    static func volume(_ pod: Object, _ name: String) -> Object? {
        (pod["volumes"] as? [Object])?.first { $0["name"] as? String == name }
    }

    /// The file paths (`*_file`) and the store path of a configuration, read with a YAML parser.
    static func paths(in value: Any, key: String = "", into found: inout [(key: String, path: String)]) {
        if let object = value as? Object {
            for (k, v) in object { paths(in: v, key: key.isEmpty ? k : "\(key).\(k)", into: &found) }
        } else if let list = value as? [Any] {
            for item in list { paths(in: item, key: key, into: &found) }
        } else if let text = value as? String, key.hasSuffix("_file") || key == "store.path" || key.hasSuffix(".store.path") {
            found.append((key, text))
        }
    }

    @Test func theFolderHasTheSidecarAndTheSandbox() {
        #expect(Self.manifestNames.contains("sidecar.yaml"))
        #expect(Self.manifestNames.contains("sandbox.yaml"))
    }

    /// The ConfigMap's config.yaml, at the path the image reads (TOKENPROXY_CONFIG), with every file
    /// it names made where the manifest mounts it (Secret items in their `defaultMode` when run as
    /// root, as in CI; otherwise its owner bits, since only a root-owned key may be group-readable),
    /// the container's variables set, and `tokenproxy check` exits 0 without a warning.
    @Test(arguments: manifestNames)
    func theConfigMapsConfigurationPassesCheckWithTheMountedFiles(_ name: String) throws {
        let documents = try Self.documents(name)
        let workloads = Self.workloads(documents).filter { !$0.tokenproxy.isEmpty }
        #expect(!workloads.isEmpty, "\(name): no tokenproxy container")
        for workload in workloads {
            let container = workload.tokenproxy
            let mounts = container["volumeMounts"] as? [Object] ?? []
            let root = try TempDir(prefix: "shipping-k8s")
            var mountPaths: [String: Object] = [:]  // mountPath -> its mount
            var mountedFiles: Set<String> = []
            var writableFolders: [String] = []
            var configText: String?
            for mount in mounts {
                let mountPath = try #require(mount["mountPath"] as? String)
                let volumeName = try #require(mount["name"] as? String)
                #expect(mount["subPath"] == nil, "\(name): \(mountPath) uses subPath, which never sees an update")
                let volume = try #require(Self.volume(workload.pod, volumeName), "\(name): no volume \(volumeName)")
                mountPaths[mountPath] = mount
                let folder = root.path + mountPath
                try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
                if let configMap = volume["configMap"] as? Object {
                    let items = try #require(configMap["items"] as? [Object], "\(name): list the ConfigMap's items")
                    let source = documents.first {
                        $0["kind"] as? String == "ConfigMap" && ($0["metadata"] as? Object)?["name"] as? String == configMap["name"] as? String
                    }
                    for item in items {
                        let key = try #require(item["key"] as? String)
                        let path = try #require(item["path"] as? String)
                        mountedFiles.insert("\(mountPath)/\(path)")
                        if key == "config.yaml" {
                            let data = try #require(
                                source?["data"] as? [String: String], "\(name): the ConfigMap \(configMap["name"] ?? "") is not in the file")
                            configText = try #require(data[key])
                            #expect(
                                "\(mountPath)/\(path)" == "/etc/tokenproxy/config.yaml",
                                "\(name): the image reads TOKENPROXY_CONFIG=/etc/tokenproxy/config.yaml")
                        }
                    }
                } else if let secret = volume["secret"] as? Object {
                    #expect(secret["defaultMode"] as? Int == 0o440, "\(name): \(volumeName) needs defaultMode 0440")
                    #expect(
                        (workload.pod["securityContext"] as? Object)?["fsGroup"] as? Int == 10001,
                        "\(name): fsGroup 10001 makes the Secret readable by UID 10001")
                    let items = try #require(secret["items"] as? [Object], "\(name): list the Secret's items")
                    for item in items {
                        let path = try #require(item["path"] as? String)
                        mountedFiles.insert("\(mountPath)/\(path)")
                        try Self.writeSecretFile(folder: folder, name: path, mode: secret["defaultMode"] as? Int ?? 0o644)
                    }
                } else if volume["emptyDir"] != nil {
                    #expect(mount["readOnly"] as? Bool != true)
                    try FileManager.default.setAttributes([.posixPermissions: 0o777], ofItemAtPath: folder)  // as an emptyDir is
                    writableFolders.append(mountPath)
                }
            }
            let yaml = try #require(configText, "\(name): the tokenproxy container mounts no config.yaml")

            // The configuration's paths: each file is one the manifest mounts, the store is in an emptyDir.
            var found: [(key: String, path: String)] = []
            Self.paths(in: try Yams.load(yaml: yaml) as Any, into: &found)
            #expect(found.contains { $0.key.hasSuffix("store.path") }, "\(name): set store.path to the writable volume")
            var rewritten = yaml
            var rewrittenPaths: Set<String> = []
            for (key, path) in found {
                if key.hasSuffix("store.path") {
                    #expect(writableFolders.contains { path.hasPrefix($0 + "/") }, "\(name): store.path \(path) is in no writable volume")
                } else {
                    #expect(mountedFiles.contains(path), "\(name): \(key) \(path) is not a file the manifest mounts (\(mountedFiles.sorted()))")
                }
                // A file two keys name (one token for two routes) is rewritten once.
                if rewrittenPaths.insert(path).inserted { rewritten = rewritten.replacingOccurrences(of: path, with: root.path + path) }
            }
            let configPath = root.path + "/etc/tokenproxy/config.yaml"
            try rewritten.write(toFile: configPath, atomically: true, encoding: .utf8)

            // The variables the manifest sets (a Secret's value becomes a dummy).
            var environment: [String: String] = [:]
            for variable in container["env"] as? [Object] ?? [] {
                let variableName = try #require(variable["name"] as? String)
                environment[variableName] = variable["value"] as? String ?? "dummy-\(variableName.lowercased())-\(UUID().uuidString.lowercased())"
            }
            for variableName in ExampleKeys(yaml: yaml).environmentNames {
                #expect(environment[variableName] != nil, "\(name): the config reads \(variableName), which the container does not set")
            }
            let result = try ProxyProcess.run(args: ["check", "--config", configPath], env: environment)
            #expect(result.status == 0, "\(name): tokenproxy check on its ConfigMap:\n\(rewritten)\n\(result.output)")
            #expect(result.stdout.contains("configuration ok"), "\(result.output)")
            #expect(!result.stderr.contains("warning"), "\(name): check warns:\n\(result.stderr)")
        }
    }

    /// A secret file as the kubelet would make it: a CA pair for `*.pem` (openssl), text otherwise.
    static func writeSecretFile(folder: String, name: String, mode: Int) throws {
        let path = "\(folder)/\(name)"
        if name.hasSuffix(".pem") {
            let certificate = "\(folder)/\(name.replacingOccurrences(of: "-key", with: ""))"
            let key = "\(folder)/\(name.hasSuffix("-key.pem") ? name : name.replacingOccurrences(of: ".pem", with: "-key.pem"))"
            if !FileManager.default.fileExists(atPath: key) {
                let openssl = try #require(ShippedFiles.executable("openssl"), "openssl is needed to make the CA")
                let made = try runCommand(
                    openssl,
                    arguments: [
                        "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-days", "30", "-subj", "/CN=test CA",
                        "-addext", "basicConstraints=critical,CA:TRUE,pathlen:0", "-addext", "keyUsage=critical,keyCertSign,cRLSign",
                        "-keyout", key, "-out", certificate,
                    ], timeout: 30)
                #expect(made.status == 0, "\(made.output)")
            }
        } else {
            try "dummy-\(name)-\(UUID().uuidString.lowercased())\n".write(toFile: path, atomically: true, encoding: .utf8)
        }
        // The kubelet's files are root's, in the manifest's mode: as root (CI), exactly that mode is
        // what tokenproxy must accept. Another user's key may not be group-readable: owner bits only.
        try FileManager.default.setAttributes([.posixPermissions: getuid() == 0 ? mode : mode & 0o700], ofItemAtPath: path)
    }

    /// The native sidecar, the probes on the admin listener, and the hardening every container has.
    @Test(arguments: manifestNames)
    func theWorkloadsAreHardenedAndProbeTheAdminListener(_ name: String) throws {
        let documents = try Self.documents(name)
        for workload in Self.workloads(documents) {
            let podSecurity = workload.pod["securityContext"] as? Object ?? [:]
            #expect(podSecurity["runAsNonRoot"] as? Bool == true, "\(name)")
            #expect((podSecurity["seccompProfile"] as? Object)?["type"] as? String == "RuntimeDefault", "\(name)")
            #expect(workload.pod["automountServiceAccountToken"] as? Bool == false, "\(name)")
            for container in workload.others + (workload.tokenproxy.isEmpty ? [] : [workload.tokenproxy]) {
                let security = container["securityContext"] as? Object ?? [:]
                let label = "\(name): \(container["name"] ?? "")"
                #expect(security["allowPrivilegeEscalation"] as? Bool == false, "\(label)")
                #expect(security["readOnlyRootFilesystem"] as? Bool == true, "\(label)")
                #expect((security["capabilities"] as? Object)?["drop"] as? [String] == ["ALL"], "\(label)")
                #expect(((container["resources"] as? Object)?["limits"] as? Object)?["memory"] != nil, "\(label)")
            }
            guard !workload.tokenproxy.isEmpty else {
                // The app side of a layout: it may see the CA's certificate, never a Secret.
                for volume in workload.pod["volumes"] as? [Object] ?? [] {
                    #expect(volume["secret"] == nil, "\(name): the sandbox mounts a Secret (\(volume["name"] ?? ""))")
                }
                continue
            }
            let proxy = workload.tokenproxy
            #expect((proxy["securityContext"] as? Object)?["runAsUser"] as? Int == 10001, "\(name): the image's UID")
            if workload.kind == "Deployment" && !workload.others.isEmpty {
                #expect(workload.isInit && proxy["restartPolicy"] as? String == "Always", "\(name): tokenproxy beside an app is a native sidecar")
                // No other container mounts tokenproxy's Secrets.
                let secretVolumes = Set((workload.pod["volumes"] as? [Object] ?? []).filter { $0["secret"] != nil }.compactMap { $0["name"] as? String })
                for other in workload.others {
                    let mounted = Set((other["volumeMounts"] as? [Object] ?? []).compactMap { $0["name"] as? String })
                    #expect(mounted.isDisjoint(with: secretVolumes), "\(name): \(other["name"] ?? "") mounts tokenproxy's Secret")
                }
            }
            let adminPort = (proxy["ports"] as? [Object])?.first { $0["name"] as? String == "admin" }?["containerPort"] as? Int
            #expect(adminPort == 9901, "\(name): the admin port")
            for (probe, path) in [("startupProbe", "/healthz"), ("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")] {
                let get = (proxy[probe] as? Object)?["httpGet"] as? Object
                #expect(get?["path"] as? String == path, "\(name): \(probe)")
                #expect(get?["port"] as? String == "admin", "\(name): \(probe)")
            }
            let grace = workload.pod["terminationGracePeriodSeconds"] as? Int ?? 30
            #expect(grace > 10, "\(name): terminationGracePeriodSeconds must exceed drain_timeout (10s)")
        }
    }

    /// A NetworkPolicy selects every tokenproxy Pod and names the admin port with a source.
    @Test(arguments: manifestNames)
    func aNetworkPolicyLimitsTheAdminPort(_ name: String) throws {
        let documents = try Self.documents(name)
        let policies = documents.filter { $0["kind"] as? String == "NetworkPolicy" }
        let adminRules = policies.flatMap { ($0["spec"] as? Object)?["ingress"] as? [Object] ?? [] }.filter { rule in
            (rule["ports"] as? [Object] ?? []).contains { $0["port"] as? Int == 9901 }
        }
        #expect(!adminRules.isEmpty, "\(name): no NetworkPolicy rule for port 9901")
        for rule in adminRules { #expect(!(rule["from"] as? [Any] ?? []).isEmpty, "\(name): port 9901 open to every source") }
    }

    /// The sandbox (a Pod with no tokenproxy) may connect to tokenproxy's proxy port and nowhere else.
    @Test func theSandboxsOnlyEgressIsTokenproxy() throws {
        let documents = try Self.documents("sandbox.yaml")
        func labels(_ document: Object) -> [String: String] {
            let metadata: Object?
            if document["kind"] as? String == "Deployment" {
                metadata = ((document["spec"] as? Object)?["template"] as? Object)?["metadata"] as? Object
            } else {
                metadata = document["metadata"] as? Object
            }
            return metadata?["labels"] as? [String: String] ?? [:]
        }
        func selects(_ policy: Object, _ target: [String: String]) -> Bool {
            let wanted = ((policy["spec"] as? Object)?["podSelector"] as? Object)?["matchLabels"] as? [String: String] ?? [:]
            return wanted.allSatisfy { target[$0.key] == $0.value }
        }
        let workloads = documents.filter { ["Deployment", "Pod"].contains($0["kind"] as? String ?? "") }
        let gateway = try #require(workloads.first { Self.workloads([$0]).first?.tokenproxy.isEmpty == false })
        let sandbox = try #require(workloads.first { Self.workloads([$0]).first?.tokenproxy.isEmpty == true })
        let proxyPort = try #require(
            (Self.workloads([gateway]).first?.tokenproxy["ports"] as? [Object])?.first { $0["name"] as? String == "proxy" }?["containerPort"] as? Int)
        let policies = documents.filter { $0["kind"] as? String == "NetworkPolicy" && selects($0, labels(sandbox)) }
        let limiting = policies.filter { ((($0["spec"] as? Object)?["policyTypes"] as? [String]) ?? []).contains("Egress") }
        #expect(!limiting.isEmpty, "no NetworkPolicy limits the sandbox's egress")
        for policy in limiting {
            for rule in (policy["spec"] as? Object)?["egress"] as? [Object] ?? [] {
                let peers = rule["to"] as? [Object] ?? []
                #expect(!peers.isEmpty, "an egress rule without `to` lets the sandbox reach anything")
                for peer in peers {
                    #expect(peer["ipBlock"] == nil && peer["namespaceSelector"] == nil, "\(peer)")
                    let matched = (peer["podSelector"] as? Object)?["matchLabels"] as? [String: String] ?? [:]
                    #expect(!matched.isEmpty && matched.allSatisfy { labels(gateway)[$0.key] == $0.value }, "egress to \(matched)")
                }
                let ports = (rule["ports"] as? [Object] ?? []).compactMap { $0["port"] as? Int }
                #expect(ports == [proxyPort], "egress ports \(ports)")
            }
        }
    }
}
