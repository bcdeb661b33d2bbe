import Foundation
import TestSupport
import Testing

/// DPoP-bound tokens and RFC 8693 token exchange against idpyoidc's own authorization server
/// (`idpy_server.py`: PyPI `idpyoidc`, its token endpoint, its DPoP add-on and its token-exchange
/// helper, run as a process), with the real binary. The protected API is `dpop_servers.py` with
/// `--jwks-url`: it verifies idpyoidc's signed access tokens by idpyoidc's JWKS and, for a DPoP
/// token, the proof fully with joserfc (signature by the header's jwk, htm, htu, iat, a jti never
/// seen, ath) and the token's `cnf.jkt` against the proof key.
@Suite("idpyoidc", .tags(.endToEnd), .timeLimit(.minutes(35)))
struct IdpyoidcTests {
    /// idpyoidc, the API that trusts its JWKS, and a session the test user (`diana`) authorized
    /// inside idpyoidc (its session manager's grant and code, redeemed at its token endpoint).
    struct World {
        let idp: PythonServer
        let api: PythonServer
        let seed: [String: Any]
        let dir: TempDir

        init(dpop: Bool, idpArguments: [String] = []) throws {
            idp = try PythonServer("idpy_server", arguments: (dpop ? ["--dpop"] : []) + idpArguments, startupTimeout: 60)
            api = try PythonServer("dpop_servers", arguments: (dpop ? [] : ["--bearer"]) + ["--jwks-url", idp.baseURL + "/jwks"])
            let login = try curl(["-X", "POST", idp.baseURL + "/test/login"])
            guard login.status == 200, let seed = login.json else { throw HarnessError("idpyoidc's login answered \(login.status): \(login.bodyString)") }
            self.seed = seed
            dir = try TempDir(prefix: "tokenproxy-idpy")
        }

        func config(_ credentials: String) -> String {
            """
            listen: 127.0.0.1:0
            upstream: \(api.baseURL)/api
            workers: 2
            drain_timeout: 1s
            admin:
              listen: 127.0.0.1:0
            credentials:
              token_url: \(idp.baseURL)/token
              client_auth: none
            \(credentials.split(separator: "\n").map { "  " + $0 }.joined(separator: "\n"))
            log:
              level: debug
            """
        }

        /// `tokenproxy serve` in `dir` with an RFC 8693 exchange of the seed's access token (in
        /// `./subject`) for an access token, and `more` credentials lines.
        func serveExchange(_ more: String) throws -> ProxyProcess {
            let subject = try #require(seed["access_token"] as? String)
            _ = try dir.write("subject", subject)
            let credentials = """
                type: oauth2_token_exchange
                client_id: exchanger
                subject_token_file: ./subject
                subject_token_type: urn:ietf:params:oauth:token-type:access_token

                """
            return try ProxyProcess(config: config(credentials + more), directory: dir)
        }

        /// The key a token-endpoint answer bound its token to: token_type DPoP, and a `jkt` other than
        /// the seed session's.
        func boundKey(_ answer: [String: Any], sourceLocation: SourceLocation = #_sourceLocation) throws -> String {
            #expect(answer["token_type"] as? String == "DPoP", sourceLocation: sourceLocation)
            let jkt = try #require(answer["jkt"] as? String, sourceLocation: sourceLocation)
            #expect(jkt != seed["seed_jkt"] as? String, sourceLocation: sourceLocation)
            return jkt
        }

