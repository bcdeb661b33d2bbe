import HTTP1

/// The decisions of one exchange that do not depend on sockets, as pure functions of what has
/// happened so far (docs/ENGINE.md). `ExchangeMachine` applies them; the unit tests in
/// `ProxyCoreTests` pin them down.
enum ExchangeRules {
    /// How the answer is framed for the client.
    enum ClientFraming: Equatable {
        case none
        case length(Int)
        case chunked
        /// Close-delimited: the connection ends with the body.
        case close
    }

    /// RFC 9112 §6.3: a response to HEAD, any 1xx, 204 and 304 have no body whatever their fields
    /// say; a known length is kept; a chunked or close-delimited body is chunked to an HTTP/1.1
    /// client and close-delimited to an HTTP/1.0 one (which cannot read chunked, RFC 9112 §7).
    static func clientFraming(
        isHEAD: Bool, clientVersion: HTTPVersion, status: Int, upstream: ResponseBodyFraming
    ) -> ClientFraming {
        if isHEAD || status == 204 || status == 304 || status < 200 { return .none }
        switch upstream {
        case .none: return .length(0)
        case .contentLength(let n): return .length(n)
        case .chunked, .untilClose: return clientVersion == .http1_1 ? .chunked : .close
        }
    }

    /// CONTRACT point 8, `forward.request_buffering`: a chunked body is waited for (to go up with
    /// Content-Length, which WSGI servers need) unless the request asks for an upgrade (its body is
    /// the new protocol's). A client that waits for `100 Continue` is answered by the proxy
    /// (``answersContinue(expectsContinue:buffersBody:)``).
    static func buffersChunkedBody(chunked: Bool, wantsUpgrade: Bool, limit: Int) -> Bool {
        chunked && limit > 0 && !wantsUpgrade
    }

    /// CONTRACT `forward.request_buffering`: the proxy answers `100 Continue` itself to a chunked body
    /// it buffers, as nginx does (RFC 9110 §10.1.1 lets a proxy that knows its next server's limits):
    /// the body goes up with Content-Length, so the Expect field does not go. (A chunked body comes
    /// from an HTTP/1.1 client only: RFC 9112 §6.1, `HeadParsing`.)
    static func answersContinue(expectsContinue: Bool, buffersBody: Bool) -> Bool {
        expectsContinue && buffersBody
    }

    /// CONTRACT.md "AWS credentials and SigV4 signing": a body whose SHA-256 is signed is read whole
    /// before the head goes, when it may fit `limit` (`forward.retry_body_limit`); a Content-Length
    /// over it is known too large at once. The proxy does not answer `100 Continue` to it (CONTRACT
    /// point 8): a client that waits for it (RFC 9110 §10.1.1) sends its body to a service that may
    /// take `UNSIGNED-PAYLOAD` (`s3`) streamed, its Expect going upstream, and to any other after its
    /// own wait. An upgrade's body is the new protocol's. `streamsAsFramed`: an `s3` body in
    /// `aws-chunked` framing with a trailing checksum, signed as such (`declaresUnsignedTrailer`).
    static func holdsBodyToSign(
        framing: BodyFraming, wantsUpgrade: Bool, expectsContinue: Bool, mayStreamUnsigned: Bool, streamsAsFramed: Bool = false, limit: Int
    ) -> Bool {
        guard !wantsUpgrade, !(expectsContinue && mayStreamUnsigned), !streamsAsFramed else { return false }
        switch framing {
        case .none: return false
        case .contentLength(let n): return n <= limit
        case .chunked: return true
        }
    }

    /// RFC 9110 §9.2.2.
    static func isIdempotent(_ method: String) -> Bool {
        switch method {
        case "GET", "HEAD", "OPTIONS", "TRACE", "PUT", "DELETE": return true
        default: return false
        }
    }

