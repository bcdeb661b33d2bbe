import Credentials
import HTTP1
import Sockets

/// The SigV4 step of the request writer for a `type: aws` route (CONTRACT.md "AWS credentials and
/// SigV4 signing"), chosen once per route (`CredentialPlacement.signed`): routes with a token never
/// meet it. Each request's `RequestCredential.signed` shows it each field `Forwarder.writeRequestHead`
/// copies upstream, so the signature covers exactly the fields that go (never a field changed after
/// signing), then appends what signs them. What the service wants beyond SigV4 (S3's path and
/// payload rules) is its `AWSServiceRules`. One per route and loop: its scratch list is reused
/// request after request.
final class SigV4RequestSigner {
    let region: String
    /// The service's rules, decided once from its name.
    let rules: AWSServiceRules
    /// `credentials.refresh_margin`: a 403 to a HEAD sent with credentials this close to their expiry
    /// counts as the 401 (`AWSRefusal`).
    let refreshMargin: Double
    /// The fields of the request being written that are signed (`SigV4.signsField`), as they go.
    private var signed: [(name: String, value: String)] = []

    init(region: String, rules: AWSServiceRules, refreshMargin: Double = 0) {
        self.refreshMargin = refreshMargin
        self.region = region
        self.rules = rules
    }

    var service: String { rules.service }
    /// S3's rule for a body that streams (`AWSServiceRules.mayStreamUnsigned`), which decides
    /// whether a body is held before the head goes (`ExchangeMachine`).
    var mayStreamUnsigned: Bool { rules.mayStreamUnsigned }

    /// What the body is when the head is written (`Exchange.bodyToSign`).
    typealias Body = AWSServiceRules.Body

    /// Whether a request declares an `aws-chunked` body with a trailing checksum
    /// (`AWSServiceRules.declaresUnsignedTrailer`).
    static func declaresUnsignedTrailer(_ head: borrowing RequestHead) -> Bool {
        AWSServiceRules.declaresUnsignedTrailer(head.first("x-amz-content-sha256"))
    }

    /// What an upstream 403 to a request sent with `token` is (`AWSRefusal`).
    func verdict(on head: ResponseHead, isHEAD: Bool, token: TokenSnapshot) -> AWSRefusal.Verdict {
        let nearExpiry = token.expiresAt.map { $0 - Syscall.wallClock() <= refreshMargin } ?? false
        return AWSRefusal.atHead(status: head.status, errorType: head.fields.first("x-amzn-errortype"), isHEAD: isHEAD, nearExpiry: nearExpiry)
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

    /// The step for one request, or nil when its body streams and must be signed (413).
    func step(credentials: AWSSigningCredentials, body: Body) -> Step? {
        guard let payload = rules.payload(body) else { return nil }
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
        for (name, value) in credentials.sign(request, region: signer.region, service: signer.service, time: Syscall.wallClock()) {
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
