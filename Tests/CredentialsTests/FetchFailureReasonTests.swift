import Foundation
import IdentityHTTP
import TestSupport
import Testing

@testable import Credentials

#if canImport(Glibc)
    import Glibc
#endif

/// `tokenproxy_token_fetch_failures_total{reason}`: each failure gets its reason from the error's case
/// and cause, carried from the transport (`HTTPCallError.Kind`) or the answer's status; never from
/// the words of its message.
@Suite struct FetchFailureReasonTests {
    @Test func eachCaseAndCauseHasItsReason() {
        let cases: [(TokenSourceError, FetchFailureReason)] = [
            (.passing("HTTP 503", cause: .unavailable), .http5xx),
            (.passing("HTTP 429", cause: .rateLimited), .http429),
            (.passing("no answer in time", cause: .timedOut), .timeout),
            (.passing("connection refused", cause: .unreachable), .network),
            (.passing("the token endpoint's answer to the refresh has no access_token"), .badAnswer),
            (.refused("the token endpoint answered the refresh with invalid_grant"), .refused),
            (.loginRequired("no session"), .refused),
            (.configuration("the identity provider blames the client for the refresh (invalid_client); check credentials"), .clientMisconfigured),
        ]
        for (error, reason) in cases {
            #expect(FetchFailureReason.of(error) == reason, "\(error)")
        }
    }

    @Test func theWordsOfAMessageDecideNothing() {
        // Text that the reasons were once read from: without a cause it is an unusable answer.
        for text in [
            "cannot reach the token endpoint: Timeout was reached", "the identity provider is unavailable (HTTP 503)",
            "HTTP 429 TooManyRequestsException", "Could not resolve host",
        ] {
            #expect(FetchFailureReason.of(.passing(text)) == .badAnswer, "\(text)")
        }
    }

    @Test(arguments: [
        (429, PassingCause.rateLimited), (500, .unavailable), (503, .unavailable), (599, .unavailable), (200, .badAnswer),
        (400, .badAnswer), (600, .badAnswer),
    ])
    func anAnswersStatusGivesItsCause(status: Int, cause: PassingCause) {
        #expect(PassingCause.of(status: status) == cause)
    }

    @Test func aCallToAPortNobodyListensOnIsANetworkFailure() throws {
        let port = try freePort()
        let error = try #require(callError(HTTPCallRequest(url: "http://127.0.0.1:\(port)/token", timeout: 5)))
        #expect(error.kind == .unreachable)
        #expect(FetchFailureReason.of(.cannotReach("the token endpoint", error)) == .network)
    }

    @Test func aCallThatGetsNoAnswerInTimeIsATimeout() throws {
        // A listening socket that never accepts: the connection is made (the backlog), no answer comes.
        let (fd, port) = try silentListener()
        defer { close(fd) }
        let error = try #require(callError(HTTPCallRequest(url: "http://127.0.0.1:\(port)/token", timeout: 1)))
        #expect(error.kind == .timedOut)
        #expect(FetchFailureReason.of(.cannotReach("the token endpoint", error)) == .timeout)
    }

    @Test func aFailureIsCountedByReasonAndEveryCallInTheDurationHistogram() {
        var stats = TokenStats()
        stats.record(.failure, reason: .timeout, seconds: 2, at: 100)
        stats.record(.success, reason: nil, seconds: 0.05, at: 110)
        #expect(stats.failures(.timeout) == 1)
        #expect(stats.failures(.network) == 0)
        #expect(stats.refreshDuration.count == 2)
        #expect(stats.lastSuccessAt == 110)
        #expect(stats.count(of: .failure) == 1)
    }

    private func callError(_ request: HTTPCallRequest) -> HTTPCallError? {
        do {
            let response = try BlockingHTTPClient.perform(request)
            Issue.record("expected a failure, got HTTP \(response.status)")
        } catch let error as HTTPCallError {
            return error
        } catch {
            Issue.record("expected an HTTPCallError, got \(type(of: error))")
        }
        return nil
    }

    /// A socket on 127.0.0.1 that listens and never accepts, and its port.
    private func silentListener() throws -> (Int32, Int) {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw HarnessError("socket: errno \(errno)") }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let ready = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, length) == 0 && listen(fd, 4) == 0 && getsockname(fd, $0, &length) == 0
            }
        }
        guard ready else {
            close(fd)
            throw HarnessError("listen: errno \(errno)")
        }
        return (fd, Int(UInt16(bigEndian: address.sin_port)))
    }
}
