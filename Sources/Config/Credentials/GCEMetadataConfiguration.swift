/// `type: gce_metadata`: the GCE / GKE metadata server's token for the service account the
/// machine or pod runs as; with `audience`, its ID token.
public struct GCEMetadataConfiguration: Sendable, Equatable {
    public var serviceAccount: String = "default"
    public var audience: String? = nil
    public var scope: String? = nil
    /// nil: http://metadata.google.internal
    public var endpoint: String? = nil
    public init() {}
}

extension Keys {
    static let gceMetadata = ["service_account", "audience", "scope", "endpoint"]
}

extension GCEMetadataConfiguration {
    func describe(_ line: (String, String?) -> Void) {
        line("endpoint", endpoint)
        line("scope", scope.map(quoted))
        line("audience", audience.map(quoted))
    }
}

extension GCEMetadataConfiguration {
    static func parse(_ s: YAMLSection, in load: LoadContext) -> GCEMetadataConfiguration {
        var c = GCEMetadataConfiguration()
        c.endpoint = load.found.collect { try load.checkURL(s, "endpoint") }
        c.scope = load.found.collect { try s.string("scope") }
        c.audience = load.found.collect { try s.nonEmptyString("audience") }
        if let value = load.found.collect({ try s.nonEmptyString("service_account") }) { c.serviceAccount = value }
        return c
    }
}
