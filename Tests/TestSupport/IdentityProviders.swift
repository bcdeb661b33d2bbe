import Foundation

// Launchers for the identity providers and token-checking upstreams in Tests/servers, each a real
// process started through `PythonServer` (so each waits for its READY line and stops on release).
// Their `stats()` read the server's own `GET /test/stats`: what the identity provider counted is
// what the tests assert ("exactly one refresh call for 50 concurrent requests").

/// Grant type names as `OAuthStats.calls` keys them.
public enum OAuthGrant {
    public static let password = "password"
    public static let refreshToken = "refresh_token"
    public static let clientCredentials = "client_credentials"
    public static let deviceCode = "urn:ietf:params:oauth:grant-type:device_code"
}

/// Token calls by kind (grant type, Cognito AuthFlow, or `login`/`refresh`) and outcome (`ok`, an
/// error code such as `invalid_grant` or `NotAuthorizedException`, `injected`, `down`).
public protocol TokenCallCounting {
    var calls: [String: [String: Int]] { get }
}

extension TokenCallCounting {
    /// Calls of `kind` with `outcome`, or with any outcome when `outcome` is nil.
    public func count(_ kind: String, outcome: String? = nil) -> Int {
        guard let byOutcome = calls[kind] else { return 0 }
        if let outcome { return byOutcome[outcome] ?? 0 }
        return byOutcome.values.reduce(0, +)
    }
}

/// `GET /test/stats` of oauth_server.py.
public struct OAuthStats: Decodable, Sendable, TokenCallCounting {
    public let calls: [String: [String: Int]]
    public let tokenCalls: Int
    /// The most token-endpoint calls that were in progress at once.
    public let maxConcurrent: Int
    public let deviceAuthorizations: Int
    public let revocations: Int
    public let introspections: Int
    /// Rotated refresh tokens presented again (each revoked its family).
    public let reuseDetected: Int
    /// Refresh tokens that would still be accepted.
    public let activeRefreshTokens: Int

    /// refresh_token grant calls, all outcomes.
    public var refreshes: Int { count(OAuthGrant.refreshToken) }
}

/// `GET /test/stats` of protected_api.py.
public struct ProtectedAPIStats: Decodable, Sendable {
    public let requests: Int
    public let ok: Int
    public let unauthorized: Int
    /// 401s by reason: missing, malformed, bad_signature, expired, inactive, rejected.
    public let reasons: [String: Int]
    /// Requests that came with an expired token (the proxy should never send one).
    public let expiredTokensSeen: Int
    /// The longest time past `exp` of such a token, in seconds.
    public let maxExpOvershootSeconds: Double
    public let distinctTokens: Int
    public let subjects: [String: Int]
    public let maxConcurrent: Int
}

/// `GET /test/stats` of json_backend.py.
public struct JSONBackendStats: Decodable, Sendable, TokenCallCounting {
    /// Keys `login` and `refresh`; outcomes ok, refused, bad_request, injected, down.
    public let calls: [String: [String: Int]]
    public let tokenCalls: Int
    public let maxConcurrent: Int
    public let reuseDetected: Int
    public let apiRequests: Int
    public let apiOk: Int
    public let apiUnauthorized: Int
    public let expiredTokensSeen: Int
    public let maxExpOvershootSeconds: Double
    /// How the last refresh call looked (to check "empty body, refresh token in the header").
    public let lastRefresh: LastRefresh?

    public struct LastRefresh: Decodable, Sendable {
        public let contentLength: Int
        public let contentType: String?
        public let authorizationScheme: String?
        public let body: String?
    }
}

/// `GET /test/stats` of cognito_idp.py.
public struct CognitoStats: Decodable, Sendable, TokenCallCounting {
    /// InitiateAuth calls by AuthFlow (`USER_PASSWORD_AUTH`, `REFRESH_TOKEN_AUTH`) and outcome.
    public let calls: [String: [String: Int]]
    public let tokenCalls: Int
    public let maxConcurrent: Int
    /// Other Cognito operations by name.
    public let otherCalls: [String: Int]
}

// MARK: - Shared plumbing

/// The test-control calls every identity provider server answers.
// @unchecked: not final (each server subclasses it), so the compiler cannot check it; it and its
// subclasses hold only immutable values (`let`s of Sendable types or plain structs).
public class TestControlledServer: @unchecked Sendable {
    public let server: PythonServer

