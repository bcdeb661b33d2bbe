import Credentials
import Foundation

/// The harness's token source, behind a real `TokenManager` (its thread, its single flight, its
/// generations): hands out `tokens` in order (the last one again once they run out), counts the
/// calls, and can hold the next call until the test lets it go.
final class ScriptedTokenSource: TokenSource, @unchecked Sendable {
    // @unchecked: every mutable field is read and written with `condition` held.
    let kind = "exec"
    let defaultLifetime: Double? = nil
    private let tokens: [String]
    private let condition = NSCondition()
    private var calls = 0
    private var holding = false
    private var waiting = 0

    init(tokens: [String] = ["token-1"]) {
        precondition(!tokens.isEmpty)
        self.tokens = tokens
    }

    /// Calls to `fetch` so far (the first acquisition and every refresh), finished or held.
    var fetches: Int {
        condition.lock()
        defer { condition.unlock() }
        return calls
    }

    /// The next call waits in `fetch` (on the token thread) until `releaseHeldFetch()`.
    func holdNextFetch() {
        condition.lock()
        holding = true
        condition.unlock()
    }

    /// Waits until a call is held, then lets it complete.
    func releaseHeldFetch() async throws { try await onOwnThread { try self.blockingReleaseHeldFetch() } }

    private func blockingReleaseHeldFetch() throws {
        condition.lock()
        defer { condition.unlock() }
        let deadline = Date().addingTimeInterval(Double(SocketEnd.patience))
        while waiting == 0 {
            guard condition.wait(until: deadline) else { throw SocketEndError(description: "no token fetch was held") }
        }
        holding = false
        condition.broadcast()
    }

    /// Lets any held call complete and holds no more (the harness's stop: the token thread must end).
    func holdNothing() {
        condition.lock()
        holding = false
        condition.broadcast()
        condition.unlock()
    }

    func fetch(current: TokenSnapshot?) throws -> IssuedToken {
        condition.lock()
        defer { condition.unlock() }
        let token = tokens[min(calls, tokens.count - 1)]
        calls += 1
        if holding {
            waiting += 1
            condition.broadcast()
            while holding { condition.wait() }
            waiting -= 1
        }
        return IssuedToken(accessToken: token)
    }
}
