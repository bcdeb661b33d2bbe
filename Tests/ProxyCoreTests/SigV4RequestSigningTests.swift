import Config
import Credentials
import Foundation
import HTTP1
import Testing

@testable import ProxyCore

/// The SigV4 step of the request writer (CONTRACT.md "AWS credentials and SigV4 signing"), bytes in
/// and bytes out: the signature covers exactly the fields that go upstream.
@Suite struct SigV4RequestSigningTests {
    static let credentials = AWSCredentials(
        accessKeyID: "ASIAEXAMPLE", secretAccessKey: "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", sessionToken: "session-token")

    /// The upstream head of `request` on a `type: aws` route of `service` (`extra`: more top-level keys).
    func signedHead(_ request: String, service: String = "execute-api", body: SigV4RequestSigner.Body = .none, extra: String = "") throws
        -> String
    {
        let yaml = """
            listen: 127.0.0.1:8080
            upstream: https://api.example.com:8443/v1
            credentials:
              type: aws
              region: eu-west-1
              service: \(service)
              source: environment
            \(extra)
            """
        let forwarder = Forwarder(configuration: try ConfigurationLoader.parse(yaml: yaml, baseDirectory: "/", environment: [:]).configuration)
        guard case .signed(let signer) = forwarder.credential.placement else {
            Issue.record("a type: aws route's placement is not signed")
            return ""
        }
        let credentials = AWSSigningCredentials(Self.credentials)
        let token = TokenSnapshot(
            accessToken: Self.credentials.containerEndpointJSON, expiresAt: nil, issuedAt: 0, generation: 1, aws: credentials)
        let step = try #require(signer.step(credentials: credentials, body: body))
        let out = ByteBuffer()
        forwarder.writeRequestHead(
            into: out, for: ForwarderTests.request(request),
            Forwarder.RequestParts(path: "/items/a b", query: "z=1&a=2", forwardedFor: Forwarder.forwardedForLines(peerHost: "127.0.0.1", https: false)),
            credential: RequestCredential(placement: forwarder.credential.placement, token: token, signing: step))
        return String(decoding: out.bytes, as: UTF8.self)
    }

