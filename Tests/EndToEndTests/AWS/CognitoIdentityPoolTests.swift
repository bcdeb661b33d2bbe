import Foundation
import TestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// The identity pool every test here uses (any `<region>:<uuid>`: the test server knows only this one).
private let identityPoolID = "us-east-1:0a1b2c3d-4e5f-6a7b-8c9d-0e1f2a3b4c5d"

/// Credentials the identity pool hands out, in order; the SigV4 verifier is told the same keys.
struct IdentityPoolKey {
    var id: String
    var secret: String
    var session: String
    var lifetime: Int
    var delay: Double = 0

    var sequenceEntry: String {
        #"{"AccessKeyId": "\#(id)", "SecretKey": "\#(secret)", "SessionToken": "\#(session)", "lifetime": \#(lifetime), "delay": \#(delay)}"#
    }
    var verifierArgument: String { "\(id):\(secret):\(session)" }
}

/// cognito_identity.py in front of `cognito`'s user pool.
struct IdentityPoolServer {
    let server: PythonServer

    init(for cognito: CognitoIdP, keys: [IdentityPoolKey], folder: TempDir) throws {
        let sequence = try folder.write("sequence.json", "[" + keys.map(\.sequenceEntry).joined(separator: ",") + "]")
        server = try PythonServer(
            "cognito_identity",
            arguments: [
                "--jwks-url", cognito.jwksURL, "--issuer", "https://cognito-idp.\(cognito.region).amazonaws.com/\(cognito.info.poolId)",
                "--audience", cognito.info.clientId, "--provider", "cognito-idp.\(cognito.region).amazonaws.com/\(cognito.info.poolId)",
                "--identity-pool-id", identityPoolID, "--sequence", sequence,
            ])
    }

    struct Stats: Decodable {
        var get_id: Int
        var get_credentials: Int
        var refused: Int
        var logins_tokens: [String]
        var identity_ids: [String]
    }

    func stats() throws -> Stats { try JSONDecoder().decode(Stats.self, from: Data(try curl([server.baseURL + "/test/stats"]).body)) }

    func control(_ name: String) throws {
        let answer = try curl(["-X", "POST", "--data", "", server.baseURL + "/test/" + name])
        guard answer.status == 200 else { throw HarnessError("cognito_identity.py: /test/\(name) answered \(answer.status)") }
    }
}

/// `type: cognito` with `identity_pool_id` end to end (CONTRACT.md "Amazon Cognito identity pools"):
/// the real binary logs in to a user pool (moto, behind cognito_idp.py), turns its ID token into AWS
/// credentials at cognito_identity.py, and signs requests that sigv4_verifier.py checks with
/// botocore's signer.
@Suite("Cognito identity pools", .serialized, .tags(.endToEnd), .timeLimit(.minutes(40)))
struct CognitoIdentityPoolTests {
    func config(cognito: CognitoIdP, identity: IdentityPoolServer, upstream: String, margin: String) -> String {
        """
        listen: 127.0.0.1:0
        upstream: \(upstream)
        workers: 2
        drain_timeout: 1s
        admin:
          listen: 127.0.0.1:0
        credentials:
          type: cognito
          endpoint: \(cognito.endpoint)
          client_id: \(cognito.info.clientId)
          user_pool_id: \(cognito.info.poolId)
          identity_pool_id: \(identityPoolID)
          identity_endpoint: \(identity.server.baseURL)
          aws: {service: execute-api}
          refresh_margin: \(margin)
        limits:
          refresh_wait: 30s
        log:
          level: debug
        """
    }

    func logIn(_ path: String, _ cognito: CognitoIdP) throws -> CommandResult {
        try ProxyProcess.run(
            args: ["login", "--config", path, "--username", cognito.info.username, "--password-stdin"], stdin: cognito.info.password + "\n")
    }

