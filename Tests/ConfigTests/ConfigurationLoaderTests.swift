import Foundation
import Testing

@testable import Config

/// The contract's example file, with the type-specific comments left out.
let contractExampleYAML = """
    listen: 127.0.0.1:8080
    upstream: https://api.example.com/v1
    allow_remote: false
    drain_timeout: 10s
    workers: 0

    admin:
      listen: 127.0.0.1:9901

    credentials:
      type: oauth2_refresh
      refresh_margin: 5m
      default_lifetime: 1h
      issuer_url: https://idp.example.com
      token_url: https://idp.example.com/oauth/token
      client_id: my-client
      client_secret_env: CLIENT_SECRET
      client_auth: basic
      scope: "read write"
      audience: https://api.example.com
      extra_params: {resource: "https://api.example.com", version: 2}
      refresh_token_env: SEED_REFRESH_TOKEN
      login: password
      device_authorization_url: https://idp.example.com/oauth/device
      revocation_url: https://idp.example.com/oauth/revoke

    upstream_tls:
      ca_file: /etc/ssl/private-ca.pem
      client_cert_file: client.pem
      client_key_file: client.key
      insecure_skip_verify: false

    sink:
      path: /run/tokenproxy/token

    store:
      path: ./state/tokens.json

    access:
      require_header: X-Proxy-Key
      require_value_env: PROXY_KEY
      allow_paths: ["/users/", "/orders/"]
      allow_methods: [GET, post]
      allow_hosts: [localhost, 127.0.0.1, "[::1]"]
      allow_origins: []
      unix_mode: "0660"

    forward:
      client_authorization: replace
      preserve_host: false
      retry_body_limit: 1MiB
      retry_memory: 64MiB

    limits:
      max_header_bytes: 64KiB
      max_body_bytes: 0
      max_connections: 4096
      client_header_timeout: 10s
      client_idle_timeout: 60s
      upstream_timeout: 60s
      upstream_idle_timeout: 60s
      refresh_wait: 10s

    log:
      level: info
      format: text
      access_log: false
    """

let contractExampleEnvironment = [
    "CLIENT_SECRET": "client-secret-value", "SEED_REFRESH_TOKEN": "seed-refresh-value", "PROXY_KEY": "proxy-key-value",
]

@Suite struct ConfigurationLoaderTests {
    @Test func theContractsExampleFileParsesWithTheExpectedValues() throws {
        let loaded = try parse(contractExampleYAML, base: "/etc/tokenproxy", environment: contractExampleEnvironment)
        let config = loaded.configuration
        #expect(loaded.warnings == [])
        #expect(config.listen == .tcp(host: "127.0.0.1", port: 8080))
        #expect(
            config.upstream
                == UpstreamURL(
                    scheme: "https", host: "api.example.com", port: 443, explicitPort: false, basePath: "/v1",
                    original: "https://api.example.com/v1"))
        #expect(config.allowRemote == false)
        #expect(config.drainTimeout == 10)
        #expect(config.workers == 0)
        #expect(config.admin == AdminConfiguration(listen: .tcp(host: "127.0.0.1", port: 9901)))
        #expect(config.baseDirectory == "/etc/tokenproxy")

        let c = config.credentials
        #expect(c.type == .oauth2Refresh)
        #expect(c.refreshMargin == 300)
        #expect(c.defaultLifetime == 3600)
        let refresh = try #require(c.asOAuth2Refresh)
        #expect(refresh.client.issuerURL == "https://idp.example.com")
        #expect(refresh.client.tokenURL == "https://idp.example.com/oauth/token")
        #expect(refresh.client.clientID == "my-client")
        #expect(refresh.client.clientSecret == Secret(value: "client-secret-value", origin: .env("CLIENT_SECRET")))
        #expect(refresh.client.authentication == .basic)
        #expect(refresh.client.scope == "read write")
        #expect(refresh.client.audience == "https://api.example.com")
        #expect(refresh.client.extraParams == ["resource": "https://api.example.com", "version": "2"])
        #expect(refresh.seedRefreshToken == Secret(value: "seed-refresh-value", origin: .env("SEED_REFRESH_TOKEN")))
        #expect(refresh.login == .password)
        #expect(refresh.deviceAuthorizationURL == "https://idp.example.com/oauth/device")
        #expect(refresh.revocationURL == "https://idp.example.com/oauth/revoke")

