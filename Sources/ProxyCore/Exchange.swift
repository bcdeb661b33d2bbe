import Credentials
import HTTP1
import Sockets

/// One request and its answer: the bytes (the buffer for the upstream, the replay copy, the spool,
/// a held 401) and what the metrics and the access log report of it. Its state and decisions are
/// its `ExchangeMachine`, which lives in the connection's state (`ConnectionMachine.exchange`); no
/// method here sees it: each takes the facts it needs as values and answers what happened to the
/// bytes, and the connection tells the machine (`Connection.takeBody`, `UpstreamSide.pumpUpstream`).
/// Every field is set by the exchange's own methods. Owned by its `Connection`; its identity is what
/// stale timers and token callbacks are checked against. The upstream connection that carries it is
/// its connection's `UpstreamSide`'s. A held 401 is a `Held401`; its access-log line is made in
/// AccessLog.swift.
final class Exchange {
    let head: RequestHead
    let startedAt: Double
    /// The forward-proxy tunnel's host (or a CONNECT's target), for the access log.
    var tunnelHost: String?
    /// The route the request was matched to (nil: none, and the exchange is an error answer); kept
    /// until the exchange ends, also across a reload.
    let route: LoopRoute?
    /// The normalised path that goes upstream (empty until the checks pass; the access log then
    /// shows the target as it came).
    private(set) var path = ""
    private(set) var query: String?
    /// The authority the client addressed: the absolute-form target's, else its Host field.
    private(set) var forwardedHost: String?
    /// What the metrics and the access log report of it.
    var record = ExchangeRecord()
    /// The place the route's `budget` holds for it until it ends (RouteBudget.swift).
    var budgetHold: RouteBudget.Hold?
    /// The answer's scrubber on a route with `scrub` (`UpstreamSide+Scrub.swift`); nil elsewhere.
    var scrubber: ResponseScrubber?

    // For the metrics and the access log (docs/OBSERVABILITY.md).
    /// The route's `metricsSlot` (-1: no route), kept here so that counting does not load the route.
    let metricsSlot: Int

    // Request body
    private(set) var bodyBytesSeen = 0
    private var maxBodyBytes = 0
    private(set) var overBodyLimit = false

    // The copy kept for a retry after a 401 (nil: not replayable).
    private var replay: [UInt8]?
    private var replayLimit = 0
    private var replayReserved = 0
    private var shared: SharedProxyState?
    private var retryMemoryLimit = 0

    // Token
    private(set) var sentToken: TokenSnapshot?
    private(set) var held401: Held401?
    /// A wait for a token is under way; a timer or a refresh that ends it finds this false when it
    /// came too late (the other ended it, or the exchange is over).
    private(set) var waitingForToken = false
    private var tokenTimer: UInt64?

    /// Bytes for the upstream: the request head, then the body as framed upstream.
    /// Lent by the connection for the exchange's life (`Connection.open`, `Connection.finish`).
    let upOut: ByteBuffer
    private(set) var upOutStart = 0
    /// The body bytes a try puts after its head (`beginTry`); empty between tries.
    private var bodyAfterHead: [UInt8] = []
    /// Where the head ends in `upOut` (0 once it is sent and the buffer compacted).
    private var upHeadEnd = 0

    var pendingUpstreamCount: Int { upOut.count - upOutStart }
    /// So much of the body waits for the upstream that the client is not read; a body the request
    /// waits for (`forward.request_buffering`) is bounded by its limit instead.
    /// `waitingForBody`: the machine's `isWaitingForBody`.
    /// Bytes that wait for a spool to drain (`spoolTail`) stop it too.
    @inline(__always)
    func bodyBacklogged(waitingForBody: Bool) -> Bool {
        !waitingForBody && (bytesWaitingToGoUp >= Connection.bodyHighWater || !spoolTail.isEmpty)
    }
    /// The client's own credential (Authorization, or where `inject` puts the token) goes up instead
    /// of a token (`forward.client_authorization: keep`).
    private(set) var keepsClientAuthorization = false

