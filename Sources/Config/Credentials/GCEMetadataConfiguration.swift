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

extension Builder {
    mutating func parseGCEMetadata(_ s: YAMLSection) -> GCEMetadataConfiguration {
        var c = GCEMetadataConfiguration()
        c.endpoint = found.collect { try checkURL(s, "endpoint") }
        c.scope = found.collect { try s.string("scope") }
        c.audience = found.collect { try s.nonEmptyString("audience") }
        if let value = found.collect({ try s.nonEmptyString("service_account") }) { c.serviceAccount = value }
        return c
    }
}