    static func fields(_ head: String) -> [(name: String, value: String)] {
        head.components(separatedBy: "\r\n").dropFirst().compactMap { line in
            guard let colon = line.firstIndex(of: ":") else { return nil }
            return (String(line[..<colon]), line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces))
        }
    }

    @Test func theSignatureCoversTheFieldsThatGoAndNoOthers() throws {
        let head = try signedHead(
            "POST /items HTTP/1.1\r\nHost: localhost:8080\r\nContent-Type: application/json\r\nX-Amz-Meta-Color: blue\r\n"
                + "User-Agent: curl/8\r\nX-Amzn-Trace-Id: Root=1\r\nX-Forwarded-For: 10.0.0.1\r\nAuthorization: Bearer client\r\n"
                + "X-Amz-Date: 20200101T000000Z\r\nContent-Length: 0\r\n\r\n")
        let fields = Self.fields(head)
        // The path goes in the one form an SDK sends (a raw space escaped), and is signed in that form.
        #expect(head.hasPrefix("POST /v1/items/a%20b?z=1&a=2 HTTP/1.1\r\n"))
        // The client's own signature fields are replaced; other fields go as they came.
        #expect(!head.contains("Bearer client"))
        #expect(!head.contains("20200101T000000Z"))
        #expect(head.contains("User-Agent: curl/8\r\n"))
        #expect(head.contains("X-Amzn-Trace-Id: Root=1\r\n"))
        #expect(fields.filter { $0.name == "Authorization" }.count == 1)
        #expect(fields.first { $0.name == "X-Amz-Security-Token" }?.value == "session-token")
        // execute-api: no X-Amz-Content-Sha256 (only s3 and payload: unsigned send it).
        #expect(!head.contains("X-Amz-Content-Sha256"))
        let authorization = try #require(fields.first { $0.name == "Authorization" }?.value)
        #expect(authorization.contains("SignedHeaders=content-type;host;x-amz-date;x-amz-meta-color;x-amz-security-token,"))
        #expect(authorization.contains("Credential=ASIAEXAMPLE/"))
        #expect(authorization.contains("/eu-west-1/execute-api/aws4_request"))

        // Signed again from what went upstream, with the time it names: the same signature.
        let stamp = try #require(fields.first { $0.name == "X-Amz-Date" }?.value)
        let parser = DateFormatter()
        parser.locale = Locale(identifier: "en_US_POSIX")
        parser.timeZone = TimeZone(identifier: "UTC")
        parser.dateFormat = "yyyyMMdd'T'HHmmss'Z'"
        let time = try #require(parser.date(from: stamp)).timeIntervalSince1970
        let signedNames = ["content-type", "host", "x-amz-meta-color"]
        let request = SigV4Request(
            method: "POST", path: "/v1/items/a%20b", query: "z=1&a=2",
            headers: fields.filter { signedNames.contains($0.name.lowercased()) }, payload: .hash(SigV4.emptyPayloadHash))
        let again = SigV4.sign(request, region: "eu-west-1", service: "execute-api", credentials: Self.credentials, time: time)
        #expect(again.first { $0.name == "Authorization" }?.value == authorization)
        #expect(fields.first { $0.name == "Host" }?.value == "api.example.com:8443")
    }

    @Test func s3SendsThePayloadHashItSigned() throws {
        let body = Array("hello".utf8)
        let head = try signedHead("PUT /k HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\n\r\n", service: "s3", body: .whole(body))
        #expect(head.contains("X-Amz-Content-Sha256: \(SigV4.sha256Hex(body))\r\n"))
        #expect(head.contains("x-amz-content-sha256;x-amz-date;x-amz-security-token,"))
    }

    @Test func anExpectGoesNoFurtherWhenTheBodyWasHeld() throws {
        let request = "PUT /k HTTP/1.1\r\nHost: h\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\n"
        #expect(!(try signedHead(request, service: "s3", body: .whole(Array("hello".utf8)))).contains("Expect"))
        #expect(try signedHead(request, service: "s3", body: .streaming).contains("Expect: 100-continue\r\n"))
    }

    @Test func aPreservedClientHostIsTheOneSigned() throws {
        let head = try signedHead("GET /k HTTP/1.1\r\nHost: bucket.s3.example\r\n\r\n", extra: "forward: {preserve_host: true}")
        #expect(head.contains("Host: bucket.s3.example\r\n"))
        #expect(head.contains("SignedHeaders=host;x-amz-date;x-amz-security-token,"))
    }

    @Test func thePayloadHashFollowsTheBodyAndTheService() {
        #expect(AWSServiceRules(service: "es", unsignedPayload: false).payload(.none) == .hash(SigV4.emptyPayloadHash))
        #expect(AWSServiceRules(service: "es", unsignedPayload: false).payload(.whole(Array("x".utf8))) == .hash(SigV4.sha256Hex(Array("x".utf8))))
        #expect(AWSServiceRules(service: "s3", unsignedPayload: false).payload(.streaming) == .unsigned)
        #expect(AWSServiceRules(service: "es", unsignedPayload: false).payload(.streaming) == nil)
        #expect(AWSServiceRules(service: "es", unsignedPayload: true).payload(.streaming) == .unsigned)
        #expect(AWSServiceRules(service: "s3", unsignedPayload: true).payload(.whole([1])) == .unsigned)
        // An aws-chunked body with a trailing checksum is signed as its client framed it, on s3 only.
        #expect(AWSServiceRules(service: "s3", unsignedPayload: false).payload(.unsignedTrailer) == .unsignedTrailer)
        #expect(AWSServiceRules(service: "s3", unsignedPayload: true).payload(.unsignedTrailer) == .unsignedTrailer)
        #expect(AWSServiceRules(service: "es", unsignedPayload: false).payload(.unsignedTrailer) == nil)
    }

    /// What the SDKs send over https: the payload value the client declared goes and is signed, once.
    @Test func anAWSChunkedUploadWithATrailerIsSignedAsFramed() throws {
        let head = try signedHead(
            "PUT /k HTTP/1.1\r\nHost: h\r\nContent-Encoding: aws-chunked\r\nX-Amz-Content-Sha256: STREAMING-UNSIGNED-PAYLOAD-TRAILER\r\n"
                + "X-Amz-Decoded-Content-Length: 5\r\nX-Amz-Trailer: x-amz-checksum-crc32\r\nContent-Length: 60\r\n\r\n",
            service: "s3", body: .unsignedTrailer)
        #expect(head.components(separatedBy: "X-Amz-Content-Sha256: ").count == 2, "\(head)")
        #expect(head.contains("X-Amz-Content-Sha256: STREAMING-UNSIGNED-PAYLOAD-TRAILER\r\n"))
        #expect(head.contains("Content-Encoding: aws-chunked\r\n"))
        #expect(head.contains("x-amz-content-sha256;x-amz-date;x-amz-decoded-content-length;x-amz-security-token;x-amz-trailer,"), "\(head)")
        #expect(
            !ExchangeRules.holdsBodyToSign(
                framing: .contentLength(60), wantsUpgrade: false, expectsContinue: false, mayStreamUnsigned: true, streamsAsFramed: true, limit: 100))
    }

    @Test func aBodyIsHeldToBeSignedWhenItMayFit() {
        #expect(ExchangeRules.holdsBodyToSign(framing: .contentLength(10), wantsUpgrade: false, expectsContinue: false, mayStreamUnsigned: false, limit: 10))
        #expect(!ExchangeRules.holdsBodyToSign(framing: .contentLength(11), wantsUpgrade: false, expectsContinue: false, mayStreamUnsigned: false, limit: 10))
        #expect(ExchangeRules.holdsBodyToSign(framing: .chunked, wantsUpgrade: false, expectsContinue: false, mayStreamUnsigned: false, limit: 10))
        #expect(!ExchangeRules.holdsBodyToSign(framing: .chunked, wantsUpgrade: true, expectsContinue: false, mayStreamUnsigned: false, limit: 10))
        #expect(!ExchangeRules.holdsBodyToSign(framing: .none, wantsUpgrade: false, expectsContinue: false, mayStreamUnsigned: false, limit: 10))
        // The proxy never answers 100 itself: an s3 body whose client waits for it streams unsigned;
        // another service's is held until the client sends it after its own wait.
        #expect(!ExchangeRules.holdsBodyToSign(framing: .contentLength(10), wantsUpgrade: false, expectsContinue: true, mayStreamUnsigned: true, limit: 10))
        #expect(ExchangeRules.holdsBodyToSign(framing: .contentLength(10), wantsUpgrade: false, expectsContinue: true, mayStreamUnsigned: false, limit: 10))
        #expect(ExchangeRules.holdsBodyToSign(framing: .contentLength(10), wantsUpgrade: false, expectsContinue: false, mayStreamUnsigned: true, limit: 10))
    }

    @Test func theCredentialsJSONReadsBackAndTheKeptKeySignsAlike() throws {
        let json = Self.credentials.containerEndpointJSON
        let back = try #require(AWSCredentials(containerEndpointJSON: json))
        #expect(back == Self.credentials)
        var temporary = Self.credentials
        temporary.expiration = 1_790_000_000
        #expect(AWSCredentials(containerEndpointJSON: temporary.containerEndpointJSON) == temporary)
        #expect(AWSCredentials(containerEndpointJSON: #"{"AccessKeyId":"A","SecretAccessKey":"s\ncr"}"#) == nil)
        #expect(AWSCredentials(containerEndpointJSON: "not json") == nil)
        let kept = AWSSigningCredentials(Self.credentials)
        let request = SigV4Request(method: "GET", path: "/", headers: [("host", "h")], payload: .hash(SigV4.emptyPayloadHash))
        for time in [1_790_000_000.0, 1_790_000_001, 1_790_100_000] {
            let plain = SigV4.sign(request, region: "us-east-1", service: "s3", credentials: Self.credentials, time: time)
            let cached = kept.sign(request, region: "us-east-1", service: "s3", time: time)
            #expect(plain.map(\.value) == cached.map(\.value))
        }
    }
}