    init(_ server: PythonServer) { self.server = server }

    public var port: Int { server.port }
    /// `http://127.0.0.1:PORT`
    public var baseURL: String { server.baseURL }
    /// The server's stderr so far (for failure messages).
    public var stderr: String { server.stderr }

    public func stop() { server.stop() }

    /// POSTs to a `/test/...` control and expects 200.
    public func control(_ path: String, query: [String: String] = [:]) throws {
        var components = URLComponents(string: baseURL + path)!
        if !query.isEmpty {
            components.queryItems = query.sorted { $0.key < $1.key }.map { URLQueryItem(name: $0.key, value: $0.value) }
        }
        let result = try curl(["-X", "POST", "--data", "", components.string!])
        guard result.status == 200 else {
            throw HarnessError("\(server.name): POST \(path) answered \(result.status): \(result.bodyString) \(result.stderr)")
        }
    }

    /// `GET /test/stats`, decoded (snake_case keys become camelCase).
    public func decodeStats<T: Decodable>(_ type: T.Type) throws -> T {
        let result = try curl([baseURL + "/test/stats"])
        guard result.status == 200 else {
            throw HarnessError("\(server.name): GET /test/stats answered \(result.status): \(result.stderr)")
        }
        let decoder = JSONDecoder()
        decoder.keyDecodingStrategy = .convertFromSnakeCase
        do {
            return try decoder.decode(T.self, from: Data(result.body))
        } catch {
            throw HarnessError("\(server.name): cannot decode /test/stats (\(error)): \(result.bodyString)")
        }
    }

    /// Zeroes the server's counters.
    public func resetStats() throws { try control("/test/reset-stats") }

    /// The token endpoint (and, for oauth_server, device authorization and revocation) answers
    /// 503 while down.
    public func setDown(_ down: Bool) throws { try control(down ? "/test/down" : "/test/up") }
}

// MARK: - OAuth 2.0 authorization server

/// oauth_server.py: Authlib's authorization server with password, refresh_token,
/// client_credentials and device_code grants, revocation, introspection and discovery.
// @unchecked: as TestControlledServer; only `let`s.
public final class OAuthServer: TestControlledServer, @unchecked Sendable {
    public struct Client: Sendable {
        public var id: String
        /// nil: a public client (token endpoint auth method `none`).
        public var secret: String?
        public init(id: String, secret: String?) {
            self.id = id
            self.secret = secret
        }
    }

    public struct User: Sendable {
        public var name: String
        public var password: String
        public init(name: String, password: String) {
            self.name = name
            self.password = password
        }
    }

    public struct Options: Sendable {
        public var clients: [Client] = [Client(id: "app", secret: "secret")]
        public var users: [User] = [User(name: "alice", password: "wonderland")]
        /// Access token lifetime in seconds.
        public var accessTTL: Int = 20
        /// Refresh token lifetime in seconds (0: never expires); nil: the server's default (1 day).
        public var refreshTTL: Int? = nil
        /// Access tokens are HS256 JWTs signed with this key; nil: opaque tokens.
        public var jwtKey: String? = nil
        /// false: token responses have no `expires_in`.
        public var includeExpiresIn = true
        /// Refresh token rotation with reuse detection.
        public var rotate = true
        /// Each token-endpoint call waits this long before it is processed.
        public var tokenDelayMs = 0
        public var deviceInterval = 1
        public var enforceDeviceInterval = true
        public var extraArguments: [String] = []

        public init() {}

        /// Options for JWT access tokens with a fresh random key.
        public static func jwt() -> Options {
            var options = Options()
            options.jwtKey = "test-jwt-key-\(UUID().uuidString.lowercased())"
            return options
        }

        var arguments: [String] {
            var args: [String] = []
            for client in clients {
                args += ["--client", client.secret.map { "\(client.id):\($0)" } ?? client.id]
            }
            for user in users { args += ["--user", "\(user.name):\(user.password)"] }
            args += ["--access-ttl", String(accessTTL)]
            if let refreshTTL { args += ["--refresh-ttl", String(refreshTTL)] }
            if let jwtKey { args += ["--jwt", "--jwt-key", jwtKey] }
            if !includeExpiresIn { args.append("--no-expires-in") }
            args.append(rotate ? "--rotate" : "--no-rotate")
            if tokenDelayMs > 0 { args += ["--token-delay-ms", String(tokenDelayMs)] }
            args += ["--device-interval", String(deviceInterval)]
            if !enforceDeviceInterval { args.append("--no-enforce-interval") }
            return args + extraArguments
        }
    }

