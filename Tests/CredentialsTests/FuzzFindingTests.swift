import Config
import Testing

@testable import Credentials
@testable import IdentityHTTP

/// Inputs the fuzz targets (Tests/Fuzz, docs/RELIABILITY.md) found, kept as regression tests.
@Suite("Fuzzing findings")
struct FuzzFindingTests {
    /// FuzzJSONRefreshAnswer: an answer whose `Date` has a non-ASCII character where `GMT` should be
    /// stopped the process in Foundation's DateFormatter ("Incorrect range CFRange"). Every identity
    /// provider's answer passes its `Date` through `HTTPCallResponse.date` (clock-skew correction).
    static let brokenDate = "Sun, 22 Nov 2026 03:00:00\u{738}MT"

    static func answer(date: String, body: String) -> HTTPCallResponse {
        HTTPCallResponse(status: 200, headers: [(name: "date", value: date)], body: Array(body.utf8))
    }

    @Test("a Date header with a non-ASCII character is no date, and reading it does not trap")
    func nonASCIIDateIsNoDate() {
        #expect(Self.answer(date: Self.brokenDate, body: "").date == nil)
        #expect(Self.answer(date: "Sun, 22 Nov 2026 03:00:00 GMT\u{E9}", body: "").date == nil)
        #expect(Self.answer(date: "Sun, 22 Nov 2026 03:00:00 GMT", body: "").date == 1_795_316_400)
    }

    @Test("every identity provider's answer with such a Date still yields its token, without a server date")
    func answersWithANonASCIIDate() throws {
        let json = JSONRefreshConfiguration(refreshURL: "http://127.0.0.1:9/refresh")
        let fromBackend = try JSONRefreshProvider(json).read(
            Self.answer(date: Self.brokenDate, body: #"{"access_token":"access-1","expires_in":60}"#))
        #expect(fromBackend.accessToken == "access-1")
        #expect(fromBackend.serverDate == nil)

        let oauth = CredentialsConfiguration(
            .oauth2Refresh(OAuth2RefreshConfiguration(client: OAuth2ClientConfiguration(tokenURL: "http://127.0.0.1:9/token", clientID: "client"))))
        let fromTokenEndpoint = try OAuth2Provider(oauth).read(
            Self.answer(date: Self.brokenDate, body: #"{"access_token":"access-2","token_type":"Bearer"}"#), call: "refresh")
        #expect(fromTokenEndpoint.accessToken == "access-2")
        #expect(fromTokenEndpoint.serverDate == nil)
    }

    @Test("an RFC 3339 expires_at with a non-ASCII character is no time")
    func nonASCIIRFC3339IsNoTime() {
        #expect(RFC3339.parse("2026-11-22T03:00:00\u{738}Z") == nil)
        #expect(RFC3339.parse("2026-11-22T03:00:00Z\u{E9}") == nil)
        #expect(RFC3339.parse("2026-11-22T03:00:00Z") == 1_795_316_400)
    }
}