/// Which AWS 403s count as the 401 (CONTRACT.md "AWS credentials and SigV4 signing").
@Suite struct AWSRefusalTests {
    @Test func theHeadDecidesWhatItCan() {
        typealias R = AWSRefusal
        #expect(R.atHead(status: 403, errorType: "ExpiredTokenException:http://internal.amazon.com/coral/", isHEAD: false, nearExpiry: false) == .refresh)
        #expect(R.atHead(status: 403, errorType: "InvalidClientTokenId", isHEAD: false, nearExpiry: false) == .refresh)
        #expect(R.atHead(status: 403, errorType: "AccessDeniedException:x", isHEAD: false, nearExpiry: true) == .passOn)
        #expect(R.atHead(status: 403, errorType: nil, isHEAD: false, nearExpiry: false) == .readBody)
        #expect(R.atHead(status: 403, errorType: nil, isHEAD: true, nearExpiry: true) == .refresh)
        #expect(R.atHead(status: 403, errorType: nil, isHEAD: true, nearExpiry: false) == .passOn)
        #expect(R.atHead(status: 404, errorType: "ExpiredToken", isHEAD: false, nearExpiry: true) == .passOn)
    }

    @Test func theBodyNamesTheCodeAsAWord() {
        func says(_ text: String) -> Bool { AWSRefusal.bodyNamesExpiredCredentials(Array(text.utf8)) }
        #expect(says("<Error><Code>ExpiredToken</Code><Message>The provided token has expired.</Message></Error>"))
        #expect(says(#"{"__type":"com.amazon.coral.service#ExpiredTokenException","message":"x"}"#))
        #expect(says("<ErrorResponse><Error><Code>InvalidClientTokenId</Code></Error></ErrorResponse>"))
        #expect(says("<Error><Code>RequestExpired</Code></Error>"))
        #expect(says(#"{"message":"The security token included in the request is expired"}"#))
        #expect(says("RequestExpired"))
        #expect(!says("<Error><Code>AccessDenied</Code></Error>"))
        #expect(!says("<Error><Code>ExpiredTokenSoon</Code></Error>"))
        #expect(!says(#"{"message":"The security token included in the request is invalid."}"#))
        #expect(!says(""))
    }
}