    public let options: Options

    private init(server: PythonServer, options: Options) {
        self.options = options
        super.init(server)
    }

    public static func start(_ options: Options = Options()) throws -> OAuthServer {
        OAuthServer(server: try PythonServer("oauth_server", arguments: options.arguments), options: options)
    }

    /// The issuer (`/.well-known/openid-configuration` lives under it).
    public var issuer: String { baseURL }
    public var tokenURL: String { baseURL + "/oauth/token" }
    public var deviceAuthorizationURL: String { baseURL + "/oauth/device" }
    public var revocationURL: String { baseURL + "/oauth/revoke" }
    public var introspectionURL: String { baseURL + "/oauth/introspect" }

    public func stats() throws -> OAuthStats { try decodeStats(OAuthStats.self) }

    /// Approves (or denies) the device authorization with `userCode`, as the user would in a browser.
    public func approveDevice(userCode: String, username: String? = nil, deny: Bool = false) throws {
        var query = ["user_code": userCode]
        if let username { query["username"] = username }
        if deny { query["deny"] = "1" }
        try control("/test/approve", query: query)
    }

    /// The next `count` token-endpoint calls answer `status` with `{"error": error}` (default
    /// `temporarily_unavailable`), or with `rawBody` as a text body.
    public func failNext(status: Int = 503, count: Int = 1, error: String? = nil, rawBody: String? = nil, retryAfter: Int? = nil) throws {
        var query = ["status": String(status), "count": String(count)]
        if let error { query["error"] = error }
        if let rawBody { query["raw"] = rawBody }
        if let retryAfter { query["retry_after"] = String(retryAfter) }
        try control("/test/fail", query: query)
    }

    /// Revokes every refresh token (and every access token with `accessTokens`): the next refresh
    /// is `invalid_grant`.
    public func revokeAll(accessTokens: Bool = false) throws {
        try control("/test/revoke-all", query: accessTokens ? ["access": "1"] : [:])
    }

    /// A token-endpoint call of our own (e.g. to seed a refresh token), with client_secret_basic
    /// for the first client. Returns the JSON answer; throws unless the status is 200.
    public func requestToken(_ form: [String: String], client: Client? = nil) throws -> [String: Any] {
        let client = client ?? options.clients[0]
        var args = ["-X", "POST"]
        if let secret = client.secret {
            args += ["-u", "\(client.id):\(secret)"]
        } else {
            args += ["--data-urlencode", "client_id=\(client.id)"]
        }
        for (key, value) in form.sorted(by: { $0.key < $1.key }) { args += ["--data-urlencode", "\(key)=\(value)"] }
        let result = try curl(args + [tokenURL])
        guard result.status == 200, let json = result.json else {
            throw HarnessError("token request answered \(result.status): \(result.bodyString)")
        }
        return json
    }

    /// A password grant for the first user (or `user`): the JSON answer with `refresh_token`.
    public func passwordGrant(user: User? = nil) throws -> [String: Any] {
        let user = user ?? options.users[0]
        return try requestToken(["grant_type": "password", "username": user.name, "password": user.password])
    }
}

// MARK: - Protected API

/// protected_api.py: an upstream that checks every bearer token for real.
// @unchecked: as TestControlledServer; no stored property of its own.
public final class ProtectedAPI: TestControlledServer, @unchecked Sendable {
    public enum Verification: Sendable {
        /// HS256 JWTs with this key (oauth_server's `--jwt` key).
        case jwt(key: String)
        /// RS256 JWTs from this JWKS (e.g. `CognitoIdP.jwksURL`).
        case jwks(url: String)
        /// Opaque tokens, checked per request with RFC 7662 at `url` with this client.
        case introspection(url: String, clientID: String, clientSecret: String)
    }

