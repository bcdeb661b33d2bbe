/// `type: azure_managed_identity`: the Azure instance metadata service's (or App Service's) token
/// for the managed identity, for one resource.
public struct AzureManagedIdentityConfiguration: Sendable, Equatable {
    /// Exactly one of `resource` and `scope` is set (a v2 scope "R/.default" names the resource R).
    public var resource: String? = nil
    public var scope: String? = nil
    /// A user-assigned identity; nil: the system-assigned one.
    public var clientID: String? = nil
    /// nil: http://169.254.169.254
    public var endpoint: String? = nil
    public init(resource: String? = nil, scope: String? = nil) {
        self.resource = resource
        self.scope = scope
    }
}

extension Keys {
    static let azureManagedIdentity = ["resource", "scope", "client_id", "endpoint"]
}

extension AzureManagedIdentityConfiguration {
    static func parse(_ s: YAMLSection, errorsBefore: Int, in load: LoadContext) -> AzureManagedIdentityConfiguration? {
        var c = AzureManagedIdentityConfiguration()
        c.endpoint = load.found.collect { try load.checkURL(s, "endpoint") }
        c.clientID = load.found.collect { try s.nonEmptyString("client_id") }
        c.scope = load.found.collect { try s.string("scope") }
        c.resource = load.found.collect { try s.nonEmptyString("resource") }
        guard load.found.errors.count == errorsBefore else { return nil }
        if c.resource != nil, c.scope != nil {
            load.found.record(ConfigurationError(keyPath: "credentials.scope", reason: "set only one of resource and scope"))
            return nil
        }
        guard c.resource != nil || c.scope != nil else {
            load.found.record(ConfigurationError(keyPath: "credentials.resource", reason: "required for type azure_managed_identity (or scope)"))
            return nil
        }
        return c
    }
}

extension AzureManagedIdentityConfiguration {
    func describe(_ line: (String, String?) -> Void) {
        line("endpoint", endpoint)
        line("client_id", clientID.map(quoted))
        line("scope", scope.map(quoted))
        line("resource", resource.map(quoted))
    }
}
