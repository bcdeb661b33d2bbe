import Testing

@testable import Config

/// One invalid configuration and the key path and reason words its error must carry.
struct ErrorCase: Sendable, CustomTestStringConvertible {
    var name: String
    var yaml: String
    var environment: [String: String] = minimalEnvironment
    var keyPath: String
    var reason: String
    var testDescription: String { name }
}

private func withUpstream(_ url: String) -> String {
    minimalYAML.replacingOccurrences(of: "https://api.example.com", with: url)
}

private let errorCases: [ErrorCase] = [
    ErrorCase(name: "an unknown top-level key", yaml: "listne: 127.0.0.1:1\n" + minimalYAML, keyPath: "listne", reason: "unknown key (did you mean listen?)"),
    ErrorCase(
        name: "an unknown credentials key", yaml: minimalYAML + "\n  tokne_url: https://idp", keyPath: "credentials.tokne_url",
        reason: "unknown key (did you mean token_url?)"),
    ErrorCase(
        name: "an unknown nested key", yaml: minimalYAML + "\nlimits:\n  max_header_byte: 1KiB", keyPath: "limits.max_header_byte",
        reason: "did you mean max_header_bytes?"),
    ErrorCase(name: "an unknown key with no near match", yaml: minimalYAML + "\nlog: {colour: true}", keyPath: "log.colour", reason: "unknown key"),
    ErrorCase(
        name: "a credentials key at the top level", yaml: minimalYAML + "\ntoken_url: https://idp", keyPath: "token_url",
        reason: "belongs under credentials:"),
    ErrorCase(
        name: "a nested per-type credentials section", yaml: minimalYAML + "\n  exec: {command: [x]}", keyPath: "credentials.exec",
        reason: "directly under credentials:"),
    ErrorCase(
        name: "a string where a boolean is expected", yaml: "allow_remote: \"true\"\n" + minimalYAML, keyPath: "allow_remote",
        reason: "expected true or false, got a string"),
    ErrorCase(
        name: "a YAML 1.1 yes as a boolean", yaml: minimalYAML + "\nlog: {access_log: yes}", keyPath: "log.access_log",
        reason: "\"yes\" is not a boolean (use true or false)"),
    ErrorCase(
        name: "a list where a number is expected", yaml: "workers: [1]\n" + minimalYAML, keyPath: "workers", reason: "expected a whole number, got a list"),
    ErrorCase(
        name: "a mapping where a string is expected", yaml: "listen: {host: x}\n" + minimalYAML, keyPath: "listen", reason: "expected a string, got a mapping"),
    ErrorCase(name: "a section that is not a mapping", yaml: minimalYAML + "\nlimits: 5", keyPath: "limits", reason: "expected a mapping"),
    ErrorCase(
        name: "a duration with a bad unit", yaml: minimalYAML + "\nlimits: {client_idle_timeout: 10x}", keyPath: "limits.client_idle_timeout",
        reason: "\"10x\" is not a duration (use ms, s, m, h)"),
    ErrorCase(name: "a duration without a unit", yaml: "drain_timeout: 10\n" + minimalYAML, keyPath: "drain_timeout", reason: "did you mean 10s?"),
    ErrorCase(name: "a zero timeout", yaml: minimalYAML + "\nlimits: {upstream_timeout: 0}", keyPath: "limits.upstream_timeout", reason: "must be more than 0"),
    ErrorCase(
        name: "a size with a bad unit", yaml: minimalYAML + "\nlimits: {max_header_bytes: 64KB}", keyPath: "limits.max_header_bytes", reason: "is not a size"),
    ErrorCase(name: "a negative size", yaml: minimalYAML + "\nforward: {retry_memory: -1}", keyPath: "forward.retry_memory", reason: "is not a size"),
    ErrorCase(
        name: "a zero spool total", yaml: minimalYAML + "\nforward: {request_buffering_disk: 8MiB, request_buffering_disk_total: 0}",
        keyPath: "forward.request_buffering_disk_total", reason: "must be larger than 0"),
    ErrorCase(
        name: "a spool total that is no size", yaml: minimalYAML + "\nforward: {request_buffering_disk_total: lots}",
        keyPath: "forward.request_buffering_disk_total", reason: "is not a size"),
    ErrorCase(
        name: "zero max_connections", yaml: minimalYAML + "\nlimits: {max_connections: 0}", keyPath: "limits.max_connections", reason: "must be 1 or more"),
    ErrorCase(name: "negative workers", yaml: "workers: -1\n" + minimalYAML, keyPath: "workers", reason: "must be 0"),
    ErrorCase(name: "a missing upstream", yaml: "credentials: {type: static, token_env: TOKEN}", keyPath: "upstream", reason: "required"),
    ErrorCase(name: "missing credentials", yaml: "upstream: https://api.example.com", keyPath: "credentials", reason: "required"),
    ErrorCase(
        name: "a missing credentials type", yaml: "upstream: https://a\ncredentials: {token_env: TOKEN}", keyPath: "credentials.type", reason: "required"),
    ErrorCase(
        name: "an ftp upstream", yaml: withUpstream("ftp://files.example.com"), keyPath: "upstream",
        reason: "uses scheme ftp; only http and https are supported"),
    ErrorCase(
        name: "an upstream with userinfo", yaml: withUpstream("https://user:pw@api.example.com"), keyPath: "upstream",
        reason: "must not contain user information"),
    ErrorCase(name: "an upstream with a query", yaml: withUpstream("https://api.example.com/v1?x=1"), keyPath: "upstream", reason: "must not have a query"),
    ErrorCase(name: "an upstream with a fragment", yaml: withUpstream("https://api.example.com/#top"), keyPath: "upstream", reason: "must not have a fragment"),
    ErrorCase(name: "an upstream without a host", yaml: withUpstream("https:///v1"), keyPath: "upstream", reason: "has no host"),
    ErrorCase(name: "a relative upstream", yaml: withUpstream("api.example.com/v1"), keyPath: "upstream", reason: "not an absolute URL"),
    ErrorCase(name: "an upstream with a bad port", yaml: withUpstream("http://localhost:99999"), keyPath: "upstream", reason: "port"),
    ErrorCase(
        name: "a bad upstream from the environment", yaml: minimalYAML, environment: minimalEnvironment.merging(["TOKENPROXY_UPSTREAM": "ftp://x"]) { $1 },
        keyPath: "TOKENPROXY_UPSTREAM", reason: "only http and https"),
    ErrorCase(
        name: "a non-loopback listen without allow_remote", yaml: "listen: 0.0.0.0:8080\n" + minimalYAML, keyPath: "listen",
        reason: "0.0.0.0:8080 is not a loopback address; set allow_remote: true"),
    ErrorCase(
        name: "a non-loopback IPv6 listen without allow_remote", yaml: "listen: \"[2001:db8::1]:80\"\n" + minimalYAML, keyPath: "listen",
        reason: "not a loopback address"),
    ErrorCase(
        name: "a non-loopback admin listen without allow_remote", yaml: "admin: {listen: 10.0.0.1:9901}\n" + minimalYAML, keyPath: "admin.listen",
        reason: "not a loopback address"),
    ErrorCase(
        name: "a non-loopback listen from the environment", yaml: minimalYAML,
        environment: minimalEnvironment.merging(["TOKENPROXY_LISTEN": "192.168.1.1:80"]) { $1 }, keyPath: "TOKENPROXY_LISTEN",
        reason: "not a loopback address"),
    ErrorCase(
        name: "a key that belongs to several sections at the top level", yaml: minimalYAML + "\npath: x", keyPath: "path",
        reason: "belongs under credentials:, sink:, store: or audit:"),
    ErrorCase(
        name: "an admin listen equal to listen", yaml: "listen: 127.0.0.1:9000\nadmin: {listen: 127.0.0.1:9000}\n" + minimalYAML, keyPath: "admin.listen",
        reason: "same address as listen"),
    ErrorCase(name: "an unknown key inside admin", yaml: "admin: {lisen: 127.0.0.1:1}\n" + minimalYAML, keyPath: "admin.lisen", reason: "did you mean listen?"),
    ErrorCase(name: "a listen port out of range", yaml: "listen: 127.0.0.1:65536\n" + minimalYAML, keyPath: "listen", reason: "0 to 65535"),
    ErrorCase(name: "a listen host name", yaml: "listen: example.com:80\n" + minimalYAML, keyPath: "listen", reason: "not an IPv4 address or localhost"),
    ErrorCase(name: "a listen without a port", yaml: "listen: 127.0.0.1\n" + minimalYAML, keyPath: "listen", reason: "expected HOST:PORT"),
    ErrorCase(name: "an unbracketed IPv6 listen", yaml: "listen: \"::1:80\"\n" + minimalYAML, keyPath: "listen", reason: "in brackets"),
    ErrorCase(name: "admin without listen", yaml: "admin: {}\n" + minimalYAML, keyPath: "admin.listen", reason: "required"),
    ErrorCase(
        name: "a bad credentials type", yaml: "upstream: https://a\ncredentials: {type: oauth3}", keyPath: "credentials.type",
        reason: "\"oauth3\" is not one of oauth2_refresh |"),
    ErrorCase(
        name: "a bad log level", yaml: minimalYAML + "\nlog: {level: verbose}", keyPath: "log.level",
        reason: "\"verbose\" is not one of error | warn | info | debug"),
    ErrorCase(name: "a bad log format", yaml: minimalYAML + "\nlog: {format: xml}", keyPath: "log.format", reason: "is not one of text | json"),
    ErrorCase(
        name: "a bad client_authorization", yaml: minimalYAML + "\nforward: {client_authorization: drop}", keyPath: "forward.client_authorization",
        reason: "is not one of replace | keep | reject"),
    ErrorCase(
        name: "a bad client_auth",
        yaml: "upstream: https://a\ncredentials: {type: oauth2_client_credentials, token_url: https://i, client_id: c, client_auth: jwt}",
        keyPath: "credentials.client_auth", reason: "is not one of basic | post"),
    ErrorCase(
        name: "a missing env secret", yaml: minimalYAML, environment: [:], keyPath: "credentials.token_env", reason: "the environment variable TOKEN is not set"
    ),
    ErrorCase(
        name: "an empty env secret", yaml: minimalYAML, environment: ["TOKEN": ""], keyPath: "credentials.token_env",
        reason: "the environment variable TOKEN is empty"),
    ErrorCase(
        name: "both _env and _file", yaml: minimalYAML + "\n  token_file: /tmp/x", keyPath: "credentials.token_file",
        reason: "set only one of token_env, token_file"),
    ErrorCase(
        name: "a literal secret beside its _env",
        yaml: "upstream: https://a\ncredentials: {type: oauth2_client_credentials, token_url: https://i, client_id: c, client_secret: x, client_secret_env: S}",
        environment: ["S": "s"], keyPath: "credentials.client_secret_env", reason: "set only one of client_secret, client_secret_env, client_secret_file"),
    ErrorCase(
        name: "a missing secret file", yaml: "upstream: https://a\ncredentials: {type: static, token_file: missing/token}", keyPath: "credentials.token_file",
        reason: "cannot read /etc/tokenproxy/missing/token: no such file"),
    ErrorCase(
        name: "a missing seed refresh token file",
        yaml: "upstream: https://a\ncredentials: {type: cognito, region: eu-west-1, client_id: c, refresh_token_file: /nonexistent/seed}",
        keyPath: "credentials.refresh_token_file", reason: "no such file"),
    ErrorCase(
        name: "static without a token", yaml: "upstream: https://a\ncredentials: {type: static}", keyPath: "credentials.token_env",
        reason: "needs token_env or token_file"),
    ErrorCase(
        name: "oauth2 without client_id", yaml: "upstream: https://a\ncredentials: {type: oauth2_refresh, token_url: https://i}",
        keyPath: "credentials.client_id", reason: "required for type oauth2_refresh"),
    ErrorCase(
        name: "oauth2 without a token_url or issuer_url", yaml: "upstream: https://a\ncredentials: {type: oauth2_client_credentials, client_id: c}",
        keyPath: "credentials.token_url", reason: "or set issuer_url"),
    ErrorCase(
        name: "device login without a device endpoint",
        yaml: "upstream: https://a\ncredentials: {type: oauth2_refresh, token_url: https://i, client_id: c, login: device}",
        keyPath: "credentials.device_authorization_url", reason: "required for login: device"),
    ErrorCase(
        name: "cognito without a region or endpoint", yaml: "upstream: https://a\ncredentials: {type: cognito, client_id: c}", keyPath: "credentials.region",
        reason: "or set endpoint"),
    ErrorCase(
        name: "json_refresh without refresh_url", yaml: "upstream: https://a\ncredentials: {type: json_refresh}", keyPath: "credentials.refresh_url",
        reason: "required"),
    ErrorCase(name: "file without a path", yaml: "upstream: https://a\ncredentials: {type: file}", keyPath: "credentials.path", reason: "required"),
    ErrorCase(name: "exec without a command", yaml: "upstream: https://a\ncredentials: {type: exec}", keyPath: "credentials.command", reason: "required"),
    ErrorCase(
        name: "an exec command as one string", yaml: "upstream: https://a\ncredentials: {type: exec, command: get-token --x}", keyPath: "credentials.command",
        reason: "must be a list of strings"),
    ErrorCase(
        name: "an empty exec command", yaml: "upstream: https://a\ncredentials: {type: exec, command: []}", keyPath: "credentials.command",
        reason: "must not be empty"),
    ErrorCase(
        name: "an ftp token_url", yaml: "upstream: https://a\ncredentials: {type: oauth2_client_credentials, client_id: c, token_url: ftp://idp/token}",
        keyPath: "credentials.token_url", reason: "only http and https"),
    ErrorCase(
        name: "an extra_params value that is a list",
        yaml: "upstream: https://a\ncredentials: {type: oauth2_client_credentials, client_id: c, token_url: https://i, extra_params: {a: [1]}}",
        keyPath: "credentials.extra_params.a", reason: "expected a string"),
    ErrorCase(
        name: "an extra_params field the proxy sets",
        yaml: "upstream: https://a\ncredentials: {type: oauth2_client_credentials, client_id: c, token_url: https://i, extra_params: {grant_type: x}}",
        keyPath: "credentials.extra_params.grant_type", reason: "is set by the proxy"),
    ErrorCase(
        name: "an allow_paths entry without a slash", yaml: minimalYAML + "\naccess: {allow_paths: [/ok, users/]}", keyPath: "access.allow_paths[1]",
        reason: "must start with /"),
    ErrorCase(
        name: "a non-octal unix_mode", yaml: minimalYAML + "\naccess: {unix_mode: \"0680\"}", keyPath: "access.unix_mode", reason: "not an octal file mode"),
    ErrorCase(
        name: "require_header without a value", yaml: minimalYAML + "\naccess: {require_header: X-Key}", keyPath: "access.require_header",
        reason: "needs require_value_env"),
    ErrorCase(
        name: "a key file without a certificate", yaml: minimalYAML + "\nupstream_tls: {client_key_file: k.pem}", keyPath: "upstream_tls.client_cert_file",
        reason: "required"),
    ErrorCase(
        name: "both expires paths",
        yaml: "upstream: https://a\ncredentials: {type: json_refresh, refresh_url: https://r, expires_in_path: a, expires_at_path: b}",
        keyPath: "credentials.expires_at_path", reason: "set only one"),
    ErrorCase(name: "an empty file", yaml: "", keyPath: "", reason: "the configuration file is empty"),
    ErrorCase(name: "a comment-only file", yaml: "# nothing\n", keyPath: "", reason: "the configuration file is empty"),
    ErrorCase(name: "a list at the root", yaml: "- a\n- b", keyPath: "", reason: "the top level must be a mapping"),
    ErrorCase(name: "a scalar at the root", yaml: "hello", keyPath: "", reason: "the top level must be a mapping"),
    ErrorCase(name: "invalid YAML", yaml: "upstream: [unclosed", keyPath: "", reason: "not valid YAML at line"),
    ErrorCase(name: "a duplicated key", yaml: minimalYAML + "\nupstream: https://b", keyPath: "", reason: "duplicate key upstream"),
]

@Suite struct ConfigurationErrorTests {
    @Test(arguments: errorCases)
    func anInvalidFileFailsWithTheKeyPathAndTheReason(_ c: ErrorCase) throws {
        let error = try #require(parseError(c.yaml, environment: c.environment), "no error for: \(c.name)")
        #expect(error.keyPath == c.keyPath, "\(error)")
        #expect(error.reason.contains(c.reason), "\(error)")
        if !c.keyPath.isEmpty { #expect(error.description.hasPrefix(c.keyPath + ": ")) }
    }

    @Test func anUnreadableSecretFileIsAnError() throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        try folder.write("token/inner", "x")
        let error = try #require(parseError("upstream: https://a\ncredentials: {type: static, token_file: token}", base: folder.path))
        #expect(error.keyPath == "credentials.token_file")
        #expect(error.reason.contains("it is a folder"))
    }

    @Test func anEmptySecretFileIsAnError() throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        try folder.write("token", "\n")
        let error = try #require(parseError("upstream: https://a\ncredentials: {type: static, token_file: token}", base: folder.path))
        #expect(error.keyPath == "credentials.token_file")
        #expect(error.reason.contains("is empty"))
    }
}
