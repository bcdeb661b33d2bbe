import Config
import Foundation
import HTTP1
import Testing

@testable import ProxyCore

/// CONTRACT.md "Programs in a sandbox", "Placeholders": where each placement's placeholder is read,
/// what the access checks answer, and a `callers_file` read again. No sockets.
@Suite struct PlaceholderGateTests {
    static let value = "sk-ant-api03-placeholder-0123456789"
    static let token = "the-real-static-token-value"

    static func policy(_ extra: String, environment: [String: String] = [:]) throws -> AccessPolicy {
        AccessPolicy(configuration: try policyConfiguration(extra, environment: environment).selecting(route: 0))
    }

    static func policyConfiguration(_ extra: String, environment: [String: String] = [:]) throws -> Configuration {
        let yaml = """
            listen: 127.0.0.1:8080
            upstream: http://127.0.0.1:9000
            credentials:
              type: static
              token_env: TOKEN
            \(extra)
            """
        let env = ["TOKEN": token, "PLACEHOLDER": value].merging(environment) { $1 }
        return try ConfigurationLoader.parse(yaml: yaml, baseDirectory: "/", environment: env).configuration
    }

    static func head(_ fields: [(String, String)], target: String = "/v1/messages") -> RequestHead {
        RequestHead(
            method: "GET", target: target, version: .http1_1,
            fields: [HTTPField(name: "Host", value: "127.0.0.1:8080")] + fields.map { HTTPField(name: $0.0, value: $0.1) },
            framing: .none, keepAlive: true, expectContinue: false, connectionOptions: [])
    }

    static func basic(_ user: String, _ password: String) -> String { "Basic " + Data("\(user):\(password)".utf8).base64EncodedString() }

    // MARK: where the placeholder is read

