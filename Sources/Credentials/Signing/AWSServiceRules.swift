/// What one AWS service wants of a signed request beyond SigV4 itself (CONTRACT.md "AWS credentials
/// and SigV4 signing"): the form of the path, the payload to sign, and where S3 differs from every
/// other service. Decided once, here, from the service's name; `SigV4` and the request writer's
/// signing step (ProxyCore's `SigV4RequestSigner`) both ask it. What AWS answers to expired
/// credentials is `AWSRefusal`, beside it.
public struct AWSServiceRules: Sendable, Equatable {
    public let service: String
    /// `payload: unsigned`: every body goes `UNSIGNED-PAYLOAD`, streamed.
    public let unsignedPayload: Bool
    /// S3 signs the path as sent (no normalization, no second encoding), always sends
    /// `X-Amz-Content-Sha256`, and takes a body that streams unsigned.
    public let isS3: Bool

    public init(service: String, unsignedPayload: Bool = false) {
        self.service = service
        self.unsignedPayload = unsignedPayload
        isS3 = service == "s3"
    }

    /// What the body is when the head is written.
    public enum Body: Sendable, Equatable {
        case none
        /// All of it, as it goes up.
        case whole([UInt8])
        /// It streams: too large to hold (over `forward.retry_body_limit`), or not held.
        case streaming
        /// It streams as the client framed it: `aws-chunked` with a trailing checksum, declared by
        /// `X-Amz-Content-Sha256: STREAMING-UNSIGNED-PAYLOAD-TRAILER` (`declaresUnsignedTrailer`).
        case unsignedTrailer
    }

    /// Whether a body is read whole before the head goes, to be hashed: not with `payload: unsigned`
    /// (it streams).
    public var holdsBodies: Bool { !unsignedPayload }

    /// S3 takes `UNSIGNED-PAYLOAD` for a body that streams; other services want its hash.
    public var mayStreamUnsigned: Bool { isS3 }

    /// What the SDKs send for an S3 upload over https (the value of a request's
    /// `X-Amz-Content-Sha256`): a body S3 decodes from `aws-chunked` only when that is the payload
    /// value signed. On `s3` it goes as it came, unheld and signed so; hashing its framed bytes
    /// instead would store the framing in the object.
    public static func declaresUnsignedTrailer(_ contentSHA256: String?) -> Bool {
        contentSHA256 == SigV4.unsignedTrailer
    }

    /// The payload hash to sign: the body's SHA-256 when it is at hand; `UNSIGNED-PAYLOAD` with
    /// `payload: unsigned`, or for `s3` when the body streams; for `s3`, an `aws-chunked` body with a
    /// trailing checksum as its client declared it; nil when a body that streams must be signed (the
    /// request gets 413 `body_too_large`).
    public func payload(_ body: Body) -> SigV4Request.Payload? {
        if case .unsignedTrailer = body { return mayStreamUnsigned ? .unsignedTrailer : nil }
        if unsignedPayload { return .unsigned }
        switch body {
        case .none: return .hash(SigV4.emptyPayloadHash)
        case .whole(let bytes): return .hash(SigV4.sha256Hex(bytes))
        case .streaming, .unsignedTrailer: return mayStreamUnsigned ? .unsigned : nil
        }
    }

    /// Whether `X-Amz-Content-Sha256` goes with the request: always for S3; for every other service
    /// only when the payload is not a hash (the hash is in the canonical request only, where they read it).
    public func sendsPayloadHash(_ payload: SigV4Request.Payload) -> Bool {
        if case .hash = payload { return isS3 }
        return true
    }

    /// Whether the canonical URI is the path normalized and encoded once more (every service but
    /// S3; `SigV4.canonicalURI`).
    public var encodesPathTwice: Bool { !isS3 }

    /// The path a signed request goes upstream with, for every service: the one form an SDK sends
    /// (`SigV4.sdkPath`), which is also the form signed, so that upstream verifiers that read the
    /// path as sent and those that decode and encode it again agree.
    public static func upstreamPath(_ path: String) -> String { SigV4.sdkPath(path) }
}
