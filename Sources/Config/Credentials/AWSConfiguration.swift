/// `type: aws` (CONTRACT.md "AWS credentials and SigV4 signing"): where the AWS credentials come
/// from and what requests are signed for. The credentials themselves are read by
/// Credentials/TokenSources/AWS*.swift at each fetch, never by the loader.
public struct AWSConfiguration: Sendable, Equatable {
    public enum Source: String, Sendable, Equatable, CaseIterable {
        case environment
        case webIdentity = "web_identity"
        case container
        case instanceMetadata = "instance_metadata"
        /// The SDKs' order: the first of the others whose settings are present.
        case `default`
    }
    public enum Payload: String, Sendable, Equatable, CaseIterable { case signed, unsigned }

    /// Where one value of the `environment` source comes from: a variable or a file.
    public enum ValueOrigin: Sendable, Equatable {
        case env(String)
        case file(String)
    }

    public var region: String
    /// The signing name (s3, execute-api, es, aps, lambda, bedrock, …).
    public var service: String
    public var source: Source = .default
    public var roleARN: String? = nil
    public var roleSessionName: String? = nil
    public var stsEndpoint: String? = nil
    public var payload: Payload = .signed
    /// `environment`: nil means AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN.
    public var accessKeyID: ValueOrigin? = nil
    public var secretAccessKey: ValueOrigin? = nil
    public var sessionToken: ValueOrigin? = nil
    /// `web_identity`: nil means AWS_WEB_IDENTITY_TOKEN_FILE.
    public var webIdentityTokenFile: String? = nil
    /// `container`: nil means AWS_CONTAINER_CREDENTIALS_FULL_URI (or _RELATIVE_URI under http://169.254.170.2).
    public var containerEndpoint: String? = nil
    /// `instance_metadata`: nil means http://169.254.169.254.
    public var imdsEndpoint: String? = nil

    public init(region: String, service: String) {
        self.region = region
        self.service = service
    }
}

extension Keys {
    static let aws = [
        "region", "service", "source", "role_arn", "role_session_name", "sts_endpoint", "payload",
        "access_key_id_env", "access_key_id_file", "secret_access_key_env", "secret_access_key_file",
        "session_token_env", "session_token_file", "web_identity_token_file", "container_endpoint", "imds_endpoint",
    ]
}

extension AWSConfiguration {
    static func parse(_ s: YAMLSection, errorsBefore: Int, in load: LoadContext) -> AWSConfiguration? {
        let region = load.found.collect { try s.nonEmptyString("region") }
        let service = load.found.collect { try s.nonEmptyString("service") }
        let source = load.found.collect { try s.choice("source", AWSConfiguration.Source.self) }
        let payload = load.found.collect { try s.choice("payload", AWSConfiguration.Payload.self) }
        let roleARN = load.found.collect { try s.nonEmptyString("role_arn") }
        let roleSessionName = load.found.collect { try s.nonEmptyString("role_session_name") }
        let stsEndpoint = load.found.collect { try load.checkURL(s, "sts_endpoint") }
        let tokenFile = load.found.collect { try load.laterFile(s, "web_identity_token_file") }
        let containerEndpoint = load.found.collect { try load.checkURL(s, "container_endpoint") }
        let imdsEndpoint = load.found.collect { try load.checkURL(s, "imds_endpoint") }
        var origins: [String: AWSConfiguration.ValueOrigin] = [:]
        for base in ["access_key_id", "secret_access_key", "session_token"] {
            if let origin = load.found.collect({ try valueOrigin(s, base, in: load) }) { origins[base] = origin }
        }
        guard load.found.errors.count == errorsBefore else { return nil }
        guard let region else {
            load.found.record(ConfigurationError.missingCredential("region", for: .aws, " (the region signed for)"))
            return nil
        }
        guard let service else {
            load.found.record(ConfigurationError.missingCredential("service", for: .aws, " (the signing name: s3, execute-api, es, aps, lambda, …)"))
            return nil
        }
        var c = AWSConfiguration(region: region.trimmingWhitespace(), service: service.trimmingWhitespace())
        c.source = source ?? .default
        c.payload = payload ?? .signed
        c.roleARN = roleARN
        c.roleSessionName = roleSessionName
        c.stsEndpoint = stsEndpoint
        c.webIdentityTokenFile = tokenFile
        c.containerEndpoint = containerEndpoint
        c.imdsEndpoint = imdsEndpoint
        c.accessKeyID = origins["access_key_id"]
        c.secretAccessKey = origins["secret_access_key"]
        c.sessionToken = origins["session_token"]
        if (c.accessKeyID == nil) != (c.secretAccessKey == nil) {
            load.found.record(ConfigurationError(keyPath: "credentials.access_key_id_env", reason: "set access_key_id_* and secret_access_key_* together"))
            return nil
        }
        return c
    }

    /// `<base>_env` (a variable's name) or `<base>_file` (a path); read at each fetch, not here.
    private static func valueOrigin(_ s: YAMLSection, _ base: String, in load: LoadContext) throws -> AWSConfiguration.ValueOrigin? {
        let env = try s.nonEmptyString("\(base)_env")
        let file = try load.laterFile(s, "\(base)_file")
        if env != nil, file != nil {
            throw ConfigurationError(keyPath: s.path("\(base)_file"), reason: "set only one of \(base)_env and \(base)_file")
        }
        if let env {
            let name = env.trimmingWhitespace()
            if load.env(name) == nil {
                let state = load.environment[name] == nil ? "is not set" : "is empty"
                load.startProblems.record(ConfigurationError(keyPath: s.path("\(base)_env"), reason: "the environment variable \(name) \(state)"))
            }
            return .env(name)
        }
        return file.map { .file($0) }
    }
}

extension AWSConfiguration {
    func describe(_ line: (String, String?) -> Void) {
        line("region", region)
        line("service", service)
        line("source", source.rawValue)
        line("payload", payload.rawValue)
        line("role_arn", roleARN)
        line("role_session_name", roleSessionName)
        line("sts_endpoint", stsEndpoint)
        line("web_identity_token_file", webIdentityTokenFile)
        line("container_endpoint", containerEndpoint)
        line("imds_endpoint", imdsEndpoint)
    }
}
