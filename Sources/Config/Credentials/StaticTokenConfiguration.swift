/// `type: static`: one token, from `token_env` or `token_file`, read by the loader.
public struct StaticTokenConfiguration: Sendable, Equatable {
    public var token: Secret
    public init(token: Secret) { self.token = token }
}

extension Keys {
    static let staticToken = ["token_env", "token_file"]
}

extension StaticTokenConfiguration {
    static func parse(_ s: YAMLSection, errorsBefore: Int, in load: LoadContext) -> StaticTokenConfiguration? {
        let token = load.found.collect { try load.readSecret(s, "token", literal: false) }
        guard load.found.errors.count == errorsBefore else { return nil }
        guard let token else {
            load.found.record(ConfigurationError(keyPath: "credentials.token_env", reason: "type static needs token_env or token_file"))
            return nil
        }
        return StaticTokenConfiguration(token: token)
    }
}

extension StaticTokenConfiguration {
    func describe(_ line: (String, String?) -> Void) {
        line("token", token.description)
    }
}