    // A chunked body spooled to disk (`forward.request_buffering_disk`): while the request waits for
    // it, every body byte goes into the spool, and `upOut` is refilled from it as the upstream drains.
    // Once the body streams (over the spool's limit or `request_buffering_disk_total`), the file takes
    // no more: bytes wait in `spoolTail` until the spool is drained, then go as they come.
    private var spool: SpoolFile?
    /// Bytes of the spool counted against `request_buffering_disk_total` (in `shared`).
    private var spoolReserved = 0
    /// Body bytes that came after the spool stopped taking any, to go once it is drained (one read
    /// at most: the client is not read meanwhile, `bodyBacklogged`).
    private var spoolTail: [UInt8] = []
    /// Body bytes went into `upOut` past the spool (its tail, or as they came): a try can no longer
    /// start from the spool alone.
    private var spoolBypassed = false
    /// How much of the spool went into `upOut` on this try.
    private var spoolSent = 0
    /// How much of the spool has still to go into `upOut` (its size less `spoolSent`): a plain
    /// number, as every pass of the send loop reads it.
    private(set) var spoolWaiting = 0
    /// A request head is in `upOut`: body bytes from the spool may follow it.
    private var tryStarted = false
    /// The spool streams as chunks (it outgrew its limit) and the body has ended: the last chunk
    /// goes once the spool is drained.
    private var spoolLastChunkDue = false
    /// Why the body could not be spooled (the connection answers 503 and closes).
    private(set) var spoolFailure: String?
    /// Bytes of the body still to go up: queued in `upOut`, or in the spool and its tail.
    var bytesWaitingToGoUp: Int { pendingUpstreamCount + spoolWaiting + spoolTail.count }
    /// `refillFromSpool` has something to do.
    var spoolHasMore: Bool { spoolWaiting > 0 || spoolLastChunkDue || !spoolTail.isEmpty }

    @inline(__always)
    init(head: consuming RequestHead, route: LoopRoute?, startedAt: Double, upOut: ByteBuffer) {
        self.head = head
        self.upOut = upOut
        self.route = route
        metricsSlot = route?.metricsSlot ?? -1
        self.startedAt = startedAt
    }

    deinit {
        // The spool file's space is given back when its descriptor closes, with this exchange.
        if spoolReserved > 0 { shared?.releaseSpool(spoolReserved) }
        if budgetHold != nil { releaseBudget() }
    }

    /// The request passed its checks (`AccessPolicy`): where it goes, its body's bounds, whose
    /// Authorization goes up, and whether its body is kept for a retry.
    @inline(__always)
    func accept(_ target: AccessPolicy.CheckedTarget, route: LoopRoute, maxBodyBytes: Int, shared: SharedProxyState) {
        path = target.path
        // Each optional is unwrapped before it is stored: a `String?` copied whole goes through its
        // type's value witness, about 90 instructions (docs/ENGINE.md "Counting a request").
        if let query = target.query { self.query = query }
        if let authority = target.authority { forwardedHost = authority } else { forwardedHost = head.first("host") }
        self.maxBodyBytes = maxBodyBytes
        keepsClientAuthorization = route.forwarder.credential.keepsClientAuthorization(head, query: target.query)
        if let caller = target.caller { record.identified(caller: caller) }
        if route.requestBufferingDisk > 0 { self.shared = shared }
        prepareReplay(
            enabled: route.tokenCanChange && !keepsClientAuthorization, limit: route.retryBodyLimit, shared: shared,
            retryMemory: route.retryMemory)
    }

    /// Starts keeping the body for a retry when it may fit (`forward.retry_body_limit`), counted
    /// against `forward.retry_memory` in `shared` (kept only then: most requests have no body).
    private func prepareReplay(enabled: Bool, limit: Int, shared: SharedProxyState, retryMemory: Int) {
        guard enabled, head.framing != .none else { return }
        if case .contentLength(let n) = head.framing, n > limit { return }
        replayLimit = limit
        self.shared = shared
        retryMemoryLimit = retryMemory
        replay = []
    }

