import Sockets

/// Runs `POST /reload`'s reloads one at a time on one thread of its own, started with the first
/// (issue 29: a thread per call made 98 threads for 100 calls). A reload reads the file when it
/// starts, so calls that arrive while one waits to start share its outcome: any number of calls
/// cost at most the one running and one more.
final class ReloadWorker: @unchecked Sendable {
    private let reload: @Sendable () -> ReloadOutcome
    private let condition = OSCondition()
    // Guarded by `condition`.
    private var waiting: [@Sendable (ReloadOutcome) -> Void] = []
    private var started = false

    init(_ reload: @escaping @Sendable () -> ReloadOutcome) {
        self.reload = reload
    }

    /// Asks for a reload; `completion` gets its outcome on the worker's thread. False when the
    /// worker's thread could not be started.
    func submit(_ completion: @escaping @Sendable (ReloadOutcome) -> Void) -> Bool {
        condition.lock()
        defer { condition.unlock() }
        if !started {
            do {
                try OSThread.start(name: "tp-reload") { [self] in run() }
            } catch {
                return false
            }
            started = true
        }
        waiting.append(completion)
        condition.broadcast()
        return true
    }

    private func run() {
        while true {
            condition.lock()
            while waiting.isEmpty { condition.wait() }
            let batch = waiting
            waiting = []
            condition.unlock()
            let outcome = reload()
            for completion in batch { completion(outcome) }
        }
    }
}
