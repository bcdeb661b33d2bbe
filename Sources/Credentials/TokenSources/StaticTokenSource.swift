import Config

/// `type: static`: the token from `token_env` / `token_file`, read once by the configuration loader.
/// It never expires unless it is a JWT with `exp`; a refresh hands back the same token, so a 401
/// costs nothing and changes nothing.
final class StaticTokenSource: TokenSource {
    let kind = "static"
    let defaultLifetime: Double? = nil
    private let token: String

    init(_ configuration: StaticTokenConfiguration) throws {
        let token = configuration.token.value.trimmingWhitespace()
        guard BearerToken.isUsable(token) else {
            throw ConfigurationError(
                keyPath: "credentials.token_env",
                reason: "the static token is empty or contains spaces or control characters"
            )
        }
        registerSecret(token)
        self.token = token
    }

    func fetch(current: TokenSnapshot?) throws -> IssuedToken {
        IssuedToken(accessToken: token)
    }
}

extension String {
    /// Without leading and trailing spaces, tabs, CR and LF.
    func trimmingWhitespace() -> String {
        let bytes = Array(utf8)
        var start = 0
        var end = bytes.count
        func isSpace(_ byte: UInt8) -> Bool { byte == 0x20 || byte == 0x09 || byte == 0x0A || byte == 0x0D }
        while start < end && isSpace(bytes[start]) { start += 1 }
        while end > start && isSpace(bytes[end - 1]) { end -= 1 }
        if start == 0 && end == bytes.count { return self }
        return String(decoding: bytes[start..<end], as: UTF8.self)
    }
}