    /// A copy of the body is kept for a retry (`ExchangeMachine.onReplayKept`).
    var keepsReplay: Bool { replay != nil }

    // The request body's bytes, in the order `Connection.takeBody` uses them.

    /// Counts body bytes from the client; false when they are over `limits.max_body_bytes`
    /// (`overBodyLimit`).
    func countBody(_ n: Int) -> Bool {
        bodyBytesSeen += n
        if maxBodyBytes > 0 && bodyBytesSeen > maxBodyBytes {
            overBodyLimit = true
            return false
        }
        return true
    }

    /// Keeps body bytes for a retry while they fit (per request and in total); answers false when
    /// they do not and the copy goes (the body then streams without a retry).
    func keepForReplay(_ bytes: UnsafeRawBufferPointer) -> Bool {
        guard replay != nil else { return true }
        if replay!.count + bytes.count > replayLimit || !(shared?.reserveRetryMemory(bytes.count, limit: retryMemoryLimit) ?? false) {
            releaseReplay()
            return false
        }
        replayReserved += bytes.count
        replay!.append(contentsOf: bytes)
        return true
    }

    /// The body waited for is in a spool file (`forward.request_buffering_disk`).
    var spools: Bool { spool != nil }
    /// Bytes in the spool file.
    var spoolSize: Int { spool?.size ?? 0 }

    enum SpoolWrite {
        case spooled
        /// The spools hold all they may together (`request_buffering_disk_total`): the body streams.
        case full
        /// The file refused them (`spoolFailure`).
        case failed
    }

    /// Appends body bytes to the spool while the request waits for its body.
    func spoolMore(_ bytes: UnsafeRawBufferPointer) -> SpoolWrite {
        guard let spool, reserveSpool(bytes.count) else { return .full }
        do {
            try spool.append(bytes)
        } catch {
            spoolFailure = "the request body could not be spooled: \(error)"
            return .failed
        }
        spoolWaiting += bytes.count
        return .spooled
    }

    /// Body bytes that go after what the spool holds (it streams now, as chunks).
    func queueAfterSpool(_ bytes: UnsafeRawBufferPointer) {
        spoolTail.append(contentsOf: bytes)
    }

    /// Body bytes once the spool stopped waiting for the body: after its tail while it still has
    /// bytes to give (true), else from now on as they come (false: the caller queues them).
    func queueBehindSpool(_ bytes: UnsafeRawBufferPointer) -> Bool {
        if spoolWaiting > 0 || !spoolTail.isEmpty {
            spoolTail.append(contentsOf: bytes)
            return true
        }
        spoolBypassed = true
        return false
    }

    /// Body bytes of a request that waits for its body: no try has started, `upOut` holds only the
    /// body, as it came. Answers how much is held.
    func holdWaitedBody(_ bytes: UnsafeRawBufferPointer) -> Int {
        upOut.append(bytes)
        return upOut.count
    }

    /// The body waited for was too long to wait for: what came goes up as one chunk, the rest streams.
    func chunkWaitedBody() {
        let waited = upOut.bytes
        upOut.removeAll()
        waited.withUnsafeBytes { ResponseWriter.appendChunk(upOut, $0) }
    }

    /// Body bytes queued for the upstream in its framing.
    func queueBody(_ bytes: UnsafeRawBufferPointer) {
        compactUpOut()
        if case .chunked = head.framing {
            ResponseWriter.appendChunk(upOut, bytes)
        } else {
            upOut.append(bytes)
        }
    }

    /// The body went into the spool and is not bypassing it: its end is the spool's business.
    var bodyEndsInSpool: Bool { spool != nil && !spoolBypassed }

    /// The client's chunked body that streams is complete: its last chunk (trailers are not forwarded).
    func streamedBodyEnded() {
        guard case .chunked = head.framing else { return }
        ResponseWriter.appendLastChunk(upOut)
    }

    /// A spooled body that streams as chunks is complete: the last chunk goes once the spool is drained.
    func spooledBodyEnded() {
        spoolLastChunkDue = true
    }

