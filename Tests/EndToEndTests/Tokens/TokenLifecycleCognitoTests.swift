import Foundation
import TestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

@Suite("Token life cycle: Cognito (moto), end to end", .serialized, .tags(.endToEnd), .timeLimit(.minutes(35)))
struct TokenLifecycleCognitoTests {
    @Test(
        "cognito with a client secret: e-mail login, one REFRESH_TOKEN_AUTH for 20 concurrent requests at expiry, refresh token kept, refusal ends the session")
    func cognito() throws {
        let cognito = try CognitoIdP.start(accessTTL: 5, tokenDelayMs: 1000)
        defer { cognito.stop() }
        let api = try ProtectedAPI.start(for: cognito)
        defer { api.stop() }
        let dir = try TempDir(prefix: "tokenproxy-cognito")
        let config = """
            listen: 127.0.0.1:0
            upstream: \(api.baseURL)
            workers: 2
            admin:
              listen: 127.0.0.1:0
            credentials:
              type: cognito
              region: \(cognito.region)
              endpoint: \(cognito.endpoint)
              client_id: \(cognito.info.clientIdSecret)
              client_secret_env: LIFE_COGNITO_SECRET
              refresh_margin: 1ms
            log:
              level: debug
            """
        let env = ["LIFE_COGNITO_SECRET": cognito.info.clientSecret]
        let path = try dir.write("tokenproxy.yaml", config)
        let login = try ProxyProcess.run(
            args: ["login", "--config", path, "--username", cognito.info.username, "--password-stdin"], env: env, stdin: cognito.info.password + "\n")
        #expect(login.status == 0, "\(login.output)")
        let storeURL = URL(fileURLWithPath: dir.file("state/tokens.json"))
        let first = try #require((try? JSONSerialization.jsonObject(with: Data(contentsOf: storeURL))) as? [String: Any])
        let refreshToken = try #require(first["refresh_token"] as? String)
        #expect(first["username"] as? String == cognito.info.poolUsername)

        let proxy = try ProxyProcess(config: config, directory: dir, environment: env)
        #expect(try send(proxy).status == 200)
        let expiresAt = try #require(first["expires_at"] as? Double)
        #expect(within(15) { Date().timeIntervalSince1970 > expiresAt + 0.05 })
        let results = concurrently(20) { _ in try send(proxy) }
        #expect(results.map { (try? $0.get().status) ?? -1 } == Array(repeating: 200, count: 20))
        #expect(try cognito.stats().count("REFRESH_TOKEN_AUTH", outcome: "ok") == 1)
        #expect(try api.stats().expiredTokensSeen == 0)
        let second = try #require((try? JSONSerialization.jsonObject(with: Data(contentsOf: storeURL))) as? [String: Any])
        #expect(second["refresh_token"] as? String == refreshToken)
        #expect(second["access_token"] as? String != first["access_token"] as? String)

        try cognito.revokeAll()
        #expect(try curl(["-X", "POST", try #require(proxy.adminURL) + "/refresh"]).status == 202)
        #expect(try within(15) { try send(proxy).status == 401 })
        proxy.terminate()
        _ = try proxy.waitForExit()
        for text in [proxy.stderr, login.output] {
            for secret in [
                cognito.info.clientSecret, cognito.info.password, refreshToken, first["access_token"] as? String ?? "-",
                second["access_token"] as? String ?? "-",
            ] {
                #expect(!text.contains(secret))
            }
        }
    }
}
