import Foundation
import TestSupport
import Testing

/// `type: oauth2_jwt_bearer` against Authlib's `JWTBearerGrant` and `type: oauth2_token_exchange`
/// against the RFC 8693 grant of `secretless_idp.py`, with the real binary.
@Suite("Secretless grants", .serialized, .tags(.endToEnd), .timeLimit(.minutes(40)))
struct SecretlessGrantTests {
    @Test("jwt-bearer with an assertion the proxy signs: the subject is the configured one, each fetch signs anew, and a 401 fetches again")
    func jwtBearerSigned() throws {
        let dir = try TempDir(prefix: "tokenproxy-jwtbearer")
        let key = try SecretlessWorld.makeKey("ec", in: dir, name: "signer.pem")
        let world = try SecretlessWorld(clients: ["svc:private_key_jwt:\(key)"], dir: dir)
        let proxy = try world.serve(
            "oauth2_jwt_bearer", clientID: "svc", directory: dir,
            """
            client_key_file: ./signer.pem
            assertion_subject: user-42
            assertion_lifetime: 2m
            """)
        let first = try curl([proxy.baseURL + "/me"])
        #expect(first.status == 200)
        #expect(first.json?["sub"] as? String == "user-42")
        #expect(first.json?["grant"] as? String == "urn:ietf:params:oauth:grant-type:jwt-bearer")
        // Every token the API knows is revoked: the next request meets a 401, and the proxy fetches
        // a new token with a new assertion and retries.
        #expect(try curl(["-X", "POST", world.idp.baseURL + "/test/revoke-all"]).status == 200)
        #expect(try curl([proxy.baseURL + "/me"]).status == 200)
        #expect(try world.calls("urn:ietf:params:oauth:grant-type:jwt-bearer") == 2)
        #expect(try world.count("assertion_subjects", "user-42") == 2)
        // Twenty requests at once meet a revoked token: one new grant between them (single flight).
        #expect(try curl(["-X", "POST", world.idp.baseURL + "/test/revoke-all"]).status == 200)
        let statuses = LockedCount()
        DispatchQueue.concurrentPerform(iterations: 20) { index in
            if (try? curl([proxy.baseURL + "/me/\(index)"]))?.status == 200 { statuses.add() }
        }
        #expect(statuses.value == 20)
        #expect(try world.calls("urn:ietf:params:oauth:grant-type:jwt-bearer") == 3)
        #expect(try world.stats()["jti_reused"] as? Int == 0)
    }

    @Test("jwt-bearer with an assertion file: the file's JWT is the grant, read again when it changed")
    func jwtBearerFromFile() throws {
        let world = try SecretlessWorld(clients: [])
        let file = try world.project("assertion", try world.mint(sub: "pod-a", aud: world.tokenURL))
        let proxy = try world.serve(
            "oauth2_jwt_bearer", directory: world.dir,
            """
            assertion_file: \(file)
            """)
        #expect(try curl([proxy.baseURL + "/me"]).json?["sub"] as? String == "pod-a")
        _ = try world.project("assertion", try world.mint(sub: "pod-b", aud: world.tokenURL))
        #expect(try curl(["-X", "POST", try #require(proxy.adminURL) + "/refresh"]).status == 202)
        #expect(try eventually { try world.count("assertion_subjects", "pod-b") == 1 })
        // The identity provider counts the assertion before it answers: wait for the new token.
        #expect(try eventually { try curl([proxy.baseURL + "/me"]).json?["sub"] as? String == "pod-b" })
    }

    @Test("token exchange sends the subject and actor tokens with their types, requested_token_type, resource, audience and scope")
    func tokenExchange() throws {
        let world = try SecretlessWorld(clients: ["exchanger:secret:ex-secret-value"])
        let subject = try world.project("subject", try world.mint(sub: "system:serviceaccount:shop:orders"))
        let actor = try world.project("actor", try world.mint(sub: "gateway"), folder: "actor")
        let proxy = try world.serve(
            "oauth2_token_exchange", clientID: "exchanger", directory: world.dir, environment: ["EX_SECRET": "ex-secret-value"],
            """
            client_secret_env: EX_SECRET
            subject_token_file: \(subject)
            actor_token_file: \(actor)
            actor_token_type: urn:ietf:params:oauth:token-type:jwt
            requested_token_type: urn:ietf:params:oauth:token-type:access_token
            resource: https://orders.example
            audience: orders-api
            scope: "orders.read"
            """)
        let answer = try curl([proxy.baseURL + "/me"])
        #expect(answer.status == 200)
        #expect(answer.json?["sub"] as? String == "system:serviceaccount:shop:orders")
        let exchanges = try #require(try world.stats()["exchanges"] as? [[String: Any]])
        let last = try #require(exchanges.last)
        #expect(last["actor"] as? String == "gateway")
        #expect(last["resource"] as? String == "https://orders.example")
        #expect(last["audience"] as? String == "orders-api")
        #expect(last["scope"] as? String == "orders.read")
        #expect(last["requested_token_type"] as? String == "urn:ietf:params:oauth:token-type:access_token")
        // A 401 upstream: one new exchange, then the retry succeeds.
        #expect(try curl(["-X", "POST", world.idp.baseURL + "/test/revoke-all"]).status == 200)
        #expect(try curl([proxy.baseURL + "/me"]).status == 200)
        #expect(try world.calls("urn:ietf:params:oauth:grant-type:token-exchange") == 2)
    }

    @Test("token exchange whose subject token the identity provider refuses: 503 and a named reason, no token in the log")
    func tokenExchangeRefused() throws {
        let world = try SecretlessWorld(clients: ["public-client:public"])
        let expired = try world.mint(ttl: -60)
        let subject = try world.project("subject", expired)
        let proxy = try world.serve(
            "oauth2_token_exchange", clientID: "public-client", directory: world.dir,
            """
            client_auth: none
            subject_token_file: \(subject)
            """)
        #expect(proxy.waitForStderr(containing: "invalid_grant"))
        #expect(try world.calls("urn:ietf:params:oauth:grant-type:token-exchange", "invalid_grant") >= 1)
        #expect(try curl([proxy.baseURL + "/me"]).status == 503)
        #expect(!proxy.stderr.contains(expired))
    }
}