        func idpStats() throws -> [String: Any] { try #require(try curl([idp.baseURL + "/test/stats"]).json) }
        func apiStats() throws -> [String: Any] { try #require(try curl([api.baseURL + "/test/stats"]).json) }

        func answers(_ grant: String) throws -> [[String: Any]] {
            (try idpStats()["answers"] as? [[String: Any]] ?? []).filter { $0["grant_type"] as? String == grant }
        }

        func store() throws -> [String: Any] {
            let data = try Data(contentsOf: URL(fileURLWithPath: dir.file("state/tokens.json")))
            return try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        }
    }

    /// The claims of a JWT (its payload, not verified: the API verified it).
    static func claims(_ jwt: String) throws -> [String: Any] {
        let parts = jwt.split(separator: ".")
        guard parts.count == 3 else { throw HarnessError("not a JWT") }
        var text = parts[1].replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        text += String(repeating: "=", count: (4 - text.count % 4) % 4)
        let data = try #require(Data(base64Encoded: text))
        return try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
    }

    @Test(
        "idpyoidc's refresh grant binds the token to the proxy's DPoP key (token_type DPoP, cnf.jkt); every request reaches the API as Authorization: DPoP with a verified proof; a second refresh proves the same key"
    )
    func dpopBoundRefresh() throws {
        let world = try World(dpop: true)
        #expect(world.seed["token_type"] as? String == "DPoP")
        let seededRefresh = try #require(world.seed["refresh_token"] as? String)
        _ = try world.dir.write("refresh_token", seededRefresh)
        let proxy = try ProxyProcess(
            config: world.config(
                """
                type: oauth2_refresh
                client_id: proxy
                refresh_token_file: ./refresh_token
                dpop: {}
                """), directory: world.dir)
        var seen = Set<String>()
        for index in 0..<10 {
            let answer = try curl(
                index % 2 == 0 ? [proxy.baseURL + "/orders/\(index)?page=2"] : ["-X", "POST", "--data", "x=1", proxy.baseURL + "/orders"])
            #expect(answer.status == 200, "\(answer.bodyString)")
            if let jkt = answer.json?["jkt"] as? String { seen.insert(jkt) }
        }
        // idpyoidc answered the refresh (with the proxy's proof) token_type DPoP, bound to one key.
        let refreshes = try world.answers("refresh_token")
        #expect(refreshes.count == 1)
        let jkt = try world.boundKey(try #require(refreshes.first))
        // The API verified every proof by that key, and the token's cnf.jkt names it.
        #expect(seen == [jkt])
        var api = try world.apiStats()
        #expect(api["api_ok"] as? Int == 10)
        #expect((api["api_refused"] as? [String: Int])?.isEmpty == true, "\(api)")
        #expect(api["jti_reused"] as? Int == 0)
        #expect((api["elsewhere_client_ids"] as? [String])?.allSatisfy { $0 == "proxy" } == true)
        var store = try world.store()
        #expect(store["token_type"] as? String == "DPoP")
        let access = try #require(store["access_token"] as? String)
        #expect((try Self.claims(access)["cnf"] as? [String: Any])?["jkt"] as? String == jkt)
        // idpyoidc rotates the refresh token and revokes the old one: the stored one is the new one.
        let rotated = try #require(store["refresh_token"] as? String)
        #expect(rotated != seededRefresh)

        // A refresh the admin listener asks for: a new proof by the same key, the rotated refresh
        // token accepted, and the new token bound to the same key again.
        #expect(try curl(["-X", "POST", try #require(proxy.adminURL) + "/refresh"]).status == 202)
        #expect(try eventually { try world.answers("refresh_token").count == 2 })
        #expect(try eventually { (try world.store()["access_token"] as? String).map { $0 != access } == true })
        let second = try #require(try world.answers("refresh_token").last)
        #expect(second["token_type"] as? String == "DPoP")
        #expect(second["jkt"] as? String == jkt)
        #expect((try world.idpStats()["grants"] as? [String: [String: Int]])?["refresh_token"] == ["200": 2])
        let after = try curl([proxy.baseURL + "/after-refresh"])
        #expect(after.status == 200)
        #expect(after.json?["jkt"] as? String == jkt)
        api = try world.apiStats()
        #expect(api["api_ok"] as? Int == 11)
        store = try world.store()
        #expect(store["refresh_token"] as? String != rotated)
        #expect(!proxy.stderr.contains(seededRefresh) && !proxy.stderr.contains(rotated))
    }

    @Test(
        "tokenproxy login with login: browser through idpyoidc's authorization endpoint (PKCE S256): the code grant is DPoP-bound to the proxy's key, and serve and a refresh keep proving that key"
    )
    func browserLoginWithDPoP() throws {
        let port = try freePort()
        let redirect = "http://127.0.0.1:\(port)/callback"
        let world = try World(dpop: true, idpArguments: ["--redirect-uri", redirect])
        let config = world.config(
            """
            type: oauth2_refresh
            login: browser
            authorization_url: \(world.idp.baseURL)/authorization
            redirect_uri: \(redirect)
            client_id: proxy
            scope: "openid read"
            dpop: {}
            """)
        let path = try world.dir.write("tokenproxy.yaml", config)
        let browserLog = world.dir.file("browser.log")
        let login = try ProxyProcess.run(
            args: ["login", "--config", path, "--timeout", "60s"],
            env: [
                "BROWSER": RepositoryPaths.servers.appendingPathComponent("scripted_browser.py").path,
                "SCRIPTED_BROWSER_LOG": browserLog, "DISPLAY": "",
            ], timeout: 120)
        #expect(login.status == 0, "\(login.output)")
        let steps = (try? String(contentsOfFile: browserLog, encoding: .utf8)) ?? ""
        #expect(steps.contains("\"step\": \"callback\", \"status\": 200"), "\(steps)")
        #expect((try world.idpStats()["grants"] as? [String: [String: Int]])?["authorization"]?["302"] == 1)
        // The first code grant is the World's own seed session (another key); the second is the login's.
        let codes = try world.answers("authorization_code")
        #expect(codes.count == 2)
        let jkt = try world.boundKey(try #require(codes.last))
        #expect(try world.store()["token_type"] as? String == "DPoP")
        let loggedIn = try #require(try world.store()["access_token"] as? String)
        #expect((try Self.claims(loggedIn)["cnf"] as? [String: Any])?["jkt"] as? String == jkt)

        let proxy = try ProxyProcess(config: config, directory: world.dir)
        let first = try curl([proxy.baseURL + "/orders/1?page=2"])
        #expect(first.status == 200, "\(first.bodyString)")
        #expect(first.json?["jkt"] as? String == jkt)
        #expect(try curl(["-X", "POST", try #require(proxy.adminURL) + "/refresh"]).status == 202)
        #expect(try eventually { try world.answers("refresh_token").count == 1 })
        let refresh = try #require(try world.answers("refresh_token").first)
        #expect(refresh["token_type"] as? String == "DPoP")
        #expect(refresh["jkt"] as? String == jkt)
        #expect(try eventually { try world.store()["access_token"] as? String != loggedIn })
        let second = try curl([proxy.baseURL + "/orders/2"])
        #expect(second.status == 200, "\(second.bodyString)")
        #expect(second.json?["jkt"] as? String == jkt)
        let api = try world.apiStats()
        #expect((api["api_refused"] as? [String: Int])?.isEmpty == true, "\(api)")
        #expect(api["jti_reused"] as? Int == 0)
    }

    @Test(
        "RFC 8693 with idpyoidc's token-exchange helper: an access token it issued is exchanged, the exchanged token reaches the API, and the proxy trusts the JWT's 60 s exp over expires_in 3600"
    )
    func tokenExchange() throws {
        let world = try World(dpop: false)
        let subject = try #require(world.seed["access_token"] as? String)
        let proxy = try world.serveExchange("requested_token_type: urn:ietf:params:oauth:token-type:access_token")
        for index in 0..<3 {
            let answer = try curl([proxy.baseURL + "/orders/\(index)"])
            #expect(answer.status == 200, "\(answer.bodyString)")
        }
        // One exchange at start (a second one comes 30 s later, at half the 60 s lifetime, which a
        // slow machine may reach: every exchange is checked, not their number).
        let exchanges = try #require(try world.idpStats()["exchanges"] as? [[String: Any]])
        #expect(!exchanges.isEmpty)
        for exchange in exchanges {
            #expect(exchange["client_id"] as? String == "exchanger")
            #expect(exchange["subject_token_type"] as? String == "urn:ietf:params:oauth:token-type:access_token")
            #expect(exchange["actor"] as? Bool == false)
        }
        // The API saw idpyoidc's exchanged token (issued to `exchanger`), not the subject token
        // (issued to `proxy`).
        let api = try world.apiStats()
        #expect(api["api_ok"] as? Int == 3)
        #expect(api["elsewhere_client_ids"] as? [String] == ["exchanger", "exchanger", "exchanger"])
        // idpyoidc's exchange answer says expires_in ≈ 3600 (the subject token's) while the JWT it
        // made expires 60 s after issue: the proxy's expiry is the JWT's exp.
        let answer = try #require(try world.answers("urn:ietf:params:oauth:grant-type:token-exchange").first)
        #expect((answer["expires_in"] as? Int ?? 0) > 3000)
        var exchanged = ""
        let agrees = try eventually {
            let status = try ProxyProcess.run(args: ["status", "--config", proxy.configPath, "--json"])
            guard status.status == 0, let json = try JSONSerialization.jsonObject(with: Data(status.stdout.utf8)) as? [String: Any],
                let expiresAt = (json["expires_at"] as? String).flatMap({ ISO8601DateFormatter().date(from: $0) }),
                let token = try world.store()["access_token"] as? String
            else { return false }
            let claims = try Self.claims(token)
            exchanged = token
            #expect(claims["client_id"] as? String == "exchanger")
            #expect((claims["exp"] as? Int ?? 0) - (claims["iat"] as? Int ?? 0) == 60)
            // The status and the store were read one after the other: a refresh between them is
            // seen as a mismatch, and read again.
            return Int(expiresAt.timeIntervalSince1970) == claims["exp"] as? Int
        }
        #expect(agrees)
        #expect(!exchanged.isEmpty && exchanged != subject)
        #expect(!proxy.stderr.contains(subject) && !proxy.stderr.contains(exchanged))
    }

    @Test("idpyoidc's default exchange policy refuses an actor token: the proxy names the refusal, answers 503 and logs no token")
    func actorTokenRefused() throws {
        let world = try World(dpop: false)
        let subject = try #require(world.seed["access_token"] as? String)
        _ = try world.dir.write("actor", subject)
        let proxy = try world.serveExchange(
            """
            actor_token_file: ./actor
            actor_token_type: urn:ietf:params:oauth:token-type:access_token
            """)
        #expect(proxy.waitForStderr(containing: "Actor token not supported", timeout: 20), "\(proxy.stderr)")
        let exchanges = try #require(try world.idpStats()["exchanges"] as? [[String: Any]])
        #expect(exchanges.first?["actor"] as? Bool == true)
        #expect((try world.idpStats()["grants"] as? [String: [String: Int]])?["urn:ietf:params:oauth:grant-type:token-exchange"]?["200"] == nil)
        #expect(try curl([proxy.baseURL + "/x"]).status == 503)
        #expect(try world.apiStats()["api_ok"] as? Int == 0)
        #expect(!proxy.stderr.contains(subject))
    }
}
