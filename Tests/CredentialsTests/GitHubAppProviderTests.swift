import Config
import Crypto
import CryptoExtras
import Foundation
import Testing

@testable import Credentials
@testable import IdentityHTTP

/// The pure parts of `type: github_app` (CONTRACT.md "GitHub App installation tokens"): the app
/// JWT, the token request's body, and what each answer of the token call means.
@Suite("GitHub App")
struct GitHubAppProviderTests {
    static func answer(_ status: Int, _ body: String, headers: [(name: String, value: String)] = []) -> HTTPCallResponse {
        HTTPCallResponse(status: status, headers: headers, body: Array(body.utf8))
    }

    @Test("the app JWT is RS256 with iss = app_id, iat 60 s back and exp within 10 minutes of iat, and verifies with the public key")
    func appJWT() throws {
        let key = try _RSA.Signing.PrivateKey(keySize: .bits2048)
        let signing = try SigningKey.pem(key.pemRepresentation, algorithm: .rs256, keyID: nil)
        let now = 1_900_000_000.5
        let jwt = try GitHubAppProvider.appJWT(appID: "123456", key: signing, now: now)
        let pieces = jwt.split(separator: ".", omittingEmptySubsequences: false)
        try #require(pieces.count == 3)
        func json(_ part: Substring) throws -> [String: Any] {
            let data = try #require(JWT.base64URLDecode(part))
            return try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        }
        let header = try json(pieces[0])
        let claims = try json(pieces[1])
        #expect(header["alg"] as? String == "RS256" && header["typ"] as? String == "JWT")
        #expect(claims["iss"] as? String == "123456")
        let iat = try #require(claims["iat"] as? Int)
        let exp = try #require(claims["exp"] as? Int)
        #expect(iat == 1_900_000_000 - 60)
        #expect(exp > Int(now) && exp - iat <= 600, "GitHub refuses an exp more than 10 minutes after iat")
        let signature = _RSA.Signing.RSASignature(rawRepresentation: try #require(JWT.base64URLDecode(pieces[2])))
        let input = Data((pieces[0] + "." + pieces[1]).utf8)
        #expect(key.publicKey.isValidSignature(signature, for: SHA256.hash(data: input), padding: .insecurePKCS1v1_5))
        let other = try _RSA.Signing.PrivateKey(keySize: .bits2048)
        #expect(!other.publicKey.isValidSignature(signature, for: SHA256.hash(data: input), padding: .insecurePKCS1v1_5))
    }

    @Test("the body narrows the token with what is configured, and is {} without narrowing")
    func requestBody() throws {
        #expect(String(decoding: GitHubAppProvider.requestBody(repositories: nil, permissions: []), as: UTF8.self) == "{}")
        let both = GitHubAppProvider.requestBody(repositories: ["tools", "in\"fra"], permissions: [.init("contents", .read), .init("issues", .write)])
        #expect(String(decoding: both, as: UTF8.self) == #"{"repositories":["tools","in\"fra"],"permissions":{"contents":"read","issues":"write"}}"#)
        let decoded = try #require(try JSONSerialization.jsonObject(with: Data(both)) as? [String: Any])
        #expect(decoded["repositories"] as? [String] == ["tools", "in\"fra"])
        #expect(
            String(decoding: GitHubAppProvider.requestBody(repositories: nil, permissions: [.init("metadata", .read)]), as: UTF8.self)
                == #"{"permissions":{"metadata":"read"}}"#)
        #expect(String(decoding: GitHubAppProvider.requestBody(repositories: ["a"], permissions: []), as: UTF8.self) == #"{"repositories":["a"]}"#)
    }

    @Test("201 Created (and 200) carry the token; expires_at sets its expiry")
    func created() throws {
        for status in [201, 200] {
            let issued = try GitHubAppProvider.read(
                Self.answer(status, #"{"token":"ghs_abcdef123456","expires_at":"2026-11-28T13:00:00Z","permissions":{"contents":"read"}}"#), sent: [])
            #expect(issued.accessToken == "ghs_abcdef123456")
            #expect(issued.expiresAt == 1_795_870_800)
        }
        // No expires_at: default_lifetime applies (the manager's rule for an answer without expiry).
        #expect(try GitHubAppProvider.read(Self.answer(201, #"{"token":"ghs_abcdef123456"}"#), sent: []).expiresAt == nil)
    }

    @Test("an answer without a usable token, or with an unreadable expires_at, is a passing failure")
    func unusableAnswers() {
        for body in [
            #"{"expires_at":"2026-11-28T13:00:00Z"}"#, #"{"token":"ghs bad"}"#, #"{"token":""}"#, "<html>", #"{"token":"ghs_abcdef","expires_at":"soon"}"#,
        ] {
            #expect(throws: TokenSourceError.self) { try GitHubAppProvider.read(Self.answer(201, body), sent: []) }
            do {
                _ = try GitHubAppProvider.read(Self.answer(201, body), sent: [])
            } catch let error as TokenSourceError {
                guard case .passing(_, .badAnswer) = error else {
                    Issue.record("\(body): \(error)")
                    continue
                }
            } catch {
                Issue.record("\(error)")
            }
        }
    }

    @Test("401, 403, 404 and 422 refuse the app: a configuration error that shows GitHub's message but never what was sent")
    func refusals() {
        let jwt = "eyJhbGciOiJSUzI1NiJ9.eyJpc3MiOiIxIn0.c2lnbmF0dXJl"
        for status in [401, 403, 404, 422] {
            let error = GitHubAppProvider.failure(
                Self.answer(status, #"{"message":"Integration not found"}"#), message: "Integration not found", sent: [jwt])
            guard case .configuration(let reason) = error else {
                Issue.record("HTTP \(status): \(error)")
                continue
            }
            #expect(reason.contains("HTTP \(status)") && reason.contains("Integration not found"), "\(reason)")
        }
        // A message that repeats what was sent is not shown.
        let echoed = GitHubAppProvider.failure(Self.answer(401, ""), message: "bad token \(jwt)", sent: [jwt])
        #expect(!echoed.reason.contains(jwt))
    }

    @Test("the JWT follows the API's Date only for an offset over the tolerance and at most 10 minutes")
    func apiClock() {
        let now = 1_900_000_000.0
        #expect(GitHubAppProvider.apiClock(date: now + 3, now: now) == .agrees)
        #expect(GitHubAppProvider.apiClock(date: now - 5, now: now) == .agrees)
        #expect(GitHubAppProvider.apiClock(date: now - 120, now: now) == .off(by: -120))
        #expect(GitHubAppProvider.apiClock(date: now + 600, now: now) == .off(by: 600))
        #expect(GitHubAppProvider.apiClock(date: now - 600, now: now) == .off(by: -600))
        #expect(GitHubAppProvider.apiClock(date: now + 601, now: now) == .tooFarOff(by: 601))
        #expect(GitHubAppProvider.apiClock(date: now - 3600, now: now) == .tooFarOff(by: -3600))
        #expect(GitHubAppProvider.apiClock(date: now + 10 * 365 * 86_400, now: now) == .tooFarOff(by: 10 * 365 * 86_400))
        #expect(GitHubAppProvider.apiClock(date: .infinity, now: now) == .agrees, "no usable date")
        #expect(GitHubAppProvider.apiClock(date: .nan, now: now) == .agrees, "no usable date")
    }

    @Test("a spent rate limit (403 or 429), 5xx and other answers are passing failures, each with its cause")
    func passingFailures() {
        func cause(_ status: Int, _ headers: [(name: String, value: String)] = []) -> PassingCause? {
            if case .passing(_, let cause) = GitHubAppProvider.failure(Self.answer(status, "{}", headers: headers), message: nil, sent: []) { return cause }
            return nil
        }
        #expect(cause(403, [(name: "x-ratelimit-remaining", value: "0")]) == .rateLimited)
        #expect(cause(403, [(name: "retry-after", value: "60")]) == .rateLimited)
        #expect(cause(429) == .rateLimited)
        #expect(cause(403) == nil, "a plain 403 refuses the app")
        #expect(cause(500) == .unavailable && cause(503) == .unavailable)
        #expect(cause(302) == .badAnswer && cause(400) == .badAnswer)
    }

    @Test("a key file that is there must hold an RSA key of 2048 bits or more; an absent one waits for the first token request")
    func keyFile() throws {
        let folder = NSTemporaryDirectory() + "/github-app-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        func provider(_ pem: String?) throws -> GitHubAppProvider {
            let path = folder + "/app.pem"
            try? FileManager.default.removeItem(atPath: path)
            if let pem {
                try pem.write(toFile: path, atomically: true, encoding: .utf8)
                try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: path)
            }
            return try GitHubAppProvider(GitHubAppConfiguration(appID: "1", installationID: "2", privateKeyFile: path))
        }
        _ = try provider(try _RSA.Signing.PrivateKey(keySize: .bits2048).pemRepresentation)
        _ = try provider(nil)
        for (pem, words) in [
            (P256.Signing.PrivateKey().pemRepresentation, "cannot sign RS256"), ("not a key", "holds no PEM block"),
        ] {
            #expect {
                _ = try provider(pem)
            } throws: { error in
                guard let error = error as? ConfigurationError else { return false }
                return error.keyPath == "credentials.private_key_file" && error.reason.contains(words)
            }
        }
        // A key read after start (one that appears, or changes) meets the same mode rule as at start.
        _ = try provider(try _RSA.Signing.PrivateKey(keySize: .bits2048).pemRepresentation)
        chmod(folder + "/app.pem", 0o644)
        #expect {
            _ = try GitHubAppProvider(GitHubAppConfiguration(appID: "1", installationID: "2", privateKeyFile: folder + "/app.pem"))
        } throws: { error in
            (error as? ConfigurationError)?.reason.contains("app.pem (mode 0644, owner uid \(geteuid())): others may read it") == true
        }
    }
}