    public static func start(_ verification: Verification, extraArguments: [String] = []) throws -> ProtectedAPI {
        var args: [String]
        switch verification {
        case .jwt(let key): args = ["--jwt-key", key]
        case .jwks(let url): args = ["--jwks-url", url]
        case .introspection(let url, let id, let secret):
            args = ["--introspection-url", url, "--introspection-client", "\(id):\(secret)"]
        }
        return ProtectedAPI(try PythonServer("protected_api", arguments: args + extraArguments))
    }

    /// An API that accepts `oauth`'s access tokens: by the JWT key when it issues JWTs, else by
    /// introspection with its first confidential client.
    public static func start(for oauth: OAuthServer) throws -> ProtectedAPI {
        if let key = oauth.options.jwtKey { return try start(.jwt(key: key)) }
        guard let client = oauth.options.clients.first(where: { $0.secret != nil }), let secret = client.secret else {
            throw HarnessError("introspection needs a confidential client on the OAuth server")
        }
        return try start(.introspection(url: oauth.introspectionURL, clientID: client.id, clientSecret: secret))
    }

    /// An API that accepts `cognito`'s access and id tokens (moto's RS256 keys).
    public static func start(for cognito: CognitoIdP) throws -> ProtectedAPI {
        try start(.jwks(url: cognito.jwksURL))
    }

    public func stats() throws -> ProtectedAPIStats { try decodeStats(ProtectedAPIStats.self) }

    /// The next `count` requests get 401 whatever their token (-1: until `accept()`).
    public func reject(count: Int = -1) throws { try control("/test/reject", query: ["count": String(count)]) }

    /// Every token presented so far is refused from now on.
    public func rejectSeenTokens() throws { try control("/test/reject-seen") }

    /// Undoes `reject` and `rejectSeenTokens`.
    public func accept() throws { try control("/test/accept") }
}

// MARK: - JSON login/refresh backend

/// json_backend.py: a backend with its own `POST /auth/login` and `POST /auth/refresh`, which is
/// also the protected API under `/api/`.
// @unchecked: as TestControlledServer; only `let`s.
public final class JSONBackend: TestControlledServer, @unchecked Sendable {
    public struct Options: Sendable {
        public var users: [(name: String, password: String)] = [("alice", "wonderland")]
        public var accessTTL = 20
        public var refreshTTL: Int? = nil
        /// `header` (Authorization: Bearer, empty body) or `body` (`{"refresh_token": …}`).
        public var refreshIn = "header"
        public var accessTokenPath = "access_token"
        public var refreshTokenPath = "refresh_token"
        public var expiresInPath = "expires_in"
        /// Answers carry an absolute expiry at this path instead of `expires_in`.
        public var expiresAtPath: String? = nil
        /// `epoch` or `rfc3339`.
        public var expiresAtFormat = "epoch"
        public var noExpiry = false
        /// Access tokens are HS256 JWTs with this key; nil: opaque.
        public var jwtKey: String? = nil
        public var rotate = true
        public var tokenDelayMs = 0
        public var extraArguments: [String] = []

        public init() {}

        var arguments: [String] {
            var args: [String] = []
            for user in users { args += ["--user", "\(user.name):\(user.password)"] }
            args += ["--access-ttl", String(accessTTL), "--refresh-in", refreshIn]
            if let refreshTTL { args += ["--refresh-ttl", String(refreshTTL)] }
            args += ["--access-token-path", accessTokenPath, "--refresh-token-path", refreshTokenPath, "--expires-in-path", expiresInPath]
            if let expiresAtPath { args += ["--expires-at-path", expiresAtPath, "--expires-at-format", expiresAtFormat] }
            if noExpiry { args.append("--no-expiry") }
            if let jwtKey { args += ["--jwt", "--jwt-key", jwtKey] }
            args.append(rotate ? "--rotate" : "--no-rotate")
            if tokenDelayMs > 0 { args += ["--token-delay-ms", String(tokenDelayMs)] }
            return args + extraArguments
        }
    }

    public let options: Options

    private init(server: PythonServer, options: Options) {
        self.options = options
        super.init(server)
    }

    public static func start(_ options: Options = Options()) throws -> JSONBackend {
        JSONBackend(server: try PythonServer("json_backend", arguments: options.arguments), options: options)
    }

    public var loginURL: String { baseURL + "/auth/login" }
    public var refreshURL: String { baseURL + "/auth/refresh" }
    /// The upstream base URL for the proxy: `http://127.0.0.1:PORT/api`.
    public var apiURL: String { baseURL + "/api" }

