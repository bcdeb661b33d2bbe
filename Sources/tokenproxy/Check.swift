import ArgumentParser
import Config
import Credentials
import Foundation
import ProxyCore
import Sockets
import TLS

struct Check: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Validate the configuration and print what it resolved (secrets masked).")
    @OptionGroup var options: ConfigOption

    func run() throws {
        let loaded = options.load()
        let configuration = loaded.configuration
        // What only the credentials and TLS code can judge (a PEM that holds no usable key), and what
        // `serve` needs at start beyond the file itself (CONTRACT.md, `check`): every error at once.
        var problems = loaded.startProblems.map(\.description)
        for (index, route) in configuration.routes.enumerated() {
            if var problem = credentialFileProblem(route.credentials) {
                if configuration.hasRoutes { problem.keyPath = "routes[\(index)].\(problem.keyPath)" }
                problems.append(problem.description)
            }
        }
        problems += listenerTLSProblems(configuration) + spoolFolderProblems(configuration)
        problems += storeFolderProblems(configuration) + forwardProxyCAProblems(configuration) + auditFileProblems(configuration)
        var seen: Set<String> = []
        problems = problems.filter { seen.insert($0).inserted }  // a file the loader and a check below both name
        if problems.count == 1 { fail("configuration error: \(problems[0])", status: Exit.badConfiguration) }
        if !problems.isEmpty {
            fail("\(problems.count) configuration errors:" + problems.map { "\n  \($0)" }.joined(), status: Exit.badConfiguration)
        }
        for warning in loaded.warnings { FileHandle.standardError.write(Data("warning: \(warning)\n".utf8)) }
        print(configuration.resolvedDescription(), terminator: configuration.resolvedDescription().hasSuffix("\n") ? "" : "\n")
        print("workers: \(Server.workerCount(configuration.workers)) (resolved)")
        print("configuration ok")
    }
}

/// The audit file as `serve` will open it (`AppendOnlyFile.refusal`): not a symbolic link, the
/// process's own, written by it alone and read by no other user; or, not there yet, a folder to make it in.
func auditFileProblems(_ configuration: Configuration) -> [String] {
    guard case .file(let path)? = configuration.audit?.destination, let problem = AppendOnlyFile.problem(at: path) else { return [] }
    return ["audit.path: \(problem)"]
}

/// A file store's folder must take the session file (made 0700 when missing), as the user `check`
/// runs as: a read-only configuration folder under the default `store.path` is the usual miss.
func storeFolderProblems(_ configuration: Configuration) -> [String] {
    var seen: Set<String> = []
    let environment = ProcessInfo.processInfo.environment
    return configuration.routes.enumerated().compactMap { index, route -> String? in
        guard route.credentials.keepsSession(environment: environment), route.store.redis == nil, seen.insert(route.store.path).inserted,
            let problem = FileAccess.creationProblem(route.store.path)
        else { return nil }
        let key = configuration.hasRoutes ? "routes[\(index)].store.path" : "store.path"
        return "\(key): \(route.store.path): \(problem)"
    }
}

/// The forward proxy's CA as `serve` will take it, without making it: both files readable, a key
/// `KeyFilePermissions` accepts and a CA certificate; or neither there and a folder to make them in.
func forwardProxyCAProblems(_ configuration: Configuration) -> [String] {
    guard let forward = configuration.forwardProxy else { return [] }
    let keyKey = forward.caConfigured ? "forward_proxy.ca_key_file" : "forward_proxy"
    let certificateKey = forward.caConfigured ? "forward_proxy.ca_cert_file" : "forward_proxy"
    switch (FileKind.of(forward.caCertFile) != nil, FileKind.of(forward.caKeyFile) != nil) {
    case (false, false):
        guard let problem = FileAccess.creationProblem(forward.caKeyFile) else { return [] }
        return ["\(keyKey): the CA would be made at start as \(forward.caKeyFile): \(problem)"]
    case (true, false): return ["\(keyKey): \(TLSSetupError.incompleteAuthority(missing: forward.caKeyFile))"]
    case (false, true): return ["\(certificateKey): \(TLSSetupError.incompleteAuthority(missing: forward.caCertFile))"]
    case (true, true):
        let unreadable = [(certificateKey, forward.caCertFile), (keyKey, forward.caKeyFile)].compactMap { key, path in
            FileAccess.readProblem(path).map { "\(key): \($0)" }
        }
        guard unreadable.isEmpty else { return unreadable }
        do throws(TLSSetupError) {
            _ = try CertificateAuthority.load(certificateFile: forward.caCertFile, keyFile: forward.caKeyFile)
            return []
        } catch {
            switch error {
            case .noCertificate, .notAnAuthority: return ["\(certificateKey): \(error)"]
            default: return ["\(keyKey): \(error)"]
            }
        }
    }
}

/// What `check` and `serve` find wrong with a listener's files beyond what the loader sees (a file
/// that holds no certificate, a key that is not the certificate's, a client CA file without a CA), by
/// key path: the listener's context is set up once here as it will be at start.
func listenerTLSProblems(_ configuration: Configuration) -> [String] {
    var settings: [(keyPath: String, tls: ListenerTLSConfiguration)] = []
    if let tls = configuration.listenTLS { settings.append(("tls", tls)) }
    for (index, route) in configuration.routes.enumerated() {
        if let tls = route.ownListenerTLS { settings.append(("routes[\(index)].tls", tls)) }
    }
    return settings.compactMap { keyPath, tls -> String? in
        do throws(TLSSetupError) {
            _ = try TLSServerContext(certificateFile: tls.certFile, keyFile: tls.keyFile, clientCAFile: tls.clientCAFile)
            return nil
        } catch {
            return "\(keyPath).\(listenerTLSKey(at: error, tls)): \(error)"
        }
    }
}

/// What `check` and `serve` find wrong with the spool folder of a route that spools bodies (CONTRACT
/// `forward.request_buffering_disk`: the process's own, mode 0700, not a symbolic link), by key path:
/// `request_buffering_path` when it names the folder.
func spoolFolderProblems(_ configuration: Configuration) -> [String] {
    configuration.routes.enumerated().compactMap { index, route -> String? in
        guard route.forward.requestBufferingDisk > 0, let problem = PrivateFolder.problem(at: route.spoolFolder) else { return nil }
        let key = route.forward.requestBufferingPath == nil ? "request_buffering_disk" : "request_buffering_path"
        return (configuration.hasRoutes ? "routes[\(index)]." : "") + "forward.\(key): the spool folder \(problem)"
    }
}

/// The key of `tls:` whose file `error` is about.
func listenerTLSKey(at error: TLSSetupError, _ tls: ListenerTLSConfiguration) -> String {
    func key(naming path: String) -> String {
        if path == tls.keyFile { return "key_file" }
        return path == tls.clientCAFile ? "client_ca_file" : "cert_file"
    }
    switch error {
    case .unreadableFile(let path, _), .keyFileNotPrivate(let path, _), .noCertificate(let path), .noPrivateKey(let path),
        .unusableClientCA(let path), .cannotWrite(let path, _), .notAnAuthority(let path), .incompleteAuthority(let path):
        return key(naming: path)
    case .keyDoesNotMatchCertificate: return "key_file"
    case .invalidHostName, .openSSL: return "cert_file"
    }
}
