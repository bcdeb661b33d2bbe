import HTTP1

/// An upstream 401 held back while a refresh and one retry are tried (CONTRACT point 3). If the
/// retry cannot happen, it goes to the client as it came.
final class Held401 {
    let head: ResponseHead
    let framing: ResponseBodyFraming
    var body: [UInt8] = []
    /// The 401 demands a DPoP nonce (RFC 9449 §9): the retry keeps the token.
    var dpopNonceDemanded = false
    /// An AWS 403 held until its body says whether the credentials expired (`AWSRefusal.readBody`):
    /// retried only if it does, else passed on as it came, not counted as a 401.
    var expiryInBody = false
    init(head: ResponseHead, framing: ResponseBodyFraming) {
        self.head = head
        self.framing = framing
    }
}
