import HTTP1
import Upstream

/// An upstream 401 held back while a refresh and one retry are tried (CONTRACT point 3). If the
/// retry cannot happen, it goes to the client as it came.
final class Held401 {
    static let maxBody = 64 * 1024
    let head: ResponseHead
    var body: [UInt8] = []
    init(head: ResponseHead) {
        self.head = head
    }
}

/// One request and its answer. Owned by its `Connection`; it is also the upstream transfer's
/// delegate and forwards those callbacks to the connection while it is attached.
final class Exchange: UpstreamDelegate {
    enum ResponseFraming { case none, length(Int), chunked, close }

    let head: RequestHead
    let startedAt: Double
    /// Strong (a weak reference costs a side table and slow reference counting on every request):
    /// `Connection.finish` and `Connection.close` clear it, which ends the cycle.
    var connection: Connection?
    var url = ""
    var logPath = ""
    var keepAlive: Bool
    var status = 0
    var framing: ResponseFraming = .none
    var bytesOut = 0
    var recorded = false

    // Request body
    var requestBodyDone: Bool
    var bodyBytesSeen = 0
    var maxBodyBytes = 0
    private(set) var overBodyLimit = false
    private var pendingBody: [UInt8] = []
    private var pendingStart = 0
    var pendingBodyCount: Int { pendingBody.count - pendingStart }

    // The copy kept for a retry after a 401 (nil: not replayable).
    var replay: [UInt8]?
    private var replayLimit = 0
    private var replayReserved = 0
    private var shared: SharedProxyState?
    private var retryMemoryLimit = 0
    var readingReplay = false
    var replayOffset = 0
    var replayComplete: Bool { replay != nil && requestBodyDone }

    // Upstream and token
    var transfer: UpstreamTransfer?
    var upstreamStartedAt = 0.0
    var lastUpstreamByte = 0.0
    var sentGeneration: UInt64?
    var injectedToken = false
    var retried = false
    var held401: Held401?
    var waitingForToken = false
    var tokenTimer: UInt64?
    var continueSent = false
    var responseStarted = false
    var responseDone = false

    init(head: RequestHead, startedAt: Double, draining: Bool) {
        self.head = head
        self.startedAt = startedAt
        keepAlive = head.keepAlive && !draining
        requestBodyDone = head.framing == .none
    }

    func configureLimits(maxBodyBytes: Int, shared: SharedProxyState, retryMemory: Int) {
        self.maxBodyBytes = maxBodyBytes
        self.shared = shared
        self.retryMemoryLimit = retryMemory
    }

    /// Starts keeping the body for a retry when it may fit (`forward.retry_body_limit`).
    func prepareReplay(enabled: Bool, limit: Int) {
        guard enabled else { return }
        if case .contentLength(let n) = head.framing, n > limit { return }
        replayLimit = limit
        replay = []
    }

    func takeBody(_ bytes: UnsafeRawBufferPointer) {
        bodyBytesSeen += bytes.count
        if maxBodyBytes > 0 && bodyBytesSeen > maxBodyBytes {
            overBodyLimit = true
            return
        }
        if !readingReplay {
            if pendingStart > 0 && pendingStart == pendingBody.count {
                pendingBody.removeAll(keepingCapacity: true)
                pendingStart = 0
            }
            pendingBody.append(contentsOf: bytes)
        }
        if replay != nil {
            if replay!.count + bytes.count > replayLimit || !(shared?.reserveRetryMemory(bytes.count, limit: retryMemoryLimit) ?? false) {
                // Too big to keep (per request or in total): this body streams without a retry.
                releaseReplay()
            } else {
                replayReserved += bytes.count
                replay!.append(contentsOf: bytes)
            }
        }
    }

    func releaseReplay() {
        if replayReserved > 0 { shared?.releaseRetryMemory(replayReserved) }
        replayReserved = 0
        if !readingReplay { replay = nil }
    }

    // MARK: UpstreamDelegate

    func upstreamDidReceiveHead(_ head: ResponseHead) {
        connection?.upstreamHead(self, head)
    }

    func upstreamDidReceiveBody(_ bytes: UnsafeRawBufferPointer) -> Bool {
        guard let connection else { return true }
        return connection.upstreamBody(self, bytes)
    }

    func upstreamCallbacksEnded() {
        connection?.upstreamCallbacksEnded()
    }

    func upstreamReadBody(into buffer: UnsafeMutableRawBufferPointer) -> UpstreamBodyRead {
        if readingReplay, let replay {
            let n = min(buffer.count, replay.count - replayOffset)
            if n == 0 { return .end }
            replay.withUnsafeBytes { raw in
                buffer.copyMemory(from: UnsafeRawBufferPointer(rebasing: raw[replayOffset..<(replayOffset + n)]))
            }
            replayOffset += n
            return .bytes(n)
        }
        let available = pendingBodyCount
        if available == 0 { return requestBodyDone ? .end : .pause }
        let n = min(buffer.count, available)
        pendingBody.withUnsafeBytes { raw in
            buffer.copyMemory(from: UnsafeRawBufferPointer(rebasing: raw[pendingStart..<(pendingStart + n)]))
        }
        pendingStart += n
        if pendingBodyCount + n >= Connection.bodyHighWater && pendingBodyCount < Connection.bodyHighWater {
            connection?.bodyDrained()
        }
        return .bytes(n)
    }

    func upstreamDidComplete(_ failure: UpstreamFailure?) {
        connection?.upstreamComplete(self, failure)
    }
}