    /// How much of the request's body went up, and whether it is kept: what decides whether the
    /// request can go again, after a 401 or on a fresh connection.
    struct SentBody {
        /// Some of the body went up (on this try or an earlier one).
        var onWire: Bool
        /// The whole body is kept in the replay buffer.
        var replayComplete: Bool
        /// None of it went up (no body, or a 401 before `100 Continue`), or all of it is kept.
        var canGoAgain: Bool { !onWire || replayComplete }
    }

    /// What is known of one try when its upstream connection closed before any byte of an answer.
    struct FailedTry {
        /// RFC 9110 §9.2.2 (``isIdempotent(_:)``).
        var isIdempotent: Bool
        /// The connection had carried an exchange before (the upstream may have closed it as idle).
        var connectionWasReused: Bool
        var alreadyRetriedOnFreshConnection: Bool
        var anyByteWritten: Bool
        var body: SentBody
    }

    /// RFC 9112 §9.3.1 and RFC 9110 §9.2.2: a request whose reused connection closed before any
    /// answer is sent once more on a fresh connection when it is idempotent or none of it was
    /// written, and its body is at hand (never sent, or kept whole).
    static func retriesOnFreshConnection(_ t: FailedTry) -> Bool {
        guard t.connectionWasReused, !t.alreadyRetriedOnFreshConnection else { return false }
        guard t.isIdempotent || !t.anyByteWritten else { return false }
        return t.body.canGoAgain
    }

    /// CONTRACT.md "Where the credential goes": the answers that say the token was refused and ask
    /// for the one refresh and retry. A 401 (RFC 9110 §15.5.2) whatever the placement; with the token
    /// in the query also a 403, which is how APIs that take a key there answer a bad or expired one.
    static func refusesToken(status: Int, tokenInQuery: Bool) -> Bool {
        status == 401 || (status == 403 && tokenInQuery)
    }

    /// What is known when an upstream 401 arrives.
    struct Unauthorized {
        /// The proxy put the token in (not `client_authorization: keep` with the client's own).
        var tokenInjected: Bool
        /// This try already follows a refresh.
        var alreadyRetried: Bool
        /// The source can give another token (a static one cannot).
        var tokenCanChange: Bool
        /// A fresh token was refused within the last 30 s (CONTRACT point 3).
        var refusingGoodTokens: Bool
        var body: SentBody
    }

    enum UnauthorizedAction: Equatable {
        /// Hold the answer, refresh, and send the request again.
        case holdAndRetry
        /// Pass it on; a second 401 after a refresh also starts the 30 s storm guard.
        case passOn(startStormGuard: Bool)
    }

    /// CONTRACT point 3: one refresh and exactly one retry, when the request can be sent again
    /// (no body, none of it sent yet — e.g. a 401 before `100 Continue` — or all of it kept).
    static func onUnauthorized(_ u: Unauthorized) -> UnauthorizedAction {
        guard u.tokenInjected else { return .passOn(startStormGuard: false) }
        if u.alreadyRetried { return .passOn(startStormGuard: true) }
        guard u.tokenCanChange, !u.refusingGoodTokens else { return .passOn(startStormGuard: false) }
        guard u.body.canGoAgain else { return .passOn(startStormGuard: false) }
        return .holdAndRetry
    }

    /// What is known when an answer has been read to its end.
    struct Ended {
        /// Bytes followed the answer in the same read (the upstream talks out of turn).
        var trailingBytes: Bool
        /// `Connection: close`, HTTP/1.0 without keep-alive, close-delimited, or suspect framing.
        var parserSaysClose: Bool
        /// This try stopped sending (a final answer came before the body was wanted, or a write failed).
        var sendStopped: Bool
        var requestBodyDone: Bool
        var bytesWaitingToGoUp: Int
    }

    /// RFC 9112 §9.3: the connection is reused only when both messages ended cleanly on it.
    static func connectionReusable(_ e: Ended) -> Bool {
        !e.trailingBytes && !e.parserSaysClose && !e.sendStopped && e.requestBodyDone && e.bytesWaitingToGoUp == 0
    }
}
