import Config
import Foundation
import Sockets

/// `source: environment`: AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and AWS_SESSION_TOKEN, or the
/// variables and files that `access_key_id_env`/`_file`, `secret_access_key_env`/`_file` and
/// `session_token_env`/`_file` name; files are read again at every fetch (a rotated key is seen).
/// https://docs.aws.amazon.com/cli/latest/userguide/cli-configure-envvars.html
public struct AWSEnvironmentCredentials: AWSCredentialSource {
    public let name = "environment"
    let accessKeyID: AWSConfiguration.ValueOrigin
    let secretAccessKey: AWSConfiguration.ValueOrigin
    let sessionToken: AWSConfiguration.ValueOrigin?
    let environment: [String: String]

    public init(_ configuration: AWSConfiguration, environment: [String: String]) {
        if let keyID = configuration.accessKeyID, let secret = configuration.secretAccessKey {
            accessKeyID = keyID
            secretAccessKey = secret
            sessionToken = configuration.sessionToken
        } else {
            accessKeyID = .env("AWS_ACCESS_KEY_ID")
            secretAccessKey = .env("AWS_SECRET_ACCESS_KEY")
            sessionToken = configuration.sessionToken ?? .env("AWS_SESSION_TOKEN")
        }
        self.environment = environment
    }

    /// The default chain takes this source when the access key's variable is set.
    static func isPresent(_ configuration: AWSConfiguration, environment: [String: String]) -> Bool {
        if configuration.accessKeyID != nil { return true }
        return !(environment["AWS_ACCESS_KEY_ID"] ?? "").isEmpty
    }

    public func fetch() throws -> AWSCredentials {
        guard let keyID = try read(accessKeyID), let secret = try read(secretAccessKey) else {
            throw AWSCredentialError(name, "\(describe(accessKeyID)) and \(describe(secretAccessKey)) must both be set")
        }
        let token = try sessionToken.flatMap { try read($0) }
        return AWSCredentials(accessKeyID: keyID, secretAccessKey: secret, sessionToken: token)
    }

    private func read(_ origin: AWSConfiguration.ValueOrigin) throws -> String? {
        switch origin {
        case .env(let variable):
            let value = (environment[variable] ?? "").trimmingCharacters(in: .whitespacesAndNewlines)
            return value.isEmpty ? nil : value
        case .file(let path):
            guard let data = FileManager.default.contents(atPath: path) else { throw AWSCredentialError(name, "cannot read \(path)") }
            let value = String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
            return value.isEmpty ? nil : value
        }
    }

    private func describe(_ origin: AWSConfiguration.ValueOrigin) -> String {
        switch origin {
        case .env(let variable): return variable
        case .file(let path): return path
        }
    }
}

/// `type: aws` with keys from the environment or `_file` keys (CONTRACT.md "AWS credentials and SigV4
/// signing"): a token source without a store. The keys are read at start (a reload that changes the
/// credentials makes a new source) and again when a `_file` key's file changes, so a restart with
/// new keys signs with them at once; a stored copy, which the store handed back after a restart,
/// outlived their rotation. A store an older version wrote them to is not read.
final class AWSKeysTokenSource: TokenSource {
    let kind = CredentialsType.aws.rawValue
    let defaultLifetime: Double? = nil
    let pollInterval: Double?
    /// The fetch and its errors as every `type: aws` source has them (the container-endpoint JSON).
    private let provider: AWSIdentityProvider
    private let files: [String]
    private var signatures: [FileSignature?]

    init(_ configuration: AWSConfiguration, environment: [String: String]) {
        provider = AWSIdentityProvider(RegisteringSecrets(AWSEnvironmentCredentials(configuration, environment: environment)))
        files = [configuration.accessKeyID, configuration.secretAccessKey, configuration.sessionToken].compactMap { origin in
            if case .file(let path)? = origin { return path }
            return nil
        }
        signatures = files.map { FileSignature.of($0) }
        pollInterval = files.isEmpty ? nil : 1
    }

    func inputChanged() -> Bool {
        let now = files.map { FileSignature.of($0) }
        guard now != signatures else { return false }
        signatures = now
        return true
    }

    func fetch(current: TokenSnapshot?) throws -> IssuedToken { try provider.refresh(nil) }
}
