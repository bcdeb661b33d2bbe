import Config
import Crypto
import CryptoExtras
import Foundation
import IdentityHTTP
import TestSupport
import Testing

@testable import Credentials

/// The JWTs the proxy signs (CONTRACT.md "Secretless credentials"), checked with the public half of
/// each key through swift-crypto's own verification, and their claims read back as JSON.
@Suite("Signing")
struct SigningTests {
    /// The three parts of a compact JWS, decoded.
    struct Parts {
        let header: [String: Any]
        let claims: [String: Any]
        let signingInput: Data
        let signature: Data
    }

    func split(_ jwt: String) throws -> Parts {
        let pieces = jwt.split(separator: ".", omittingEmptySubsequences: false)
        try #require(pieces.count == 3)
        func decode(_ part: Substring) throws -> Data { try #require(JWT.base64URLDecode(part)) }
        let header = try #require(try JSONSerialization.jsonObject(with: decode(pieces[0])) as? [String: Any])
        let claims = try #require(try JSONSerialization.jsonObject(with: decode(pieces[1])) as? [String: Any])
        return Parts(header: header, claims: claims, signingInput: Data((pieces[0] + "." + pieces[1]).utf8), signature: try decode(pieces[2]))
    }

    func checkClientClaims(_ parts: Parts, now: Double) {
        #expect(parts.claims["iss"] as? String == "client-7")
        #expect(parts.claims["sub"] as? String == "client-7")
        #expect(parts.claims["aud"] as? String == "https://idp.example/token")
        #expect(parts.claims["iat"] as? Int == Int(now))
        #expect(parts.claims["exp"] as? Int == Int(now) + 60)
        #expect((parts.claims["jti"] as? String)?.count ?? 0 >= 20)
    }

    @Test("an ES256 client assertion verifies with the key's public half and carries the contract's claims")
    func es256() throws {
        let key = P256.Signing.PrivateKey()
        let signing = try SigningKey.pem(key.pemRepresentation, algorithm: nil, keyID: "key-1")
        let now = 1_900_000_000.0
        let jwt = try ClientAssertionClaims.sign(clientID: "client-7", audience: "https://idp.example/token", key: signing, now: now)
        let parts = try split(jwt)
        #expect(parts.header["alg"] as? String == "ES256")
        #expect(parts.header["kid"] as? String == "key-1")
        #expect(parts.header["typ"] as? String == "JWT")
        checkClientClaims(parts, now: now)
        let signature = try P256.Signing.ECDSASignature(rawRepresentation: parts.signature)
        #expect(key.publicKey.isValidSignature(signature, for: parts.signingInput))
        // One byte changed in the claims: the signature no longer holds.
        var tampered = parts.signingInput
        tampered[tampered.count - 2] ^= 1
        #expect(!key.publicKey.isValidSignature(signature, for: tampered))
    }

    @Test("RS256 and PS256 assertions verify with the RSA public key, each with its own padding")
    func rsa() throws {
        let key = try _RSA.Signing.PrivateKey(keySize: .bits2048)
        for (alg, padding, other) in [
            (SigningAlgorithm.rs256, _RSA.Signing.Padding.insecurePKCS1v1_5, _RSA.Signing.Padding.PSS), (.ps256, .PSS, .insecurePKCS1v1_5),
        ] {
            let signing = try SigningKey.pem(key.pemRepresentation, algorithm: alg == .rs256 ? nil : alg, keyID: nil)
            let jwt = try ClientAssertionClaims.sign(clientID: "client-7", audience: "https://idp.example/token", key: signing, now: 1_900_000_000)
            let parts = try split(jwt)
            #expect(parts.header["alg"] as? String == alg.rawValue)
            #expect(parts.header["kid"] == nil)
            checkClientClaims(parts, now: 1_900_000_000)
            let signature = _RSA.Signing.RSASignature(rawRepresentation: parts.signature)
            #expect(key.publicKey.isValidSignature(signature, for: SHA256.hash(data: parts.signingInput), padding: padding))
            #expect(!key.publicKey.isValidSignature(signature, for: SHA256.hash(data: parts.signingInput), padding: other))
        }
    }

    @Test("a DPoP nonce is kept per origin, the newest of each, for a bounded number of origins (RFC 9449 §9)")
    func dpopNoncesPerOrigin() {
        let prover = DPoPProver.generate()
        prover.upstreamGave(nonce: "n-a", origin: "https://a.example")
        prover.upstreamGave(nonce: "n-b", origin: "https://b.example")
        prover.upstreamGave(nonce: "n-a2", origin: "https://a.example")
        #expect(prover.upstreamNonce(for: "https://a.example") == "n-a2")
        #expect(prover.upstreamNonce(for: "https://b.example") == "n-b")
        #expect(prover.upstreamNonce(for: "https://c.example") == nil)
        prover.upstreamGave(nonce: "bad nonce", origin: "https://b.example")
        #expect(prover.upstreamNonce(for: "https://b.example") == "n-b", "a nonce with a space is not a nonce")
        for i in 0..<DPoPProver.maxNonceOrigins { prover.upstreamGave(nonce: "n\(i)", origin: "https://host\(i).example") }
        #expect(prover.upstreamNonce(for: "https://a.example") == nil, "the oldest origins make room")
        #expect(prover.upstreamNonce(for: "https://host0.example") == "n0")
    }

    @Test("client_secret_jwt is HS256 with the client secret")
    func hs256() throws {
        let jwt = try ClientAssertionClaims.sign(
            clientID: "client-7", audience: "https://idp.example/token", key: .hmac(secret: "s3cret-value"), now: 1_900_000_000)
        let parts = try split(jwt)
        #expect(parts.header["alg"] as? String == "HS256")
        let mac = HMAC<SHA256>.authenticationCode(for: parts.signingInput, using: SymmetricKey(data: Data("s3cret-value".utf8)))
        #expect(Data(mac) == parts.signature)
    }

    @Test("two assertions signed in the same second never share a jti")
    func freshJTI() throws {
        let signing = try SigningKey.pem(P256.Signing.PrivateKey().pemRepresentation, algorithm: nil, keyID: nil)
        var seen = Set<String>()
        for _ in 0..<50 {
            let jwt = try ClientAssertionClaims.sign(clientID: "c", audience: "a", key: signing, now: 1_900_000_000)
            seen.insert(try split(jwt).claims["jti"] as! String)
        }
        #expect(seen.count == 50)
    }

    @Test("claims are escaped JSON: a client_id with quotes and a backslash survives")
    func escaping() throws {
        let claims = ClientAssertionClaims.make(clientID: "a\"b\\c\u{1}", audience: "x", now: 5, jti: "j")
        let json = JOSEValue.object(claims).json
        let decoded = try #require(try JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any])
        #expect(decoded["iss"] as? String == "a\"b\\c\u{1}")
    }

    @Test("a key that cannot sign the chosen algorithm, or no key at all, is refused with the reason")
    func keyProblems() throws {
        let ec = P256.Signing.PrivateKey().pemRepresentation
        #expect(throws: KeyProblem.self) { try SigningKey.pem(ec, algorithm: .rs256, keyID: nil) }
        let rsa = try _RSA.Signing.PrivateKey(keySize: .bits2048).pemRepresentation
        #expect(throws: KeyProblem.self) { try SigningKey.pem(rsa, algorithm: .es256, keyID: nil) }
        func reason(_ text: String) -> String {
            do {
                _ = try SigningKey.pem(text, algorithm: nil, keyID: nil)
                return "accepted"
            } catch {
                return error.description
            }
        }
        #expect(reason("not a key at all").contains("no PEM block"))
        #expect(reason("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n").contains("certificate"))
        #expect(reason("-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n").contains("not a usable"))
        let p384 = P384.Signing.PrivateKey().pemRepresentation
        #expect(reason(p384).contains("not a usable"))
        #expect(!reason(ec).contains(ec))  // never the key itself
    }

    @Test("a client assertion that expired is refused, counted, and not sent; a text that is no JWT too")
    func expiredAssertion() throws {
        let expired = makeJWT(payload: #"{"sub":"pod","exp":1000}"#)
        let before = AssertionMetrics.shared.count(.expired)
        #expect(throws: TokenSourceError.self) { try ClientAuthentication.checkAssertion(expired, path: "/t", now: 2000) }
        #expect(AssertionMetrics.shared.count(.expired) == before + 1)
        let notJWT = AssertionMetrics.shared.count(.notJWT)
        #expect(throws: TokenSourceError.self) { try ClientAuthentication.checkAssertion("opaque", path: "/t", now: 2000) }
        #expect(AssertionMetrics.shared.count(.notJWT) == notJWT + 1)
        try ClientAuthentication.checkAssertion(makeJWT(payload: #"{"exp":3000}"#), path: "/t", now: 2000)
    }

    @Test("base64url (RFC 4648 §5, no padding) agrees with Foundation's base64 at every length")
    func base64URL() {
        var generator = SystemRandomNumberGenerator()
        for length in 0..<70 {
            let bytes = (0..<length).map { _ in UInt8.random(in: 0...255, using: &generator) }
            var expected = Data(bytes).base64EncodedString()
            while expected.hasSuffix("=") { expected.removeLast() }
            expected = expected.replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            #expect(Base64URL.encode(bytes) == expected)
            #expect(JWT.base64URLDecode(Substring(Base64URL.encode(bytes))).map(Array.init) ?? (length == 0 ? [] : nil) == bytes)
        }
    }

    @Test("a jwt-bearer assertion the proxy signs names issuer, subject, audience and lifetime")
    func grantAssertion() throws {
        let claims = GrantAssertionClaims.make(issuer: "svc", subject: "user-9", audience: "https://idp/token", lifetime: 300, now: 100, jti: "j1")
        let json = JOSEValue.object(claims).json
        #expect(json == #"{"iss":"svc","sub":"user-9","aud":"https://idp/token","iat":100,"exp":400,"jti":"j1"}"#)
    }
}

/// How each `client_auth` shapes a token request (RFC 6749 §2.3.1, RFC 7523 §2.2, RFC 8705 §2).
@Suite("Client authentication requests")
struct ClientAuthenticationRequestTests {
    func apply(_ auth: ClientAuthenticationConfiguration, secret: String? = "s")
        throws -> (form: [(String, String)], headers: [String], request: HTTPCallRequest)
    {
        let authentication = try ClientAuthentication(auth, clientID: "app", secret: secret)
        var form: [(String, String)] = [("grant_type", "client_credentials")]
        var headers: [String] = []
        var request = HTTPCallRequest(url: "https://idp.example/token")
        try authentication.apply(form: &form, headers: &headers, request: &request, tokenEndpoint: "https://idp.example/token")
        return (form, headers, request)
    }

    func names(_ form: [(String, String)]) -> [String] { form.map(\.0) }

    @Test("basic puts the pair in the Authorization header and client_id nowhere else; post puts both in the form")
    func basicAndPost() throws {
        let basic = try apply(.basic)
        #expect(basic.headers.contains { $0.hasPrefix("Authorization: Basic ") })
        #expect(!names(basic.form).contains("client_id"))
        let post = try apply(.post)
        #expect(names(post.form) == ["grant_type", "client_id", "client_secret"])
        #expect(post.headers.isEmpty)
    }

    @Test("tls_client_auth sends the certificate and key to the token endpoint and client_id in the form, no secret")
    func tlsClientAuth() throws {
        let sent = try apply(.tlsClientAuth(certificateFile: "/keys/client.pem", keyFile: "/keys/client.key"), secret: nil)
        #expect(sent.request.clientCertificateFile == "/keys/client.pem")
        #expect(sent.request.clientKeyFile == "/keys/client.key")
        #expect(names(sent.form) == ["grant_type", "client_id"])
        #expect(sent.headers.isEmpty)
    }

    @Test("client_assertion_audience replaces the token endpoint as the assertion's aud")
    func audienceOverride() throws {
        let sent = try apply(
            .clientSecretJWT(secret: Secret(value: "s3cret", origin: .literal), audience: "https://login.example/tenant"), secret: "s3cret")
        let jwt = try #require(sent.form.last?.1)
        let payload = try #require(JWT.base64URLDecode(jwt.split(separator: ".")[1]))
        let claims = try #require(try JSONSerialization.jsonObject(with: payload) as? [String: Any])
        #expect(claims["aud"] as? String == "https://login.example/tenant")
        #expect(claims["iss"] as? String == "app" && claims["sub"] as? String == "app")
    }

    @Test("none sends client_id only; client_secret_jwt sends client_id and an assertion, never the secret")
    func noneAndSecretJWT() throws {
        #expect(names(try apply(.none, secret: nil).form) == ["grant_type", "client_id"])
        let jwt = try apply(.clientSecretJWT(secret: Secret(value: "very-secret-value", origin: .literal), audience: nil), secret: "very-secret-value")
        #expect(names(jwt.form) == ["grant_type", "client_id", "client_assertion_type", "client_assertion"])
        #expect(jwt.form.last?.1.contains("very-secret-value") == false)
        #expect(jwt.form[2].1 == "urn:ietf:params:oauth:client-assertion-type:jwt-bearer")
    }
}

/// RFC 8705 §2: with `tls_client_auth` the token request really presents the client certificate,
/// to a server (echo_upstream.py) that demands one signed by its CA.
@Suite("Mutual TLS to the token endpoint")
struct MutualTLSTests {
    @Test("the client certificate and key reach the TLS handshake; without them the server refuses")
    func clientCertificateIsPresented() throws {
        let dir = try TempDir(prefix: "tokenproxy-mtls")
        _ = try dir.write("san.cnf", "subjectAltName=IP:127.0.0.1\n")
        let ca = dir.file("ca.pem")
        let caKey = dir.file("ca.key")
        let steps: [[String]] = [
            [
                "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-days", "1", "-subj", "/CN=mtls test CA",
                "-keyout", caKey, "-out", ca,
            ],
            [
                "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-subj", "/CN=127.0.0.1", "-keyout", dir.file("server.key"),
                "-out", dir.file("server.csr"),
            ],
            [
                "x509", "-req", "-in", dir.file("server.csr"), "-CA", ca, "-CAkey", caKey, "-CAcreateserial", "-days", "1", "-extfile",
                dir.file("san.cnf"), "-out", dir.file("server.pem"),
            ],
            [
                "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-subj", "/CN=tokenproxy client", "-keyout",
                dir.file("client.key"), "-out", dir.file("client.csr"),
            ],
            [
                "x509", "-req", "-in", dir.file("client.csr"), "-CA", ca, "-CAkey", caKey, "-CAcreateserial", "-days", "1", "-out",
                dir.file("client.pem"),
            ],
        ]
        for step in steps {
            let result = try runCommand("/usr/bin/openssl", arguments: step, timeout: 30)
            try #require(result.status == 0, "\(result.stderr)")
        }
        let server = try PythonServer(
            "echo_upstream", arguments: ["--tls-cert", dir.file("server.pem"), "--tls-key", dir.file("server.key"), "--tls-client-ca", ca])
        let authentication = try ClientAuthentication(
            .tlsClientAuth(certificateFile: dir.file("client.pem"), keyFile: dir.file("client.key")), clientID: "mtls-app", secret: nil)
        let url = "https://127.0.0.1:\(server.port)/token"
        var form: [(String, String)] = [("grant_type", "client_credentials")]
        var headers: [String] = []
        var request = HTTPCallRequest(url: url, timeout: 10)
        try authentication.apply(form: &form, headers: &headers, request: &request, tokenEndpoint: url)
        request.body = Array(form.map { "\($0.0)=\($0.1)" }.joined(separator: "&").utf8)
        request.headers = headers + ["Content-Type: application/x-www-form-urlencoded"]
        request.caFile = ca
        let answer = try BlockingHTTPClient.perform(request)
        #expect(answer.status == 200)
        #expect(String(decoding: answer.body, as: UTF8.self).contains("client_id=mtls-app"))
        var bare = HTTPCallRequest(url: url, timeout: 10)
        bare.caFile = ca
        #expect(throws: HTTPCallError.self) { try BlockingHTTPClient.perform(bare) }
    }

    @Test(arguments: [2048, 1024])
    func aDPoPKeyFileThatHoldsAnRSAKeyIsRefusedAsAnRSAKey(bits: Int) throws {
        let dir = try TempDir(prefix: "tokenproxy-dpop-rsa")
        let pem: String
        if bits == 2048 {
            pem = try _RSA.Signing.PrivateKey(keySize: .bits2048).pemRepresentation
        } else {
            pem = try _RSA.Signing.PrivateKey(unsafeKeySize: _RSA.Signing.KeySize(bitCount: 1024)).pemRepresentation
        }
        var configuration = DPoPConfiguration()
        configuration.keyFile = try dir.write("rsa.pem", pem, mode: 0o600)
        let path = configuration.keyFile!
        #expect {
            _ = try DPoPKeySource(configuration)
        } throws: { error in
            (error as? ConfigurationError)?.reason == "\(path) is an RSA key; DPoP needs an EC P-256 key (ES256)"
        }
        configuration.keyFile = try dir.write("ec.pem", P256.Signing.PrivateKey().pemRepresentation, mode: 0o600)
        _ = try DPoPKeySource(configuration)
    }
}