    /// Moves the body waited for in memory into a new spool file; false when none can be made
    /// (then the body streams as it would without `request_buffering_disk`).
    func startSpool() -> Bool {
        guard let folder = route?.spoolFolder, reserveSpool(upOut.count) else { return false }
        do {
            let file = try SpoolFile(folder: folder)
            try upOut.bytes.withUnsafeBytes { try file.append($0) }
            spool = file
            spoolWaiting = file.size
            upOut.removeAll()
            return true
        } catch {
            return false
        }
    }

    /// Counts `n` more spooled bytes against `forward.request_buffering_disk_total`; false when all
    /// spools together would hold more.
    private func reserveSpool(_ n: Int) -> Bool {
        guard let shared, let route, shared.reserveSpool(n, limit: route.spoolTotal) else { return false }
        spoolReserved += n
        return true
    }

    /// Puts the next part of the spool into `upOut` while little is queued there: as it is for a
    /// body that goes whole (`whole`: Content-Length), as a chunk for one that outgrew the spool's
    /// limit. False when the spool could not be read: nothing more can go up.
    func refillFromSpool(whole: Bool) -> Bool {
        guard let spool, tryStarted else { return true }
        while pendingUpstreamCount < Connection.bodyHighWater && spoolSent < spool.size {
            let piece: [UInt8]
            do {
                piece = try spool.read(at: spoolSent, count: 64 * 1024)
            } catch {
                // Nothing more can go up; the upstream answers what it has, or its timeout ends the exchange.
                spoolFailure = "the spooled request body could not be read: \(error)"
                return false
            }
            if piece.isEmpty { break }
            spoolSent += piece.count
            spoolWaiting -= piece.count
            compactUpOut()
            if whole {
                upOut.append(piece)
            } else {
                piece.withUnsafeBytes { ResponseWriter.appendChunk(upOut, $0) }
            }
        }
        guard spoolSent == spool.size else { return true }
        if !spoolTail.isEmpty && pendingUpstreamCount < Connection.bodyHighWater {
            compactUpOut()
            spoolTail.withUnsafeBytes { ResponseWriter.appendChunk(upOut, $0) }
            spoolTail = []
            spoolBypassed = true
        }
        if spoolLastChunkDue && spoolTail.isEmpty {
            spoolLastChunkDue = false
            ResponseWriter.appendLastChunk(upOut)
        }
        return true
    }

    /// The body will not go up after all: what is queued of it goes.
    func dropQueuedBody() {
        if upOutStart <= upHeadEnd {
            upOut.truncate(to: upHeadEnd)
        } else {
            upOut.removeAll()
            upOutStart = 0
            upHeadEnd = 0
        }
    }

    /// The replay copy goes (its memory returns to `forward.retry_memory`); the caller tells the
    /// machine when the exchange goes on.
    func releaseReplay() {
        if replayReserved > 0 { shared?.releaseRetryMemory(replayReserved) }
        replayReserved = 0
        replay = nil
    }

    /// Starts a try: empties `upOut` for a new request head, keeping aside the body bytes that go
    /// after it. Body bytes already sent on an earlier try come again from the replay copy; bytes
    /// never sent stay. Answers the length of a chunked body that goes whole, with Content-Length
    /// (CONTRACT point 8); nil when it streams. The caller writes the head, then calls `headWritten`.
    /// `wholeBody`, `bodyDone`, `bodyOnWire`: the machine's `bodyBuffering == .whole`,
    /// `requestBodyDone`, `bodyOnWire`.
    func beginTry(wholeBody: Bool, bodyDone: Bool, bodyOnWire: Bool) -> Int? {
        var wholeLength: Int?
        bodyAfterHead = []
        if let spool, !spoolBypassed {
            // Every try sends the body from the spool's start (`refillFromSpool`).
            spoolSent = 0
            spoolWaiting = spool.size
            if wholeBody {
                wholeLength = spool.size
            } else if bodyDone {
                spoolLastChunkDue = true
            }
            upOut.removeAll()
            upOutStart = 0
            return wholeLength
        }
        if bodyOnWire, let replay {
            if case .chunked = head.framing, !bodyDone {
                let chunk = ByteBuffer()
                replay.withUnsafeBytes { ResponseWriter.appendChunk(chunk, $0) }
                bodyAfterHead = chunk.bytes
            } else {
                bodyAfterHead = replay
                if case .chunked = head.framing { wholeLength = replay.count }
            }
        } else if upOutStart <= upHeadEnd && upHeadEnd < upOut.count {
            bodyAfterHead = upOut.copyBytes(from: upHeadEnd)
        }
        if wholeBody && wholeLength == nil { wholeLength = bodyAfterHead.count }
        upOut.removeAll()
        upOutStart = 0
        return wholeLength
    }

