import Config
import Foundation
import TestSupport
import Testing

@testable import Credentials

/// One moto for the whole test process, with IAM authentication on (it takes seconds to start).
private enum MotoVerifier {
    private static let started = Result { try MotoSigV4Server(prefix: "tokenproxy-moto-sigv4") }
    static func shared() throws -> MotoSigV4Server { try started.get() }
}

extension MotoSigV4Server {
    var credentials: AWSCredentials { AWSCredentials(accessKeyID: account.access_key_id, secretAccessKey: account.secret_access_key) }
    var sessionCredentials: AWSCredentials {
        AWSCredentials(
            accessKeyID: account.session.access_key_id, secretAccessKey: account.session.secret_access_key,
            sessionToken: account.session.session_token)
    }
}

/// Signs a request with `SigV4.sign` and sends it with curl (a real client on a real socket),
/// exactly the path and query given.
func sendSigned(
    _ method: String, base: String, path: String, query: String = "", body: String = "", headers: [(name: String, value: String)] = [],
    region: String = "us-east-1", service: String = "s3", credentials: AWSCredentials, payload: SigV4Request.Payload? = nil
) throws -> CurlResult {
    let host = String(base.dropFirst("http://".count))
    let request = SigV4Request(
        method: method, path: path, query: query, headers: [("Host", host)] + headers,
        payload: payload ?? .hash(SigV4.sha256Hex(Array(body.utf8))))
    let added = SigV4.sign(request, region: region, service: service, credentials: credentials, time: Date().timeIntervalSince1970)
    var arguments = ["--path-as-is", "-X", method, "-H", "Content-Type:", "-H", "Accept:", "-H", "Expect:"]
    for field in headers + added { arguments += ["-H", "\(field.name): \(field.value)"] }
    let folder = try TempDir(prefix: "sigv4-body")
    if !body.isEmpty { arguments += ["--data-binary", "@" + (try folder.write("body", body))] }
    return try curl(arguments + [base + path + (query.isEmpty ? "" : "?" + query)])
}

@Suite("SigV4 against verifiers", .serialized)
struct SigV4VerifierTests {
    // MARK: moto (botocore's check of every signed action)

    @Test func s3ObjectsAndListingOnMoto() throws {
        let moto = try MotoVerifier.shared()
        let base = moto.account.endpoint
        let bucket = "/signed-\(UInt32.random(in: 0...UInt32.max))"
        let made = try sendSigned("PUT", base: base, path: bucket, credentials: moto.credentials)
        #expect(made.status == 200, "\(made.bodyString)")

        // moto verifies only keys of letters, digits, -._~, space and / (TEST-SERVERS.md).
        let key = "/dir/my key with spaces.txt"
        let put = try sendSigned("PUT", base: base, path: bucket + awsPathEncoded(key), body: "hello, signed world", credentials: moto.credentials)
        #expect(put.status == 200, "\(put.bodyString)")
        let get = try sendSigned("GET", base: base, path: bucket + awsPathEncoded(key), credentials: moto.credentials)
        #expect(get.status == 200, "\(get.bodyString)")
        #expect(get.bodyString == "hello, signed world")

        // A listing with query parameters, given out of order (the signer sorts them).
        let list = try sendSigned("GET", base: base, path: bucket, query: "prefix=dir&max-keys=5&list-type=2", credentials: moto.credentials)
        #expect(list.status == 200, "\(list.bodyString)")
        #expect(list.bodyString.contains("<Key>dir/my key with spaces.txt</Key>"))

        // Temporary credentials from AssumeRole: X-Amz-Security-Token is sent and signed.
        let session = try sendSigned("GET", base: base, path: bucket + awsPathEncoded(key), credentials: moto.sessionCredentials)
        #expect(session.status == 200, "\(session.bodyString)")
        #expect(session.bodyString == "hello, signed world")
    }

