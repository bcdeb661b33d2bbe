import Testing

@testable import ProxyCore

/// The SERVER and CLIENT spans' `server.address` (CONTRACT.md "Telemetry"): a Host field's host
/// without its port.
@Suite struct RequestTracerTests {
    @Test(arguments: [
        ("api.example.com:8080", "api.example.com"),
        ("api.example.com", "api.example.com"),
        ("[::1]:8080", "::1"),
        ("[2001:db8::1]", "2001:db8::1"),
        ("127.0.0.1:18581", "127.0.0.1"),
    ])
    func theHostIsTheAuthorityWithoutItsPort(authority: String, host: String) {
        #expect(RequestTrace.hostOnly(authority) == host)
    }
}
