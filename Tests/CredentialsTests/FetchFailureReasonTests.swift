import Testing

@testable import Credentials

/// `tokenproxy_token_fetch_failures_total{reason}`: each failure the providers report, by reason.
@Suite struct FetchFailureReasonTests {
    @Test func theProvidersFailuresGetTheirReasons() {
        let cases: [(TokenSourceError, FetchFailureReason)] = [
            (.passing("the identity provider is unavailable for the refresh (HTTP 503)"), .http5xx),
            (.passing("the identity provider is unavailable for the refresh (HTTP 429)"), .http429),
            (.passing("cannot reach the token endpoint for the refresh: Timeout was reached"), .timeout),
            (.passing("cannot reach the token endpoint for the refresh: Operation timed out after 30001 milliseconds"), .timeout),
            (.passing("cannot reach the token endpoint for the refresh: Couldn't connect to server"), .network),
            (.passing("the token endpoint's answer to the refresh has no access_token"), .badAnswer),
            (.passing("the identity provider answered the refresh with HTTP 400 and no OAuth error code"), .badAnswer),
            (.refused("the token endpoint answered the refresh with invalid_grant"), .refused),
            (.loginRequired("no session"), .refused),
            (.configuration("the identity provider blames the client for the refresh (invalid_client); check credentials"), .clientMisconfigured),
        ]
        for (error, reason) in cases {
            #expect(FetchFailureReason.of(error) == reason, "\(error)")
        }
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
}