    /// The session in the store (empty when unreadable).
    func stored(_ dir: TempDir) -> [String: Any] {
        ((try? JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: dir.file("state/tokens.json"))))) as? [String: Any]) ?? [:]
    }

    func signedBy(_ verifier: PythonServer) throws -> [String: Int] { (try curl([verifier.baseURL + "/calls"]).json as? [String: Int]) ?? [:] }

    func put(_ proxy: ProxyProcess, _ path: String) throws -> CurlResult {
        try curl(["-X", "PUT", "--data-binary", "body of \(path)", proxy.baseURL + path], timeout: 60)
    }

    func expectNoSecret(_ texts: [String], _ secrets: [String]) {
        for text in texts {
            for secret in secrets where !secret.isEmpty { #expect(!text.contains(secret), "a secret reached the log") }
            #expect(!text.contains("Signature="))
        }
    }

    @Test("after login, requests are signed with the pool's credentials; a restart with expired credentials refreshes without GetId")
    func signsAndKeepsTheIdentity() throws {
        let cognito = try CognitoIdP.start()
        defer { cognito.stop() }
        let dir = try TempDir(prefix: "tokenproxy-identity-pool")
        let first = IdentityPoolKey(id: "ASIAPOOLFIRST", secret: "first/pool+secret", session: "first-pool-session", lifetime: 10)
        let second = IdentityPoolKey(id: "ASIAPOOLSECOND", secret: "second/pool+secret", session: "second-pool-session", lifetime: 3600)
        let identity = try IdentityPoolServer(for: cognito, keys: [first, second], folder: dir)
        let verifier = try PythonServer("sigv4_verifier", arguments: ["--key", first.verifierArgument, "--key", second.verifierArgument])
        let text = config(cognito: cognito, identity: identity, upstream: verifier.baseURL, margin: "1ms")
        let path = try dir.write("tokenproxy.yaml", text)
        #expect(try ProxyProcess.run(args: ["check", "--config", path]).status == 0)

        let login = try logIn(path, cognito)
        #expect(login.status == 0, "\(login.output)")
        let session = stored(dir)
        let identityID = try #require(session["identity_id"] as? String)
        #expect(identityID.hasPrefix("us-east-1:"))
        #expect(try identity.stats().get_id == 1)
        #expect(try identity.stats().get_credentials == 1)

        // The stored credentials serve; the verifier checks the signature (403 when it is wrong).
        let proxy = try ProxyProcess(config: text, directory: dir)
        let stored1 = try put(proxy, "/stage/items/1")
        #expect(stored1.status == 200, "\(stored1.bodyString)")
        let got = try curl([proxy.baseURL + "/stage/items/1"])
        #expect(got.status == 200, "\(got.bodyString)")
        #expect(got.bodyString == "body of /stage/items/1")
        #expect(try signedBy(verifier) == [first.id: 2])
        proxy.terminate()
        _ = try proxy.waitForExit()
        #expect(try identity.stats().get_credentials == 1)

        // Started again once they expired: a user-pool refresh and GetCredentialsForIdentity with the
        // stored identity id, no GetId.
        let expiresAt = try #require(session["expires_at"] as? Double)
        while Date().timeIntervalSince1970 < expiresAt + 0.5 { usleep(100_000) }
        let again = try ProxyProcess(config: text, directory: dir)
        let after = try put(again, "/stage/items/2")
        #expect(after.status == 200, "\(after.bodyString)")
        #expect(try signedBy(verifier)[second.id] == 1)
        let stats = try identity.stats()
        #expect(stats.get_id == 1)
        #expect(stats.get_credentials == 2)
        #expect(try cognito.stats().count("REFRESH_TOKEN_AUTH", outcome: "ok") == 1)
        #expect(stored(dir)["identity_id"] as? String == identityID)
        // The second Logins token is the refreshed ID token, not the login's.
        #expect(stats.logins_tokens.count == 2 && stats.logins_tokens[0] != stats.logins_tokens[1])

        // `tokenproxy token` prints the credentials as type: aws does.
        let token = try ProxyProcess.run(args: ["token", "--config", path])
        #expect(token.status == 0, "\(token.output)")
        let printed = try JSONSerialization.jsonObject(with: Data(token.stdout.utf8)) as? [String: String]
        #expect(printed?["AccessKeyId"] == second.id)
        #expect(printed?["Token"] == second.session)
        again.terminate()
        _ = try again.waitForExit()
        expectNoSecret(
            [proxy.stderr, again.stderr, login.output],
            [first.secret, first.session, second.secret, second.session, cognito.info.password, session["refresh_token"] as? String ?? "-"]
                + stats.logins_tokens)
    }

    @Test("credentials at expiry: 50 concurrent requests make one user-pool refresh and one GetCredentialsForIdentity, all signed with the new key")
    func oneFetchAtExpiry() throws {
        let cognito = try CognitoIdP.start()
        defer { cognito.stop() }
        let dir = try TempDir(prefix: "tokenproxy-identity-pool-expiry")
        let first = IdentityPoolKey(id: "ASIAEXPIRING", secret: "expiring/secret", session: "expiring-session", lifetime: 5)
        let second = IdentityPoolKey(id: "ASIANEXT", secret: "next/secret", session: "next-session", lifetime: 3600, delay: 3)
        let identity = try IdentityPoolServer(for: cognito, keys: [first, second], folder: dir)
        // The upstream knows only the second key: a request signed with the first is refused.
        let verifier = try PythonServer("sigv4_verifier", arguments: ["--key", second.verifierArgument])
        let text = config(cognito: cognito, identity: identity, upstream: verifier.baseURL, margin: "1ms")
        let path = try dir.write("tokenproxy.yaml", text)
        let login = try logIn(path, cognito)
        #expect(login.status == 0, "\(login.output)")
        let expiresAt = try #require(stored(dir)["expires_at"] as? Double)
        let proxy = try ProxyProcess(config: text, directory: dir)
        #expect(within(30) { Date().timeIntervalSince1970 > expiresAt + 0.05 })
        let results = concurrently(50) { i in try put(proxy, "/stage/items/\(i)").status }
        #expect(results.map { (try? $0.get()) ?? -1 } == Array(repeating: 200, count: 50))
        let stats = try identity.stats()
        #expect(stats.get_credentials == 2)
        #expect(stats.get_id == 1)
        #expect(try cognito.stats().count("REFRESH_TOKEN_AUTH", outcome: "ok") == 1)
        #expect(try signedBy(verifier) == [second.id: 50])
        proxy.terminate()
        _ = try proxy.waitForExit()
        expectNoSecret(
            [proxy.stderr, login.output],
            [first.secret, first.session, second.secret, second.session, cognito.info.password] + stats.logins_tokens)
    }

    @Test("an identity that is gone is asked for again once; an ID token the pool refuses ends the session: login_required")
    func identityGoneAndRefusal() throws {
        let cognito = try CognitoIdP.start()
        defer { cognito.stop() }
        let dir = try TempDir(prefix: "tokenproxy-identity-pool-refused")
        let key = IdentityPoolKey(id: "ASIAREFUSAL", secret: "refusal/secret", session: "refusal-session", lifetime: 3600)
        // Fetched after the identity was forgotten; its expiry brings the refresh that is refused.
        let short = IdentityPoolKey(id: "ASIASHORT", secret: "short/secret", session: "short-session", lifetime: 8)
        let identity = try IdentityPoolServer(for: cognito, keys: [key, short], folder: dir)
        let verifier = try PythonServer("sigv4_verifier", arguments: ["--key", key.verifierArgument, "--key", short.verifierArgument])
        let text = config(cognito: cognito, identity: identity, upstream: verifier.baseURL, margin: "1ms")
        let path = try dir.write("tokenproxy.yaml", text)
        let login = try logIn(path, cognito)
        #expect(login.status == 0, "\(login.output)")
        let firstIdentity = try #require(stored(dir)["identity_id"] as? String)
        let proxy = try ProxyProcess(config: text, directory: dir)
        let admin = try #require(proxy.adminURL)
        #expect(try put(proxy, "/stage/a").status == 200)

        // The identity is forgotten: GetCredentialsForIdentity says ResourceNotFoundException, GetId
        // gives a new one, and it is stored.
        try identity.control("forget")
        #expect(try curl(["-X", "POST", admin + "/refresh"]).status == 202)
        #expect(try within(20) { try identity.stats().get_credentials == 3 })
        #expect(try within(20) { stored(dir)["identity_id"] as? String != firstIdentity })
        #expect(try identity.stats().get_id == 2)
        #expect(try within(20) { try put(proxy, "/stage/b").status == 200 && signedBy(verifier)[short.id] == 1 })

        // Every ID token refused from now on: the refresh at the short credentials' expiry ends the session.
        try identity.control("refuse")
        #expect(try within(40) { try send(proxy).status == 401 })
        let answer = try send(proxy)
        #expect(answer.status == 401)
        #expect(answer.bodyString.contains("\"login_required\""), "\(answer.bodyString)")
        #expect(try identity.stats().refused == 1)
        let status = try ProxyProcess.run(args: ["status", "--config", path])
        #expect(status.output.contains("session: ended"), "\(status.output)")
        proxy.terminate()
        _ = try proxy.waitForExit()
        let secrets = [key.secret, key.session, short.secret, short.session, cognito.info.password]
        expectNoSecret([proxy.stderr, login.output], secrets + (try identity.stats().logins_tokens))
    }

    @Test("a GetCredentialsForIdentity that fails in passing is tried again with the refreshed ID token, without a second user-pool refresh")
    func passingFailureKeepsTheNewIDToken() throws {
        let cognito = try CognitoIdP.start()
        defer { cognito.stop() }
        let dir = try TempDir(prefix: "tokenproxy-identity-pool-passing")
        let first = IdentityPoolKey(id: "ASIABEFORE", secret: "before/secret", session: "before-session", lifetime: 3600)
        let second = IdentityPoolKey(id: "ASIAAFTER", secret: "after/secret", session: "after-session", lifetime: 3600)
        let identity = try IdentityPoolServer(for: cognito, keys: [first, second], folder: dir)
        let verifier = try PythonServer("sigv4_verifier", arguments: ["--key", first.verifierArgument, "--key", second.verifierArgument])
        let text = config(cognito: cognito, identity: identity, upstream: verifier.baseURL, margin: "1ms")
        let path = try dir.write("tokenproxy.yaml", text)
        let login = try logIn(path, cognito)
        #expect(login.status == 0, "\(login.output)")
        let proxy = try ProxyProcess(config: text, directory: dir)
        #expect(try put(proxy, "/stage/before").status == 200)

        try identity.control("fail?count=1")
        #expect(try curl(["-X", "POST", try #require(proxy.adminURL) + "/refresh"]).status == 202)
        // The failure backs off; the retry succeeds with the ID token of the one user-pool refresh.
        #expect(try within(30) { try identity.stats().logins_tokens.count == 2 })
        let stats = try identity.stats()
        #expect(stats.get_credentials == 3)
        #expect(stats.logins_tokens[0] != stats.logins_tokens[1])
        #expect(try cognito.stats().count("REFRESH_TOKEN_AUTH", outcome: "ok") == 1)
        #expect(try within(20) { try put(proxy, "/stage/after").status == 200 && signedBy(verifier)[second.id] ?? 0 >= 1 })
        proxy.terminate()
        _ = try proxy.waitForExit()
        expectNoSecret([proxy.stderr, login.output], [first.secret, first.session, second.secret, second.session] + stats.logins_tokens)
    }
}
