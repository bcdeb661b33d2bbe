import Sockets

/// Runs `body`, which blocks (a read with a timeout, a wait on a semaphore or on the loop's
/// thread), on a thread of its own, and suspends the calling task until it returns what it returns.
///
/// Why: Swift Testing runs every test on Swift concurrency's pool, whose threads are as many as the
/// cores. A test that blocks one of them takes it from every other test of the process, and from the
/// time limits' own timers; on a 2-core box running the whole suite in parallel, a few blocked tests
/// starve the rest (Tests/README.md, "The engine harness"). Every wait of the harness goes through
/// here, so a test only ever suspends.
func onOwnThread<T>(_ body: @escaping () throws -> T) async throws -> T {
    let handOver = HandOver(body)
    try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
        do {
            try OSThread.start(name: "tp-test-wait") {
                handOver.run()
                continuation.resume()
            }
        } catch {
            continuation.resume(throwing: error)
        }
    }
    return try handOver.result!.get()
}

/// A blocking call and its result, handed to the waiting thread and back. @unchecked Sendable: the
/// calling task is suspended while the thread runs `body`, and reads `result` only after it resumed.
private final class HandOver<T>: @unchecked Sendable {
    private let body: () throws -> T
    private(set) var result: Result<T, any Error>?

    init(_ body: @escaping () throws -> T) { self.body = body }

    func run() { result = Result { try body() } }
}
