import Basics
import Testing

/// CONTRACT.md: calls honour HTTPS_PROXY / HTTP_PROXY / NO_PROXY as curl does, except a variable
/// that names one of tokenproxy's own listen addresses (issue 39 point 11): it is passed over.
@Suite struct ProxyEnvironmentTests {
    static func environment(_ variables: [String: String]) -> (String) -> String? { { variables[$0] } }

    @Test func aProxyURLNamesItsHostAndPortAsCurlReadsThem() {
        func read(_ value: String) -> String? { ProxyEnvironment.hostAndPort(ofProxy: value).map { "\($0.host) \($0.port)" } }
        #expect(read("http://127.0.0.1:8080") == "127.0.0.1 8080")
        #expect(read("http://user:pass@LocalHost.:8080/") == "localhost 8080")
        #expect(read("127.0.0.1:3128") == "127.0.0.1 3128", "no scheme is http")
        #expect(read("http://proxy.example") == "proxy.example 1080", "curl's default proxy port")
        #expect(read("https://proxy.example") == "proxy.example 443")
        #expect(read("socks5h://[::1]:1080") == "::1 1080")
        #expect(read("http://[::1]") == "::1 1080")
        #expect(read("http://:8080") == nil)
        #expect(read("http://127.0.0.1:99999") == nil)
        #expect(read("http://[::1") == nil)
    }

    @Test func aListenerIsNamedByItsAddressAndALoopbackOneByLocalhost() {
        let own = OwnListenAddresses(listeners: [(host: "127.0.0.1", port: 8080), (host: "::1", port: 9090), (host: "10.1.2.3", port: 7070)])
        #expect(own.named(byProxy: "http://127.0.0.1:8080") == "127.0.0.1:8080")
        #expect(own.named(byProxy: "http://localhost:8080") == "127.0.0.1:8080")
        #expect(own.named(byProxy: "http://[::1]:9090") == "[::1]:9090")
        #expect(own.named(byProxy: "localhost:9090") == "[::1]:9090")
        #expect(own.named(byProxy: "http://10.1.2.3:7070") == "10.1.2.3:7070")
        #expect(own.named(byProxy: "http://127.0.0.1:8081") == nil, "another port")
        #expect(own.named(byProxy: "http://127.0.0.2:8080") == nil, "another loopback address is another listener's")
        #expect(own.named(byProxy: "http://localhost:7070") == nil, "10.1.2.3 is not loopback")
        #expect(own.named(byProxy: "http://proxy.example:8080") == nil)
    }

    @Test func aWildcardListenerIsNamedByEveryLocalAddress() {
        let own = OwnListenAddresses(listeners: [(host: "0.0.0.0", port: 8080), (host: "::", port: 9090)], localAddresses: ["192.0.2.7", "fe80::1"])
        for value in [
            "http://127.0.0.1:8080", "http://127.9.9.9:8080", "http://localhost:8080", "http://0.0.0.0:8080", "http://192.0.2.7:8080", "http://[::1]:8080",
        ] {
            #expect(own.named(byProxy: value) == "0.0.0.0:8080", "\(value)")
        }
        #expect(own.named(byProxy: "http://[FE80::1]:9090") == "[::]:9090")
        #expect(own.named(byProxy: "http://192.0.2.8:8080") == nil, "not this machine's")
        #expect(own.named(byProxy: "http://proxy.example:8080") == nil, "names are not resolved")
    }

    @Test func aVariableNamingAnOwnAddressIsPassedOverForTheNextOne() {
        let own = OwnListenAddresses(listeners: [(host: "127.0.0.1", port: 8080)])
        let selfOnly = ProxyEnvironment(scheme: "https", environment: Self.environment(["HTTPS_PROXY": "http://127.0.0.1:8080"]), own: own)
        #expect(selfOnly.proxy == "" && selfOnly.source == nil)
        #expect(selfOnly.ignored == [.init(name: "HTTPS_PROXY", value: "http://127.0.0.1:8080", ownAddress: "127.0.0.1:8080")])
        let next = ProxyEnvironment(
            scheme: "https", environment: Self.environment(["https_proxy": "http://localhost:8080", "ALL_PROXY": "http://proxy.example:3128"]), own: own)
        #expect(next.proxy == "http://proxy.example:3128" && next.source == "ALL_PROXY")
        #expect(next.ignored.map(\.name) == ["https_proxy"])
        let plain = ProxyEnvironment(scheme: "http", environment: Self.environment(["http_proxy": "http://127.0.0.1:8080", "no_proxy": "a.test"]), own: own)
        #expect(plain.proxy == "" && plain.noProxy == "a.test" && plain.ignored.map(\.name) == ["http_proxy"])
        // No own listener (a command that serves nothing): as curl reads them.
        let none = ProxyEnvironment(scheme: "https", environment: Self.environment(["HTTPS_PROXY": "http://127.0.0.1:8080"]), own: OwnListenAddresses())
        #expect(none.proxy == "http://127.0.0.1:8080" && none.source == "HTTPS_PROXY" && none.ignored.isEmpty)
    }
}
