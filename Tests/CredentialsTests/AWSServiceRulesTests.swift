import Testing

@testable import Credentials

/// Where S3 differs from every other service (CONTRACT.md "AWS credentials and SigV4 signing"),
/// decided once by `AWSServiceRules`.
@Suite struct AWSServiceRulesTests {
    @Test func onlyS3IsS3() {
        #expect(AWSServiceRules(service: "s3").isS3)
        for service in ["execute-api", "es", "S3", "s3-outposts", ""] {
            #expect(!AWSServiceRules(service: service).isS3, "\(service)")
        }
    }

    @Test func s3TakesABodyThatStreamsUnsignedAndOthersWantItsHash() {
        #expect(AWSServiceRules(service: "s3").payload(.streaming) == .unsigned)
        #expect(AWSServiceRules(service: "execute-api").payload(.streaming) == nil)
        #expect(AWSServiceRules(service: "execute-api", unsignedPayload: true).payload(.streaming) == .unsigned)
        #expect(AWSServiceRules(service: "s3").mayStreamUnsigned && !AWSServiceRules(service: "es").mayStreamUnsigned)
    }

    /// `STREAMING-UNSIGNED-PAYLOAD-TRAILER`: an S3 upload in aws-chunked framing, signed as declared.
    @Test func anUnsignedTrailerIsS3sAlone() {
        #expect(AWSServiceRules.declaresUnsignedTrailer("STREAMING-UNSIGNED-PAYLOAD-TRAILER"))
        #expect(!AWSServiceRules.declaresUnsignedTrailer("UNSIGNED-PAYLOAD"))
        #expect(!AWSServiceRules.declaresUnsignedTrailer(nil))
        #expect(AWSServiceRules(service: "s3", unsignedPayload: true).payload(.unsignedTrailer) == .unsignedTrailer)
        #expect(AWSServiceRules(service: "es").payload(.unsignedTrailer) == nil)
    }

    @Test func aBodyIsHeldToBeHashedUnlessThePayloadIsUnsigned() {
        #expect(AWSServiceRules(service: "es").holdsBodies)
        #expect(!AWSServiceRules(service: "s3", unsignedPayload: true).holdsBodies)
        #expect(AWSServiceRules(service: "es").payload(.none) == .hash(SigV4.emptyPayloadHash))
        #expect(AWSServiceRules(service: "es").payload(.whole(Array("x".utf8))) == .hash(SigV4.sha256Hex(Array("x".utf8))))
    }

    /// S3 always sends `X-Amz-Content-Sha256`; other services read a hash in the canonical request only.
    @Test func theContentHashFieldGoesAlwaysToS3AndOtherwiseForAnUnsignedPayload() {
        let s3 = AWSServiceRules(service: "s3")
        let other = AWSServiceRules(service: "execute-api")
        #expect(s3.sendsPayloadHash(.hash("h")) && s3.sendsPayloadHash(.unsigned))
        #expect(!other.sendsPayloadHash(.hash("h")))
        #expect(other.sendsPayloadHash(.unsigned) && other.sendsPayloadHash(.unsignedTrailer))
    }

    /// S3 signs the path as sent; every other service normalizes it and encodes it once more.
    @Test func onlyS3SignsThePathAsSent() {
        #expect(!AWSServiceRules(service: "s3").encodesPathTwice)
        #expect(AWSServiceRules(service: "es").encodesPathTwice)
        #expect(SigV4.canonicalURI("/a/./b%20c", service: "s3") == "/a/./b%20c")
        #expect(SigV4.canonicalURI("/a/./b%20c", service: "es") == "/a/b%2520c")
    }

    /// Every service's request goes in the SDK's form (`SigV4.sdkPath`).
    @Test func theUpstreamPathIsTheSDKsForm() {
        #expect(AWSServiceRules.upstreamPath("/a b/%7e%2b") == "/a%20b/~%2B")
        #expect(AWSServiceRules.upstreamPath(AWSServiceRules.upstreamPath("/a b")) == "/a%20b")
    }
}