    /// The body as a SigV4 signature sees it after `beginTry` (`SigV4RequestSigner`): all of it when
    /// it was read whole first (then `bodyAfterHead` holds it, from `upOut` or the replay copy).
    /// `wholeBody`: the machine's `bodyBuffering == .whole`.
    func bodyToSign(wholeBody: Bool) -> SigV4RequestSigner.Body {
        if case .none = head.framing { return .none }
        if wholeBody && spool == nil { return .whole(bodyAfterHead) }
        return SigV4RequestSigner.declaresUnsignedTrailer(head) ? .unsignedTrailer : .streaming
    }

    /// The head for the try with `token` is in `upOut`: the kept body follows it (the caller tells
    /// the machine, `onTryStarted`).
    func headWritten(token: TokenSnapshot?) {
        upHeadEnd = upOut.count
        tryStarted = true
        if !bodyAfterHead.isEmpty {
            upOut.append(bodyAfterHead)
            bodyAfterHead = []
        }
        sentToken = token
        held401 = nil
    }

    /// Sent bytes leave the buffer once it is empty or mostly sent, so it stays bounded by the
    /// high-water mark the connection keeps.
    private func compactUpOut() {
        if upOutStart == upOut.count && upOutStart > 0 {
            upOut.removeAll(keepingCapacity: upOut.capacity <= 4 * Connection.bodyHighWater)
            upOutStart = 0
            upHeadEnd = 0
        } else if upOutStart >= 64 * 1024 && upOutStart * 2 >= upOut.count {
            upOut.removeFirst(upOutStart)
            upHeadEnd = max(0, upHeadEnd - upOutStart)
            upOutStart = 0
        }
    }

    /// Notes `n` bytes sent from the front of `upOut`; answers whether the body's bytes have begun
    /// to go (the machine's `onSent(reachedBody:)`).
    @inline(__always)
    func sent(_ n: Int) -> Bool {
        upOutStart += n
        let reachedBody = upOutStart > upHeadEnd
        compactUpOut()
        return reachedBody
    }

    // MARK: the exchange's end

    /// The exchange is over for its connection: late timers and tokens find nothing.
    func detach() {
        waitingForToken = false
        // Only a request a route's `budget` admitted holds a place (RouteBudget.swift).
        if budgetHold != nil { releaseBudget() }
    }

    // MARK: tokens and the held 401

    func waitForToken(timer: UInt64, now: Double) {
        waitingForToken = true
        record.tokenWaitStarted(now: now)
        tokenTimer = timer
    }

    /// The wait ends (the timer or the refresh, whichever comes first); false when it had ended
    /// already. Answers the timer to cancel.
    func endTokenWait() -> (ended: Bool, timer: UInt64?) {
        guard waitingForToken else { return (false, nil) }
        waitingForToken = false
        return (true, tokenTimer)
    }

    func hold401(_ head: ResponseHead, _ framing: ResponseBodyFraming, dpopNonceDemanded: Bool) {
        let held = Held401(head: head, framing: framing)
        held.dpopNonceDemanded = dpopNonceDemanded
        held401 = held
    }

    func holdMore(_ bytes: UnsafeRawBufferPointer) {
        held401?.body.append(contentsOf: bytes)
    }

    /// The held 401 goes (to the client, or away): answers it.
    @discardableResult
    func takeHeld401() -> Held401? {
        let held = held401
        held401 = nil
        return held
    }
}
