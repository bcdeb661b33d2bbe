import Config

/// `source: default`: the SDKs' order, the first source whose settings are present:
/// environment, web identity, container, instance metadata (always present: it is the last resort).
/// https://docs.aws.amazon.com/sdkref/latest/guide/standardized-credentials.html
enum AWSDefaultChain {
    /// The source `configuration.source` stands for: itself, or for `default` the first present.
    static func pick(_ configuration: AWSConfiguration, environment: [String: String]) -> AWSConfiguration.Source {
        guard configuration.source == .default else { return configuration.source }
        if AWSEnvironmentCredentials.isPresent(configuration, environment: environment) { return .environment }
        if AWSWebIdentityCredentials.isPresent(configuration, environment: environment) { return .webIdentity }
        if AWSContainerCredentials.isPresent(configuration, environment: environment) { return .container }
        return .instanceMetadata
    }
}

extension AWSConfiguration {
    /// Whether the credentials are fetched (STS, the container endpoint, IMDS) and so kept in the
    /// store. Keys read from the environment or `_file` keys never are (CONTRACT.md "AWS credentials
    /// and SigV4 signing"): a stored copy outlived their rotation.
    public func fetchesCredentials(environment: [String: String]) -> Bool {
        roleARN != nil || AWSDefaultChain.pick(self, environment: environment) != .environment
    }
}
