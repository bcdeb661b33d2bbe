import Credentials
import HTTP1

/// The SigV4 step of the request writer for a `type: aws` route (CONTRACT.md "AWS credentials and
/// SigV4 signing"), chosen once per route (`CredentialPlacement.signed`, `LoopRoute.sigv4`): routes
/// with a token never meet it.
/// `Forwarder.writeRequestHead` shows it each field it copies upstream, so the signature covers
/// exactly the fields that go (never a field changed after signing), then appends what signs them.
/// One per route and loop: its scratch list is reused request after request.
final class SigV4RequestSigner {
    let region: String
    let service: String
    /// `payload: unsigned`: every body goes `UNSIGNED-PAYLOAD`, streamed.
    let unsignedPayload: Bool
    /// `credentials.refresh_margin`: a 403 to a HEAD sent with credentials this close to their expiry
    /// counts as the 401 (`AWSRefusal`).
    let refreshMargin: Double
    /// The fields of the request being written that are signed (`SigV4.signsField`), as they go.
    private var signed: [(name: String, value: String)] = []

    init(region: String, service: String, unsignedPayload: Bool, refreshMargin: Double = 0) {
        self.refreshMargin = refreshMargin
        self.region = region
        self.service = service
        self.unsignedPayload = unsignedPayload
    }

    /// Whether a body is read whole before the head goes, to be hashed: not with `payload: unsigned`
    /// (it streams).
    var holdsBodies: Bool { !unsignedPayload }

    /// S3 takes `UNSIGNED-PAYLOAD` for a body that streams; other services want its hash.
    static func mayStreamUnsigned(service: String) -> Bool { service == "s3" }
    var mayStreamUnsigned: Bool { Self.mayStreamUnsigned(service: service) }

    /// What an upstream 403 to a request sent with `token` is (`AWSRefusal`).
    func verdict(on head: ResponseHead, isHEAD: Bool, token: TokenSnapshot) -> AWSRefusal.Verdict {
        let nearExpiry = token.expiresAt.map { $0 - wallClock() <= refreshMargin } ?? false
        return AWSRefusal.atHead(status: head.status, errorType: head.fields.first("x-amzn-errortype"), isHEAD: isHEAD, nearExpiry: nearExpiry)
    }

    /// What the body is when the head is written.
    enum Body {
        case none
        /// All of it, as it goes up.
        case whole([UInt8])
        /// It streams: too large to hold (over `forward.retry_body_limit`), or not held.
        case streaming
        /// It streams as the client framed it: `aws-chunked` with a trailing checksum, declared by
        /// `X-Amz-Content-Sha256: STREAMING-UNSIGNED-PAYLOAD-TRAILER` (`declaresUnsignedTrailer`).
        case unsignedTrailer
    }

    /// What the SDKs send for an S3 upload over https: a body S3 decodes from `aws-chunked` only
    /// when that is the payload value signed. On `s3` it goes as it came, unheld and signed so;
    /// hashing its framed bytes instead would store the framing in the object.
    static func declaresUnsignedTrailer(_ head: borrowing RequestHead) -> Bool {
        head.first("x-amz-content-sha256") == SigV4.unsignedTrailer
    }

    /// The payload hash to sign (CONTRACT.md): the body's SHA-256 when it is at hand;
    /// `UNSIGNED-PAYLOAD` with `payload: unsigned`, or for `s3` when the body streams; for `s3`, an
    /// `aws-chunked` body with a trailing checksum as its client declared it; nil when a body that
    /// streams must be signed (the request gets 413 `body_too_large`).
    static func payload(_ body: Body, service: String, unsignedPayload: Bool) -> SigV4Request.Payload? {
        if case .unsignedTrailer = body { return mayStreamUnsigned(service: service) ? .unsignedTrailer : nil }
        if unsignedPayload { return .unsigned }
        switch body {
        case .none: return .hash(SigV4.emptyPayloadHash)
        case .whole(let bytes): return .hash(SigV4.sha256Hex(bytes))
        case .streaming, .unsignedTrailer: return mayStreamUnsigned(service: service) ? .unsigned : nil
        }
    }

    /// A request's signing under way: the credentials and the payload to sign.
    struct Step {
        let signer: SigV4RequestSigner
        let credentials: AWSSigningCredentials
        let payload: SigV4Request.Payload
        /// The body was read whole first: a client's `Expect` was waited out and does not go up (the
        /// body follows the head at once).
        let bodyHeld: Bool
    }

    func step(credentials: AWSSigningCredentials, body: Body) -> Step? {
        guard let payload = Self.payload(body, service: service, unsignedPayload: unsignedPayload) else { return nil }
        signed.removeAll(keepingCapacity: true)
        let bodyHeld: Bool
        switch body {
        case .whole: bodyHeld = true
        case .none, .streaming, .unsignedTrailer: bodyHeld = false
        }
        return Step(signer: self, credentials: credentials, payload: payload, bodyHeld: bodyHeld)
    }
}

extension SigV4RequestSigner.Step {
    /// The Host value that goes upstream.
    func noteHost(_ value: String) {
        signer.signedAppend(name: "host", value: value)
    }

    /// Whether client field `index` stays out of the upstream request: the fields the signature sets
    /// (Authorization, X-Amz-Date, X-Amz-Security-Token, X-Amz-Content-Sha256) are replaced, and
    /// `Expect` goes no further than the proxy that held the body (its client stopped waiting).
    /// Every other field goes, and is noted when it is signed.
    func drops(_ index: Int, of fields: FieldBlock) -> Bool {
        if bodyHeld && fields.nameEquals(index, "expect") { return true }
        let name = fields.name(index)
        if SigV4.setsField(name) { return true }
        if SigV4.signsField(name) { signer.signedAppend(name: name, value: fields.value(index)) }
        return false
    }

    /// Signs the fields noted and appends `Authorization`, `X-Amz-Date` and, as the credentials and
    /// service want them, `X-Amz-Security-Token` and `X-Amz-Content-Sha256`. `path` and `query` as
    /// they go upstream (base path included).
    func appendSignature(to out: ByteBuffer, method: String, path: String, query: String?) {
        let request = SigV4Request(method: method, path: path, query: query ?? "", headers: signer.takeSigned(), payload: payload)
        for (name, value) in credentials.sign(request, region: signer.region, service: signer.service, time: wallClock()) {
            out.append(utf8: name)
            out.append(": ")
            out.append(utf8: value)
            out.appendCRLF()
        }
    }
}

extension SigV4RequestSigner {
    fileprivate func signedAppend(name: String, value: String) { signed.append((name, value)) }
    fileprivate func takeSigned() -> [(name: String, value: String)] { signed }
}
