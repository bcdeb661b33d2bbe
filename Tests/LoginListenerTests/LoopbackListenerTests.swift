import Config
import Dispatch
import Foundation
import Synchronization
import TestSupport
import Testing

@testable import Credentials
@testable import LoginListener

/// The loopback listener on real sockets: requests that do not end the login are answered and the
/// wait goes on; the one with this login's state ends it, its connection kept for the final page.
@Suite struct LoopbackListenerTests {
    let rules = CallbackRules(path: "/callback", state: "good-state")

    @Test func otherRequestsAreAnsweredAndTheRightOneEndsTheWaitWithItsConnection() throws {
        let listener = try LoopbackListener.bind(LoopbackRedirect.parse("http://127.0.0.1/callback"))
        defer { listener.close() }
        let port = try #require(Int(listener.redirectURI.split(separator: ":").last?.prefix { $0.isNumber } ?? ""))
        #expect(listener.redirectURI == "http://127.0.0.1:\(port)/callback")
        // The browser's side, on another thread: the wait runs on this one.
        let answers = Mutex<[String]>([])
        let done = DispatchSemaphore(value: 0)
        DispatchQueue.global().async {
            defer { done.signal() }
            for target in ["/elsewhere", "/callback?code=c0&state=wrong-state"] {
                guard let client = try? RawHTTPClient(port: port), (try? client.send("GET \(target) HTTP/1.1\r\nHost: x\r\n\r\n")) != nil,
                    let response = try? client.readResponse()
                else { return }
                answers.withLock { $0.append("\(response.status)") }
            }
            guard let client = try? RawHTTPClient(port: port),
                (try? client.send("GET /callback?code=c1&state=good-state HTTP/1.1\r\nHost: x\r\n\r\n")) != nil,
                let page = try? client.readUntilClose()
            else { return }
            answers.withLock { $0.append(String(decoding: page, as: UTF8.self)) }
        }
        let outcome = try listener.wait(rules: rules, timeout: 10, pasteFD: nil, say: { _ in })
        guard case .code(let code, let reply) = outcome else {
            Issue.record("the wait ended with \(outcome), not a code")
            return
        }
        #expect(code == "c1")
        reply?.send(status: 200, reason: "OK", title: "Signed in", message: "done")
        #expect(done.wait(timeout: .now() + 10) == .success)
        let seen = answers.withLock { $0 }
        #expect(seen.count == 3)
        #expect(Array(seen.prefix(2)) == ["404", "400"])
        #expect(seen.last?.hasPrefix("HTTP/1.1 200 OK\r\n") == true && seen.last?.contains("<h1>Signed in</h1>") == true)
    }

    @Test func aWaitWithNoRequestEndsAtItsTimeout() throws {
        let listener = try LoopbackListener.bind(LoopbackRedirect.parse("http://127.0.0.1/callback"))
        let started = Date()
        guard case .timedOut = try listener.wait(rules: rules, timeout: 0.2, pasteFD: nil, say: { _ in }) else {
            Issue.record("a wait without requests did not time out")
            return
        }
        #expect(Date().timeIntervalSince(started) < 5)
    }

    @Test func aTakenPortIsAnErrorNamingTheAddress() throws {
        let first = try LoopbackListener.bind(LoopbackRedirect.parse("http://127.0.0.1/callback"))
        defer { first.close() }
        let taken = try LoopbackRedirect.parse(first.redirectURI)
        #expect {
            try LoopbackListener.bind(taken)
        } throws: { error in
            guard case TokenSourceError.refused(let why) = error else { return false }
            return why.contains("cannot listen on 127.0.0.1:\(taken.port ?? 0)")
        }
    }
}