    public func stats() throws -> JSONBackendStats { try decodeStats(JSONBackendStats.self) }

    /// The next `count` login/refresh calls answer `status` (with `rawBody` as a text body if given).
    public func failNext(status: Int = 503, count: Int = 1, rawBody: String? = nil) throws {
        var query = ["status": String(status), "count": String(count)]
        if let rawBody { query["raw"] = rawBody }
        try control("/test/fail", query: query)
    }

    /// Every refresh token (and with `accessTokens` every access token) becomes invalid.
    public func revokeAll(accessTokens: Bool = false) throws {
        try control("/test/revoke-all", query: accessTokens ? ["access": "1"] : [:])
    }
}

// MARK: - Cognito (moto)

/// cognito_idp.py: moto's Cognito user pool service with a pool, a public app client, a client
/// with a secret, and a user who signs in with an e-mail address (`username`) while the pool's
/// own username (`poolUsername`, the access token's `username` claim) is a GUID.
// @unchecked: as TestControlledServer; only `let`s.
public final class CognitoIdP: TestControlledServer, @unchecked Sendable {
    public struct Info: Decodable, Sendable {
        public let port: Int
        public let endpoint: String
        public let region: String
        public let poolId: String
        /// The app client without a secret.
        public let clientId: String
        /// The app client with a secret, and its secret (SECRET_HASH needed).
        public let clientIdSecret: String
        public let clientSecret: String
        /// The login name (an e-mail address).
        public let username: String
        /// The user's own username in the pool (a GUID), as in the access token's `username`.
        public let poolUsername: String
        public let password: String
    }

    public let info: Info
    private let infoDir: TempDir

    private init(server: PythonServer, info: Info, infoDir: TempDir) {
        self.info = info
        self.infoDir = infoDir
        super.init(server)
    }

    /// - Parameters:
    ///   - accessTTL: lifetime of access and id tokens in seconds (moto's own is 3600).
    ///   - tokenDelayMs: each InitiateAuth call waits this long first.
    ///   - lenientSecretHash: also accept a refresh SECRET_HASH made with the login name.
    public static func start(accessTTL: Int = 3600, tokenDelayMs: Int = 0, lenientSecretHash: Bool = false, extraArguments: [String] = []) throws -> CognitoIdP
    {
        let dir = try TempDir(prefix: "cognito")
        let infoPath = dir.file("info.json")
        var args = ["--info-file", infoPath, "--access-ttl", String(accessTTL)]
        if tokenDelayMs > 0 { args += ["--token-delay-ms", String(tokenDelayMs)] }
        if lenientSecretHash { args.append("--lenient-secret-hash") }
        let server = try PythonServer("cognito_idp", arguments: args + extraArguments, startupTimeout: 60)
        let decoder = JSONDecoder()
        decoder.keyDecodingStrategy = .convertFromSnakeCase
        let info: Info
        do {
            info = try decoder.decode(Info.self, from: Data(contentsOf: URL(fileURLWithPath: infoPath)))
        } catch {
            server.stop()
            throw HarnessError("cognito_idp.py: cannot read \(infoPath): \(error)")
        }
        return CognitoIdP(server: server, info: info, infoDir: dir)
    }

    /// The `endpoint:` for tokenproxy's cognito credentials: `http://127.0.0.1:PORT`.
    public var endpoint: String { info.endpoint }
    public var region: String { info.region }
    /// The pool's JWKS (moto's fixed RS256 key).
    public var jwksURL: String { "\(info.endpoint)/\(info.poolId)/.well-known/jwks.json" }

    public func stats() throws -> CognitoStats { try decodeStats(CognitoStats.self) }

    /// The next `count` InitiateAuth calls answer `status` with an AWS error of `type`
    /// (default InternalErrorException for 5xx, TooManyRequestsException otherwise).
    public func failNext(status: Int = 503, count: Int = 1, type: String? = nil) throws {
        var query = ["status": String(status), "count": String(count)]
        if let type { query["type"] = type }
        try control("/test/fail", query: query)
    }

    /// Revokes every refresh token: the next REFRESH_TOKEN_AUTH is NotAuthorizedException.
    public func revokeAll() throws { try control("/test/revoke-all") }
}
