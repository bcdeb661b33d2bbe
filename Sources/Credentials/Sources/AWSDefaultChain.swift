import Config

/// `source: default`: the SDKs' order, the first source whose settings are present:
/// environment, web identity, container, instance metadata (always present: it is the last resort).
/// https://docs.aws.amazon.com/sdkref/latest/guide/standardized-credentials.html
enum AWSDefaultChain {
    static func choose(_ configuration: AWSConfiguration, environment: [String: String]) throws -> any AWSCredentialSource {
        if AWSEnvironmentCredentials.isPresent(configuration, environment: environment) {
            return AWSEnvironmentCredentials(configuration, environment: environment)
        }
        if AWSWebIdentityCredentials.isPresent(configuration, environment: environment) {
            return try AWSWebIdentityCredentials(configuration, environment: environment)
        }
        if AWSContainerCredentials.isPresent(configuration, environment: environment) {
            return try AWSContainerCredentials(configuration, environment: environment)
        }
        return AWSInstanceMetadataCredentials(configuration)
    }
}
