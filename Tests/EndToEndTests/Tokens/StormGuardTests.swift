import Foundation
import TestSupport
import Testing

/// CONTRACT point 3: a refresh that returns the very credential the upstream just refused (ECS, EKS
/// and IMDS hand out the same AWS keys until they rotate them) is not retried with, and starts the
/// 30 s storm guard. Issue 39: 20 requests against an upstream that refuses everything made 21
/// credential fetches. Counted at the real container credentials endpoint (aws_metadata.py) and
/// at an upstream that refuses every request (refusing_upstream.py).
@Suite(.tags(.endToEnd), .timeLimit(.minutes(35))) struct StormGuardTests {
    /// `steadyExpiration`: the endpoint answers the very same JSON each time (as ECS does); without
    /// it, the same keys with an `Expiration` that moves on at each answer.
    @Test(arguments: [true, false])
    func theSameAWSKeysAgainAreNotRetriedWithAndStartTheStormGuard(steadyExpiration: Bool) throws {
        let metadata = try PythonServer(
            "aws_metadata", arguments: ["--container-token", "pod-token"] + (steadyExpiration ? ["--steady-expiration"] : []))
        let upstream = try PythonServer("refusing_upstream")
        #expect(try curl(["-X", "POST", upstream.baseURL + "/test/refuse?count=1000&status=401"]).status == 200)
        let proxy = try ProxyProcess(
            config: proxyConfig(
                upstream: upstream.baseURL,
                credentials: """
                    type: aws
                    region: us-east-1
                    service: execute-api
                    source: container
                    container_endpoint: \(metadata.baseURL)/container/creds
                    """), environment: ["AWS_CONTAINER_AUTHORIZATION_TOKEN": "pod-token"])
        func fetches() throws -> Int { (try curl([metadata.baseURL + "/calls"]).json?["container"] as? [Any])?.count ?? -1 }
        func upstreamRequests() throws -> Int { try InjectTests.requests(upstream).count }
        // The first credentials are fetched at start.
        #expect(try within(30) { try fetches() == 1 })

        // One after the other: requests at once would share one refresh anyway.
        let started = Date()
        for i in 0..<20 {
            let answer = try curl([proxy.baseURL + "/items/\(i)"])
            #expect(answer.status == 401, "request \(i): \(answer.status) \(answer.bodyString)")
        }
        // The first 401 fetches once and gets the same keys: no retry, and the next 30 s pass 401s
        // on without a fetch (a box slow enough to take longer than that may fetch once more per 30 s).
        let allowance = Int(Date().timeIntervalSince(started) / 30)
        let count = try fetches()
        #expect(count >= 2 && count <= 2 + allowance, "\(count) credential fetches for 20 refused requests")
        #expect(try upstreamRequests() == 20, "a request was retried with the keys the upstream had refused")
        try proxy.stopAndExpectCleanExit()
    }
}