    @Test func theSpotFollowsInjectAndTheCredentialsType() {
        #expect(PlaceholderSpot(inject: nil, signsRequests: false) == .field(lowercasedName: "authorization", prefix: Array("Bearer ".utf8), suffix: []))
        #expect(
            PlaceholderSpot(inject: InjectConfiguration(.header(name: "X-API-Key", format: "{token}")), signsRequests: false)
                == .field(lowercasedName: "x-api-key", prefix: [], suffix: []))
        #expect(
            PlaceholderSpot(inject: InjectConfiguration(.header(name: "Authorization", format: "token {token}")), signsRequests: false)
                == .field(lowercasedName: "authorization", prefix: Array("token ".utf8), suffix: []))
        #expect(PlaceholderSpot(inject: InjectConfiguration(.basic(username: "x")), signsRequests: false) == .basicPassword)
        #expect(PlaceholderSpot(inject: InjectConfiguration(.query(parameter: "key")), signsRequests: false) == .query(name: "key"))
        #expect(PlaceholderSpot(inject: nil, signsRequests: true) == .sigV4AccessKey)
    }

    @Test func aFieldIsReadBetweenItsFormatsText() {
        let bearer = PlaceholderSpot(inject: nil, signsRequests: false)
        #expect(bearer.read(Self.head([("Authorization", "Bearer abc")]), query: nil) == .candidate(ArraySlice("abc".utf8)))
        #expect(bearer.read(Self.head([("authorization", "bearer abc")]), query: nil) == .candidate(ArraySlice("abc".utf8)))
        #expect(bearer.read(Self.head([("Authorization", "Basic abc")]), query: nil) == .malformed)
        #expect(bearer.read(Self.head([("Authorization", "Bearer ")]), query: nil) == .malformed)
        #expect(bearer.read(Self.head([("X-Other", "Bearer abc")]), query: nil) == .absent)
        let suffixed = PlaceholderSpot.field(lowercasedName: "x-key", prefix: Array("k=".utf8), suffix: Array(";v1".utf8))
        #expect(suffixed.read(Self.head([("X-Key", "K=abc;v1")]), query: nil) == .candidate(ArraySlice("abc".utf8)))
        #expect(suffixed.read(Self.head([("X-Key", "K=abc;v2")]), query: nil) == .malformed)
    }

    @Test func basicGivesThePasswordWhateverTheUser() {
        let spot = PlaceholderSpot.basicPassword
        #expect(spot.read(Self.head([("Authorization", Self.basic("git", "pa:ss"))]), query: nil) == .candidate(ArraySlice("pa:ss".utf8)))
        #expect(spot.read(Self.head([("Authorization", Self.basic("", "p"))]), query: nil) == .candidate(ArraySlice("p".utf8)))
        #expect(spot.read(Self.head([("Authorization", "Basic !!!")]), query: nil) == .malformed)
        #expect(spot.read(Self.head([("Authorization", "Bearer x")]), query: nil) == .malformed)
        #expect(spot.read(Self.head([]), query: nil) == .absent)
        #expect(spot.challengesWhenAbsent)
    }

    @Test func theQueryParameterIsDecoded() {
        let spot = PlaceholderSpot.query(name: "api_key")
        #expect(spot.read(Self.head([]), query: "a=1&api_key=abc%2Dd&api_key=zz") == .candidate(ArraySlice("abc-d".utf8)))
        #expect(spot.read(Self.head([]), query: "a=1;api%5Fkey=abc") == .candidate(ArraySlice("abc".utf8)))
        #expect(spot.read(Self.head([]), query: "a=1") == .absent)
        #expect(spot.read(Self.head([]), query: nil) == .absent)
    }

    @Test func sigV4GivesTheAccessKeyID() {
        let spot = PlaceholderSpot.sigV4AccessKey
        let authorization = "AWS4-HMAC-SHA256 Credential=AKIAPLACEHOLDER0123456789/20260101/us-east-1/s3/aws4_request, SignedHeaders=host, Signature=ab"
        #expect(spot.read(Self.head([("Authorization", authorization)]), query: nil) == .candidate(ArraySlice("AKIAPLACEHOLDER0123456789".utf8)))
        #expect(spot.read(Self.head([("Authorization", "AWS4-HMAC-SHA256 Credential=/x")]), query: nil) == .malformed)
        #expect(spot.read(Self.head([("Authorization", "Bearer AKIA")]), query: nil) == .malformed)
    }

    // MARK: the access checks

    @Test func onlyTheRoutesPlaceholderPassesAndNamesItsCaller() throws {
        let policy = try Self.policy("inject: {header: x-api-key, format: \"{token}\"}\nplaceholder: {value_env: PLACEHOLDER}")
        let checked = policy.check(Self.head([("x-api-key", Self.value)]))
        #expect(checked.isSuccess)
        #expect((try? checked.get())?.caller == "default")
        #expect(policy.check(Self.head([("x-api-key", Self.value + "x")])).error == .placeholderRequired(challenge: false))
        #expect(policy.check(Self.head([("x-api-key", Self.token)])).error == .placeholderRequired(challenge: false))
        #expect(policy.check(Self.head([("Authorization", "Bearer " + Self.value)])).error == .placeholderRequired(challenge: false))
        #expect(policy.check(Self.head([])).error == .placeholderRequired(challenge: false))
    }

    @Test func clientAuthorizationDoesNotApplyToThePlaceholder() throws {
        let policy = try Self.policy("placeholder: {value_env: PLACEHOLDER}\nforward: {client_authorization: reject}")
        #expect(policy.check(Self.head([("Authorization", "Bearer " + Self.value)])).isSuccess)
        #expect(policy.credential.clientAuthorization == .replace)
    }

    @Test func aBasicRouteChallengesARequestWithoutAuthorization() throws {
        let policy = try Self.policy("inject: {basic_username: x-access-token}\nplaceholder: {value_env: PLACEHOLDER}")
        #expect(policy.check(Self.head([])).error == .placeholderRequired(challenge: true))
        #expect(policy.check(Self.head([("Authorization", Self.basic("x", "wrong-wrong-wrong-wrong"))])).error == .placeholderRequired(challenge: false))
        #expect(policy.check(Self.head([("Authorization", Self.basic("anyone", Self.value))])).isSuccess)
        let answer = String(decoding: ProxyError.placeholderRequired(challenge: true).response(keepAlive: true, isHead: false), as: UTF8.self)
        #expect(answer.hasPrefix("HTTP/1.1 401 "))
        #expect(answer.contains("WWW-Authenticate: Basic realm=\"tokenproxy\"\r\n"))
        #expect(answer.contains(#""error":"placeholder_required""#))
        #expect(ProxyError.placeholderRequired(challenge: false).status == 403)
    }

    @Test func aRouteWithoutPlaceholderNamesNoCaller() throws {
        let policy = try Self.policy("")
        #expect(policy.placeholders == nil)
        #expect((try? policy.check(Self.head([])).get())?.caller == nil)
    }

    static let first = "agent-one-placeholder-000001"
    static let second = "agent-two-placeholder-000002"

    /// A new folder holding `callers` with agent-1's and agent-2's lines (the caller removes the folder).
    static func callersFile() throws -> (folder: String, file: String) {
        let folder = NSTemporaryDirectory() + "/placeholder-gate-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        let file = folder + "/callers"
        try "agent-1 \(first)\nagent-2 \(second)\n".write(toFile: file, atomically: true, encoding: .utf8)
        return (folder, file)
    }

    @Test func aCallersFileLineRemovedIsRefusedAfterTheNextLook() throws {
        let (folder, file) = try Self.callersFile()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let (first, second) = (Self.first, Self.second)
        let policy = try Self.policy("placeholder: {callers_file: \(file)}")
        let gate = try #require(policy.placeholders)
        #expect((try? policy.check(Self.head([("Authorization", "Bearer " + second)])).get())?.caller == "agent-2")
        #expect((try? policy.check(Self.head([("Authorization", "Bearer " + first)])).get())?.caller == "agent-1")

        try "agent-1 \(first)\n".write(toFile: file, atomically: true, encoding: .utf8)
        #expect(gate.refresh(now: 0.1) == nil)  // before the next look
        let news = try #require(gate.refresh(now: 1))
        #expect(!news.failed && !news.line.contains(first))
        #expect(policy.check(Self.head([("Authorization", "Bearer " + second)])).error == .placeholderRequired(challenge: false))
        #expect(policy.check(Self.head([("Authorization", "Bearer " + first)])).isSuccess)
        #expect(gate.refresh(now: 2) == nil)  // unchanged

        // A file that breaks refuses everyone until it is fixed.
        try "agent-1 short\n".write(toFile: file, atomically: true, encoding: .utf8)
        #expect(gate.refresh(now: 3)?.failed == true)
        #expect(policy.check(Self.head([("Authorization", "Bearer " + first)])).error == .placeholderRequired(challenge: false))
    }

    /// Two loops' gates of one route share the process's reader: the first sweep that finds a look
    /// due reads the changed file and logs it; the other loop takes the same callers at its next
    /// sweep without reading the file again.
    @Test func loopsShareOneReaderOfTheCallersFile() throws {
        let (folder, file) = try Self.callersFile()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let (first, second) = (Self.first, Self.second)
        let route = try Self.policyConfiguration("placeholder: {callers_file: \(file)}").routes[0]
        let placeholder = try #require(route.placeholder)
        let reader = try #require(CallersFileReader(placeholder, now: 0))
        let one = try #require(PlaceholderGate(route, reader: reader))
        let two = try #require(PlaceholderGate(route, reader: reader))
        let head = Self.head([("Authorization", "Bearer " + second)])
        #expect((try? one.admit(head, query: nil).get()) == "agent-2")

        try "agent-1 \(first)\n".write(toFile: file, atomically: true, encoding: .utf8)
        #expect(one.refresh(now: 1)?.failed == false)
        #expect(two.refresh(now: 1.1) == nil)  // the look was loop one's
        for gate in [one, two] {
            #expect(gate.admit(head, query: nil).error == .placeholderRequired(challenge: false))
            #expect(gate.callers.names == ["agent-1"])
        }
        // The file gone: every caller refused, on both loops.
        try FileManager.default.removeItem(atPath: file)
        #expect(two.refresh(now: 2)?.failed == true)
        #expect(one.refresh(now: 2.1) == nil)
        #expect(one.callers.names.isEmpty && two.callers.names.isEmpty)
    }

    @Test func everyCallerIsComparedAndTheRightOneNamed() {
        let callers = PlaceholderCallers([PlaceholderCaller(name: "a", value: "aaaa"), PlaceholderCaller(name: "b", value: "bbbb")])
        #expect(callers.caller(of: ArraySlice("bbbb".utf8)) == "b")
        #expect(callers.caller(of: ArraySlice("aaaa".utf8)) == "a")
        #expect(callers.caller(of: ArraySlice("aaa".utf8)) == nil)
        #expect(callers.caller(of: []) == nil)
        #expect(PlaceholderCallers([]).caller(of: ArraySlice("aaaa".utf8)) == nil)
    }
}