        #expect(config.upstreamTLS.caFile == "/etc/ssl/private-ca.pem")
        #expect(config.upstreamTLS.clientCertFile == "/etc/tokenproxy/client.pem")
        #expect(config.upstreamTLS.clientKeyFile == "/etc/tokenproxy/client.key")
        #expect(config.upstreamTLS.insecureSkipVerify == false)
        #expect(config.sink == SinkConfiguration(path: "/run/tokenproxy/token"))
        #expect(config.store == StoreConfiguration(path: "/etc/tokenproxy/state/tokens.json"))

        #expect(config.access.requireHeader == "X-Proxy-Key")
        #expect(config.access.requireValue == Secret(value: "proxy-key-value", origin: .env("PROXY_KEY")))
        #expect(config.access.allowPaths == ["/users/", "/orders/"])
        #expect(config.access.allowMethods == ["GET", "POST"])
        #expect(config.access.allowHosts == ["localhost", "127.0.0.1", "[::1]"])
        #expect(config.access.allowOrigins == [])
        #expect(config.access.unixMode == 0o660)

        #expect(config.forward == ForwardConfiguration())
        #expect(config.limits == LimitsConfiguration())
        #expect(config.log == LogConfiguration())
    }

    /// Issue 32 point 6: an idle upstream connection outlives the pause between a benchmark cell's
    /// rounds (about 23 runs of 10 s in the anchor run, ~270 s), as the anchor's nginx keeps its own
    /// (`keepalive_timeout 300s`); 60 s emptied the pool and refilled it with TLS handshakes.
    @Test func idleUpstreamConnectionsAreKeptFiveMinutesByDefault() {
        #expect(LimitsConfiguration().upstreamKeepaliveTimeout == 300)
    }

    @Test func leftOutSectionsTakeTheContractsDefaults() throws {
        let loaded = try parse(minimalYAML, base: "/srv/proxy")
        let config = loaded.configuration
        #expect(loaded.warnings == [])
        #expect(config.listen == .tcp(host: "127.0.0.1", port: 8080))
        #expect(config.admin == nil)
        #expect(config.sink == nil)
        #expect(config.store.path == "/srv/proxy/state/tokens.json")
        #expect(config.drainTimeout == 10)
        #expect(config.upstreamTLS == UpstreamTLSConfiguration())
        #expect(config.access == AccessConfiguration())
        #expect(config.forward.clientAuthorization == .replace)
        #expect(config.forward.retryBodyLimit == 1 << 20)
        #expect(config.forward.retryMemory == 64 << 20)
        #expect(config.limits.maxHeaderBytes == 64 << 10)
        #expect(config.limits.maxConnections == 4096)
        #expect(config.log.level == .info)
        #expect(config.credentials.refreshMargin == 300)
        #expect(config.credentials.defaultLifetime == 3600)
        #expect(config.credentials.asStatic?.token == Secret(value: "static-token-value", origin: .env("TOKEN")))
    }

    @Test(arguments: [
        ("http://Example.COM", "http", "example.com", 80, false, ""),
        ("https://api.example.com/", "https", "api.example.com", 443, false, ""),
        ("https://api.example.com:8443/v1/", "https", "api.example.com", 8443, true, "/v1"),
        ("http://[::1]:9000/base/path", "http", "::1", 9000, true, "/base/path"),
        ("HTTPS://127.0.0.1", "https", "127.0.0.1", 443, false, ""),
    ])
    func upstreamURLsAreSplitIntoSchemeHostPortAndBasePath(
        url: String, scheme: String, host: String, port: Int, explicitPort: Bool, basePath: String
    ) throws {
        let yaml = minimalYAML.replacingOccurrences(of: "https://api.example.com", with: url)
        let upstream = try parse(yaml).configuration.upstream
        #expect(upstream.scheme == scheme)
        #expect(upstream.host == host)
        #expect(upstream.port == port)
        #expect(upstream.explicitPort == explicitPort)
        #expect(upstream.basePath == basePath)
        #expect(upstream.original == url)
    }

    @Test(arguments: [
        ("127.0.0.1:0", ListenAddress.tcp(host: "127.0.0.1", port: 0)),
        ("127.1.2.3:65535", .tcp(host: "127.1.2.3", port: 65535)),
        ("localhost:8080", .tcp(host: "localhost", port: 8080)),
        ("[::1]:8080", .tcp(host: "::1", port: 8080)),
        ("unix:/run/tokenproxy.sock", .unix(path: "/run/tokenproxy.sock")),
        ("unix:run/proxy.sock", .unix(path: "/etc/tokenproxy/run/proxy.sock")),
        ("unix:./proxy.sock", .unix(path: "/etc/tokenproxy/proxy.sock")),
    ])
    func loopbackAndUnixListenAddressesAreAccepted(text: String, expected: ListenAddress) throws {
        let config = try parse("listen: \"\(text)\"\n" + minimalYAML).configuration
        #expect(config.listen == expected)
    }

    @Test func aRemoteListenAddressIsAcceptedWithAllowRemote() throws {
        let config = try parse("listen: 0.0.0.0:8080\nallow_remote: true\nadmin: {listen: \"[::]:9901\"}\n" + minimalYAML).configuration
        #expect(config.listen == .tcp(host: "0.0.0.0", port: 8080))
        #expect(config.admin?.listen == .tcp(host: "::", port: 9901))
        #expect(config.allowRemote)
    }

    @Test func environmentVariablesOverrideListenAndUpstream() throws {
        var environment = minimalEnvironment
        environment["TOKENPROXY_LISTEN"] = "127.0.0.1:9999"
        environment["TOKENPROXY_UPSTREAM"] = "http://localhost:3000/api"
        let config = try parse("listen: 127.0.0.1:8080\n" + minimalYAML, environment: environment).configuration
        #expect(config.listen == .tcp(host: "127.0.0.1", port: 9999))
        #expect(config.upstream.origin == "http://localhost:3000")
        #expect(config.upstream.basePath == "/api")
    }

    @Test func theUpstreamMayComeOnlyFromTheEnvironment() throws {
        var environment = minimalEnvironment
        environment["TOKENPROXY_UPSTREAM"] = "https://env.example.com"
        let config = try parse("credentials: {type: static, token_env: TOKEN}", environment: environment).configuration
        #expect(config.upstream.host == "env.example.com")
    }

    @Test func anEmptyEnvironmentOverrideIsIgnored() throws {
        var environment = minimalEnvironment
        environment["TOKENPROXY_LISTEN"] = ""
        let config = try parse("listen: 127.0.0.1:7000\n" + minimalYAML, environment: environment).configuration
        #expect(config.listen == .tcp(host: "127.0.0.1", port: 7000))
    }

    @Test func relativePathsAreResolvedAgainstTheConfigFilesFolder() throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        try folder.write("secrets/client", "file-secret-value\n")
        try folder.write("seed", "seed-from-file\r\n")
        try folder.write(
            "proxy.yaml",
            """
            upstream: https://api.example.com
            credentials:
              type: oauth2_refresh
              token_url: https://idp.example.com/token
              client_id: c
              client_secret_file: secrets/client
              refresh_token_file: ./seed
            upstream_tls:
              ca_file: ../ca.pem
              client_cert_file: tls/client.pem
            sink: {path: token}
            store: {path: state/../store/tokens.json}
            """)
        let loaded = try ConfigurationLoader.load(path: folder.path + "/proxy.yaml", environment: [:])
        let config = loaded.configuration
        let base = folder.resolved
        #expect(config.baseDirectory == base)
        #expect(config.credentials.source.oauth2Client?.clientSecret == Secret(value: "file-secret-value", origin: .file(base + "/secrets/client")))
        #expect(config.credentials.source.seedRefreshToken == Secret(value: "seed-from-file", origin: .file(base + "/seed")))
        #expect(config.upstreamTLS.caFile == (base as NSString).deletingLastPathComponent + "/ca.pem")
        #expect(config.upstreamTLS.clientCertFile == base + "/tls/client.pem")
        #expect(config.sink?.path == base + "/token")
        #expect(config.store.path == base + "/store/tokens.json")
    }

    @Test func aSecretFileLosesOnlyOneTrailingNewline() throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        try folder.write("token", "abc\n\n")
        let yaml = "upstream: http://localhost:1\ncredentials: {type: static, token_file: token}"
        let config = try parse(yaml, base: folder.path, environment: [:]).configuration
        #expect(config.credentials.asStatic?.token.value == "abc\n")
    }

    @Test func fileAndExecPathsAreResolvedButNeedNotExist() throws {
        let file = try parse("upstream: http://localhost:1\ncredentials: {type: file, path: tokens/current}", base: "/opt/p").configuration
        #expect(file.credentials.asFile?.path == "/opt/p/tokens/current")

        let exec = try parse(
            "upstream: http://localhost:1\ncredentials: {type: exec, command: [bin/get-token, --audience, api], exec_timeout: 2s}",
            base: "/opt/p"
        ).configuration
        #expect(exec.credentials.asExec?.command == ["/opt/p/bin/get-token", "--audience", "api"])
        #expect(exec.credentials.asExec?.timeout == 2)

        let onPath = try parse("upstream: http://localhost:1\ncredentials: {type: exec, command: [get-token]}", base: "/opt/p").configuration
        #expect(onPath.credentials.asExec?.command == ["get-token"])
    }

    @Test func loadingAMissingFileNamesThePath() {
        #expect(throws: ConfigurationError.self) {
            try ConfigurationLoader.load(path: "/nonexistent/tokenproxy.yaml", environment: [:])
        }
        do {
            _ = try ConfigurationLoader.load(path: "/nonexistent/tokenproxy.yaml", environment: [:])
        } catch {
            #expect("\(error)".contains("/nonexistent/tokenproxy.yaml"))
        }
    }

    @Test func eachCredentialsTypeAcceptsItsOwnKeysWithoutWarnings() throws {
        let files = [
            "type: oauth2_client_credentials\n  issuer_url: https://idp\n  client_id: c\n  client_secret_env: CLIENT_SECRET\n  client_auth: post",
            "type: cognito\n  region: us-east-1\n  client_id: c\n  use_token: id\n  refresh_token_env: UNSET_SEED",
            "type: cognito\n  endpoint: http://127.0.0.1:5000\n  client_id: c",
            "type: json_refresh\n  login_url: https://api/auth/login\n  refresh_url: https://api/auth/refresh\n  refresh_token_in: body\n  expires_at_path: data.exp",
            "type: oauth2_refresh\n  issuer_url: https://idp\n  client_id: c\n  login: device",
        ]
        for body in files {
            let loaded = try parse("upstream: http://localhost:1\ncredentials:\n  \(body)", environment: ["CLIENT_SECRET": "s"])
            #expect(loaded.warnings == [], "\(body)")
        }
        let json = try #require(try parse("upstream: http://localhost:1\ncredentials:\n  \(files[3])").configuration.credentials.asJSONRefresh)
        #expect(json.expiresAtPath == "data.exp")
        #expect(json.expiresInPath == nil)
        #expect(json.refreshTokenIn == .body)
        let cognito = try #require(try parse("upstream: http://localhost:1\ncredentials:\n  \(files[1])").configuration.credentials.asCognito)
        #expect(cognito.seedRefreshToken == nil)
        #expect(cognito.useToken == .id)
    }

    @Test func knownKeysListsEverySectionAndItsKeys() {
        let keys = ConfigurationLoader.knownKeys
        for key in [
            "listen", "upstream", "admin.listen", "credentials.token_url", "credentials.command", "limits.max_header_bytes",
            "access.require_value_file", "log.access_log", "upstream_tls.insecure_skip_verify", "store.path", "sink.path",
        ] {
            #expect(keys.contains(key), "\(key)")
        }
        #expect(Set(keys).count == keys.count)
    }

    @Test func aUnixModeMayBeWrittenQuotedOrPlain() throws {
        #expect(try parse(minimalYAML + "\naccess: {unix_mode: 0600}").configuration.access.unixMode == 0o600)
        #expect(try parse(minimalYAML + "\naccess: {unix_mode: \"0666\"}").configuration.access.unixMode == 0o666)
        #expect(try parse(minimalYAML + "\naccess: {unix_mode: \"0666\"}").configuration.resolvedDescription().contains("access.unix_mode: \"0666\""))
    }

    @Test func anIPv4MappedLoopbackListenAddressCountsAsLoopback() throws {
        let config = try parse("listen: \"[::ffff:127.0.0.1]:80\"\n" + minimalYAML).configuration
        #expect(config.listen == .tcp(host: "::ffff:127.0.0.1", port: 80))
    }
}