    @Test func motoRefusesAWrongSecretAndAWrongToken() throws {
        let moto = try MotoVerifier.shared()
        var wrong = moto.credentials
        wrong.secretAccessKey = String(wrong.secretAccessKey.dropLast()) + (wrong.secretAccessKey.hasSuffix("A") ? "B" : "A")
        let refused = try sendSigned("GET", base: moto.account.endpoint, path: "/", credentials: wrong)
        #expect(refused.status == 403)
        #expect(refused.bodyString.contains("SignatureDoesNotMatch"), "\(refused.bodyString)")

        var badToken = moto.sessionCredentials
        badToken.sessionToken = "not-the-token"
        let tokenRefused = try sendSigned("GET", base: moto.account.endpoint, path: "/", credentials: badToken)
        // S3 (and moto) answer 400 InvalidToken for a session token it does not know.
        #expect(tokenRefused.status == 400)
        #expect(tokenRefused.bodyString.contains("<Code>InvalidToken</Code>"), "\(tokenRefused.bodyString)")
    }

    /// A service other than S3 (STS's query protocol): no X-Amz-Content-Sha256, so botocore hashes
    /// the body itself and a payload hash that does not match it is caught.
    @Test func stsGetCallerIdentityOnMoto() throws {
        let moto = try MotoVerifier.shared()
        let body = "Action=GetCallerIdentity&Version=2011-06-15"
        let form = [(name: "Content-Type", value: "application/x-www-form-urlencoded; charset=utf-8")]
        let answer = try sendSigned("POST", base: moto.account.endpoint, path: "/", body: body, headers: form, service: "sts", credentials: moto.credentials)
        #expect(answer.status == 200, "\(answer.bodyString)")
        #expect(answer.bodyString.contains("<Arn>arn:aws:iam::"), "\(answer.bodyString)")
        #expect(
            !SigV4.sign(
                SigV4Request(method: "POST", path: "/", headers: [("Host", "h")], payload: .hash(SigV4.sha256Hex(Array(body.utf8)))),
                region: "us-east-1", service: "sts", credentials: moto.credentials, time: 0
            ).contains { $0.name == "X-Amz-Content-Sha256" })

