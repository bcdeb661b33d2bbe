import Foundation
import TestSupport
import Testing

/// DPoP (RFC 9449) against `dpop_servers.py`: an authorization server that binds tokens to the
/// proof key and an API that verifies every proof with joserfc (signature by the header's jwk, htm,
/// htu, iat, a jti never seen, ath, the token's cnf.jkt), with the real binary.
@Suite("DPoP", .tags(.endToEnd), .timeLimit(.minutes(35)))
struct DPoPTests {
    func config(_ server: PythonServer, extra: String = "") -> String {
        credentialsConfig(
            upstream: server.baseURL + "/api", workers: 2,
            credentials: """
                type: oauth2_client_credentials
                token_url: \(server.baseURL)/oauth/token
                client_id: dpop-client
                client_auth: none
                dpop: {\(extra)}
                """)
    }

    func stats(_ server: PythonServer) throws -> [String: Any] {
        try #require(try curl([server.baseURL + "/test/stats"]).json)
    }

    @Test("a DPoP-bound token goes as Authorization: DPoP with a fresh, fully verified proof on every request; the key made once survives a restart")
    func everyRequestProves() throws {
        let server = try PythonServer("dpop_servers")
        let dir = try TempDir(prefix: "tokenproxy-dpop")
        var proxy: ProxyProcess? = try ProxyProcess(config: config(server), directory: dir)
        for index in 0..<20 {
            let answer = try curl(
                index % 2 == 0 ? [proxy!.baseURL + "/orders/\(index)?page=2&sort=asc"] : ["-X", "POST", "--data", "x=1", proxy!.baseURL + "/orders"])
            #expect(answer.status == 200, "\(answer.bodyString)")
            if index == 0 { #expect(answer.json?["htu"] as? String == server.baseURL + "/api/orders/0") }
        }
        var counted = try stats(server)
        #expect(counted["api_ok"] as? Int == 20)
        #expect(counted["jti_reused"] as? Int == 0)
        #expect((counted["api_refused"] as? [String: Int])?.isEmpty == true)
        #expect(counted["token_calls"] as? Int == 1)
        let store = try String(contentsOfFile: dir.file("state/tokens.json"), encoding: .utf8)
        #expect(store.contains("dpop_key") && store.contains("\"token_type\":\"DPoP\""))
        #expect(!proxy!.stderr.contains("PRIVATE KEY"))
        proxy!.terminate()
        _ = try proxy!.waitForExit()
        proxy = nil
        // The restarted proxy takes the stored token and its key: the API still accepts it.
        let again = try ProxyProcess(config: config(server), directory: dir)
        #expect(try curl([again.baseURL + "/after-restart"]).status == 200)
        counted = try stats(server)
        #expect(counted["token_calls"] as? Int == 1)
        #expect((counted["jkts"] as? [String])?.count == 1)
    }

    @Test("with a Redis store, a second proxy of the fleet proves possession of the same key for the shared token", .tags(.redis))
    func fleetSharesTheKey() throws {
        let server = try PythonServer("dpop_servers")
        let redis = try RedisServer()
        let store = """
            store:
              backend: redis
              url: \(redis.url)/0
              key: tokenproxy/dpop-\(UUID().uuidString)
            """
        let first = try ProxyProcess(config: config(server) + "\n" + store)
        #expect(try curl([first.baseURL + "/one"]).status == 200)
        let second = try ProxyProcess(config: config(server) + "\n" + store)
        #expect(try curl([second.baseURL + "/two"]).status == 200)
        #expect(try curl([first.baseURL + "/three"]).status == 200)
        let counted = try stats(server)
        #expect(counted["token_calls"] as? Int == 1)
        #expect(counted["api_ok"] as? Int == 3)
        #expect((counted["jkts"] as? [String])?.count == 1)
    }

    @Test("the identity provider's use_dpop_nonce is answered once with its nonce")
    func identityProviderNonce() throws {
        let server = try PythonServer("dpop_servers", arguments: ["--as-nonce"])
        let proxy = try ProxyProcess(config: config(server))
        #expect(try curl([proxy.baseURL + "/x"]).status == 200)
        let counted = try stats(server)
        #expect(counted["token_nonce_demands"] as? Int == 1)
        #expect(counted["token_calls"] as? Int == 2)
    }

    @Test("an upstream 401 use_dpop_nonce is retried once with the nonce, the nonce goes into later proofs, and no new token is fetched")
    func upstreamNonce() throws {
        let server = try PythonServer("dpop_servers", arguments: ["--api-nonce"])
        let proxy = try ProxyProcess(config: config(server, extra: ""))
        for _ in 0..<5 { #expect(try curl([proxy.baseURL + "/x"]).status == 200) }
        let counted = try stats(server)
        #expect(counted["api_ok"] as? Int == 5)
        // Two loops: each may meet the demand once before the nonce is known.
        #expect((counted["api_nonce_demands"] as? Int ?? 0) >= 1 && (counted["api_nonce_demands"] as? Int ?? 0) <= 2)
        #expect(counted["token_calls"] as? Int == 1)
        let metrics = try curl([try #require(proxy.adminURL) + "/metrics"]).bodyString
        #expect(metrics.contains("tokenproxy_upstream_401_retries_total \(counted["api_nonce_demands"] as? Int ?? -1)\n"))
    }

    /// RFC 9449 §8, §9: a nonce belongs to the server that gave it (issue 29 point 6). Two routes
    /// share one session (one key) on two upstream origins, each demanding its own nonce: after one
    /// demand per origin, alternating requests pay no more 401s, and the token endpoint never gets
    /// an upstream's nonce (even on the same origin).
    @Test("DPoP nonces are kept per origin: two upstream origins sharing a key, and the token endpoint, each get their own")
    func noncesPerOrigin() throws {
        let server = try PythonServer("dpop_servers", arguments: ["--api-nonce"])
        let credentials = """
                credentials:
                  type: oauth2_client_credentials
                  token_url: \(server.baseURL)/oauth/token
                  client_id: dpop-client
                  client_auth: none
                  dpop: {}
                store: {path: ./state/shared.json}
            """
        let proxy = try ProxyProcess(
            config: """
                listen: 127.0.0.1:0
                workers: 1
                admin:
                  listen: 127.0.0.1:0
                routes:
                  - name: numeric
                    match: {path_prefix: /a/}
                    upstream: http://127.0.0.1:\(server.port)/api
                \(credentials)
                  - name: named
                    upstream: http://localhost:\(server.port)/api
                \(credentials)
                """)
        for round in 0..<6 {
            #expect(try curl([proxy.baseURL + "/a/x"]).status == 200, "round \(round)")
            #expect(try curl([proxy.baseURL + "/b/x"]).status == 200, "round \(round)")
        }
        var counted = try stats(server)
        #expect(counted["api_ok"] as? Int == 12)
        #expect(counted["api_nonce_demands"] as? Int == 2, "one demand per origin, then each origin's own nonce")
        #expect(counted["token_calls"] as? Int == 1, "the two routes share one session, one key")
        // A new token request carries no upstream's nonce.
        #expect(try curl(["-X", "POST", try #require(proxy.adminURL) + "/refresh?route=named"]).status == 202)
        #expect(try eventually { try stats(server)["token_calls"] as? Int == 2 })
        counted = try stats(server)
        #expect(counted["token_foreign_nonces"] as? Int == 0)
    }

    /// Issue 33: the device flow's polls answer `use_dpop_nonce` too (RFC 9449 §8); the poll is
    /// asked again with the nonce instead of ending the login.
    @Test("a device login whose poll meets use_dpop_nonce polls again with the nonce and signs in")
    func deviceLoginAnswersTheNonce() throws {
        let server = try PythonServer("dpop_servers", arguments: ["--as-nonce"])
        let dir = try TempDir(prefix: "tokenproxy-dpop-device")
        let config = try dir.write(
            "tokenproxy.yaml",
            """
            listen: 127.0.0.1:0
            upstream: \(server.baseURL)/api
            credentials:
              type: oauth2_refresh
              login: device
              token_url: \(server.baseURL)/oauth/token
              device_authorization_url: \(server.baseURL)/oauth/device
              client_id: dpop-client
              client_auth: none
              dpop: {}
            """)
        let login = try ProxyProcess.run(args: ["login", "--config", config], timeout: 60)
        #expect(login.status == 0, "\(login.stderr)")
        let counted = try stats(server)
        #expect(counted["token_nonce_demands"] as? Int == 1, "one demand, answered")
        #expect((counted["jkts"] as? [String])?.count == 1)
        let proxy = try ProxyProcess(config: String(contentsOfFile: config, encoding: .utf8), directory: dir)
        #expect(try curl([proxy.baseURL + "/x"]).status == 200)
    }

    @Test("dpop.key_file: the tokens are bound to that key")
    func keyFile() throws {
        let dir = try TempDir(prefix: "tokenproxy-dpop-key")
        let key = try SecretlessWorld.makeKey("ec", in: dir, name: "dpop.pem")
        let server = try PythonServer("dpop_servers", arguments: ["--expect-key", key])
        let proxy = try ProxyProcess(config: config(server, extra: "key_file: ./dpop.pem"), directory: dir)
        #expect(try curl([proxy.baseURL + "/x"]).status == 200)
        #expect(try stats(server)["expected_jkt_seen"] as? Bool == true)
        let store = try String(contentsOfFile: dir.file("state/tokens.json"), encoding: .utf8)
        #expect(!store.contains("dpop_key"))
    }

    @Test("a Bearer answer while dpop is set goes as Bearer, with one warning")
    func bearerAnswer() throws {
        let server = try PythonServer("dpop_servers", arguments: ["--bearer"])
        let proxy = try ProxyProcess(config: config(server))
        #expect(try curl([proxy.baseURL + "/x"]).status == 200)
        #expect(proxy.waitForStderr(containing: "answered token_type \"Bearer\""))
    }

    @Test("an identity provider that refuses the proof gets a message naming the reason and credentials.dpop")
    func refusedProof() throws {
        let server = try PythonServer("dpop_servers", arguments: ["--refuse-dpop"])
        let proxy = try ProxyProcess(config: config(server))
        #expect(proxy.waitForStderr(containing: "refused the DPoP proof"))
        #expect(proxy.stderr.contains("credentials.dpop"))
        #expect(try curl([proxy.baseURL + "/x"]).status == 503)
    }

    @Test("check refuses a dpop key_file that is not an EC P-256 key")
    func checkRefusesRSAKey() throws {
        let dir = try TempDir(prefix: "tokenproxy-dpop-check")
        _ = try SecretlessWorld.makeKey("rsa", in: dir, name: "rsa.pem")
        let result = try checkClientCredentials(in: dir, clientID: "c", "client_auth: none\ndpop:\n  key_file: ./rsa.pem").result
        #expect(result.status == 2)
        #expect(result.stderr.contains("credentials.dpop.key_file"), "\(result.stderr)")
        #expect(result.stderr.contains("ES256"), "\(result.stderr)")
    }
}
