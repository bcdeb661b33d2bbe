import Config
import Foundation

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