        let otherBody = try sendSigned(
            "POST", base: moto.account.endpoint, path: "/", body: body, headers: form, service: "sts", credentials: moto.credentials,
            payload: .hash(SigV4.sha256Hex(Array("Action=GetCallerIdentity".utf8))))
        #expect(otherBody.status == 403, "\(otherBody.bodyString)")
    }

    /// `role_arn` over another source: AssumeRole signed by this signer and checked by moto; the
    /// role's session credentials then sign an S3 call that moto accepts.
    @Test func assumeRoleSignedWithTheSourceCredentials() throws {
        let moto = try MotoVerifier.shared()
        var aws = AWSConfiguration(region: "us-east-1", service: "s3")
        aws.source = .environment
        aws.roleARN = moto.account.role_arn
        aws.roleSessionName = "chained"
        aws.stsEndpoint = moto.account.endpoint + "/"
        let env = ["AWS_ACCESS_KEY_ID": moto.account.access_key_id, "AWS_SECRET_ACCESS_KEY": moto.account.secret_access_key]
        let source = try makeAWSCredentialSource(aws, environment: env)
        #expect(source.name == "environment + role_arn")
        let assumed = try source.fetch()
        #expect(assumed.accessKeyID.hasPrefix("ASIA"))
        #expect(assumed.sessionToken != nil && assumed.expiration != nil)
        let listing = try sendSigned("GET", base: moto.account.endpoint, path: "/", credentials: assumed)
        #expect(listing.status == 200, "\(listing.bodyString)")

        let wrong = try makeAWSCredentialSource(aws, environment: env.merging(["AWS_SECRET_ACCESS_KEY": "wrong"]) { $1 })
        let error = try #require(throws: AWSCredentialError.self) { try wrong.fetch() }
        #expect(error.description.contains("SignatureDoesNotMatch"), "\(error)")
        #expect(!error.description.contains(moto.account.secret_access_key))
    }

    @Test func stsEndpointParts() throws {
        let a = try #require(STSTarget("https://sts.eu-west-1.amazonaws.com"))
        #expect(a.authority == "sts.eu-west-1.amazonaws.com" && a.path == "/" && a.query == "")
        let b = try #require(STSTarget("http://127.0.0.1:8080/sts/x?a=1#f"))
        #expect(b.authority == "127.0.0.1:8080" && b.path == "/sts/x" && b.query == "a=1")
        #expect(STSTarget("https://h:443/")?.authority == "h")
        #expect(STSTarget("ftp://h/") == nil)
    }

    // MARK: botocore on the raw request target (keys moto cannot verify)

    static let keyID = "AKIDVERIFIER"
    static let secret = "verifier/secret+key"

    func verifier() throws -> PythonServer {
        try PythonServer("sigv4_verifier", arguments: ["--key", "\(Self.keyID):\(Self.secret)", "--key", "ASIAVERIFIER:temp/secret:the+session/token="])
    }

    @Test func unicodeAndReservedKeysVerifyWithBotocore() throws {
        let server = try verifier()
        let credentials = AWSCredentials(accessKeyID: Self.keyID, secretAccessKey: Self.secret)
        for key in ["/b/ünïcödé key/文件.txt", "/b/a+b=c&d;e,f(1)!*'@$:.txt", "/b/100% sure?#frag", "/b/~tilde-dot._under"] {
            let path = awsPathEncoded(key)
            let put = try sendSigned("PUT", base: server.baseURL, path: path, body: "body of \(key)", credentials: credentials)
            #expect(put.status == 200, "\(key): \(put.bodyString)")
            let get = try sendSigned("GET", base: server.baseURL, path: path, credentials: credentials)
            #expect(get.status == 200, "\(key): \(get.bodyString)")
            #expect(get.bodyString == "body of \(key)")
        }
        // Signed fields with runs of spaces and padding: botocore folds them the same way.
        let meta = try sendSigned(
            "PUT", base: server.baseURL, path: "/b/meta", body: "m", headers: [("X-Amz-Meta-Note", "a   b  c"), ("Content-MD5", "  bTpNOqBszGbxdUNuzvMVyg==")],
            credentials: credentials)
        #expect(meta.status == 200, "\(meta.bodyString)")
        // A listing: encoded values, a repeated name, an empty value, a name without `=`.
        let list = try sendSigned(
            "GET", base: server.baseURL, path: "/b", query: "prefix=k%2F%C3%BC&delimiter=%2F&tag=b&tag=a&marker=&versions", credentials: credentials)
        #expect(list.status == 404, "\(list.bodyString)")  // verified, then no such object

        var wrong = credentials
        wrong.secretAccessKey = "verifier/secret+kez"
        let refused = try sendSigned("GET", base: server.baseURL, path: awsPathEncoded("/b/ünïcödé key/文件.txt"), credentials: wrong)
        #expect(refused.status == 403)
        #expect(refused.bodyString.hasPrefix("SignatureDoesNotMatch"))
    }

    /// Every service but S3 signs the path encoded twice: an escape `%20` in the path is `%2520`.
    @Test func otherServicesSignThePathEncodedTwice() throws {
        let server = try verifier()
        let temporary = AWSCredentials(accessKeyID: "ASIAVERIFIER", secretAccessKey: "temp/secret", sessionToken: "the+session/token=")
        let path = awsPathEncoded("/prod/items/a b/ü")
        #expect(SigV4.canonicalURI(path, service: "execute-api") == "/prod/items/a%2520b/%25C3%25BC")
        let put = try sendSigned("PUT", base: server.baseURL, path: path, body: "{}", region: "eu-west-1", service: "execute-api", credentials: temporary)
        #expect(put.status == 200, "\(put.bodyString)")
        // Signed for S3's single encoding but checked as execute-api: refused.
        let request = SigV4Request(method: "GET", path: path, headers: [("Host", "h")], payload: .hash(SigV4.emptyPayloadHash))
        let single = SigV4.canonicalRequest(request, service: "s3").text
        let double = SigV4.canonicalRequest(request, service: "execute-api").text
        #expect(single != double)
        // An unsigned payload is sent as UNSIGNED-PAYLOAD and accepted.
        let unsigned = try sendSigned(
            "PUT", base: server.baseURL, path: path, body: "{\"big\":true}", region: "eu-west-1", service: "execute-api", credentials: temporary,
            payload: .unsigned)
        #expect(unsigned.status == 200, "\(unsigned.bodyString)")
    }
}
