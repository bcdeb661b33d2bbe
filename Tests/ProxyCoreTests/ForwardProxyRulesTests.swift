import Config
import Testing

@testable import ProxyCore

/// CONTRACT.md "HTTPS for clients" (docs/FORWARD-PROXY.md): which CONNECT is answered, the pin
/// CONNECT host = SNI = Host, and where a tunnel may not go. Pure functions, no sockets.
@Suite struct ForwardProxyRulesTests {
    static let table: RouteTable = {
        let yaml = """
            listen: 127.0.0.1:8080
            store:
              path: ./state/tokens.json
            routes:
              - name: api
                match: {host: [api.example.com, "API2.Example.com."]}
                upstream: https://api.example.com
                credentials: {type: static, token_env: TOKEN}
              - name: alt
                match: {host: "other.test:8443"}
                upstream: https://other.test:8443
                credentials: {type: static, token_env: TOKEN}
              - name: wild
                match: {host: "*.example.com"}
                upstream: https://wild.example.net
                credentials: {type: static, token_env: TOKEN}
              - name: files1
                match: {host: files.test, path_prefix: /v1/}
                upstream: https://files.test/v1
                credentials: {type: static, token_env: TOKEN}
              - name: files2
                match: {host: files.test, path_prefix: /v2/}
                upstream: https://files.test/v2
                credentials: {type: static, token_env: TOKEN}
              - name: dual1
                match: {host: "dual.test:8443"}
                upstream: https://dual.test:8443
                credentials: {type: static, token_env: TOKEN}
              - name: dual2
                match: {host: "dual.test:9443"}
                upstream: https://dual.test:9443
                credentials: {type: static, token_env: TOKEN}
              - name: shadow
                match: {host: "shadow.example.com:8443"}
                upstream: https://shadow.example.com:8443
                credentials: {type: static, token_env: TOKEN}
              - name: literal
                match: {host: ["127.0.0.1", "[::1]"]}
                upstream: https://127.0.0.1:9000
                credentials: {type: static, token_env: TOKEN}
              - name: own
                match: {listen: 127.0.0.1:8081}
                upstream: https://own.test
                credentials: {type: static, token_env: TOKEN}
              - name: orders
                match: {path_prefix: /orders/}
                upstream: https://orders.test
                credentials: {type: static, token_env: TOKEN}
              - name: rest
                upstream: https://rest.test
                credentials: {type: static, token_env: TOKEN}
            """
        do {
            let c = try ConfigurationLoader.parse(yaml: yaml, baseDirectory: "/", environment: ["TOKEN": "t"]).configuration
            return RouteTable(c.routes)
        } catch {
            fatalError("the test routes do not load: \(error)")
        }
    }()

    static func decide(_ target: String, _ otherHosts: ForwardProxyConfiguration.OtherHosts = .refuse) -> ConnectDecision {
        ForwardProxyRules.decide(connectTarget: target, table: table, otherHosts: otherHosts)
    }

    /// Whether `decision` is a refusal whose message says `words`.
    static func isRefusal(_ decision: ConnectDecision, saying words: String) -> Bool {
        guard case .refuse(let message) = decision else { return false }
        return message.contains(words)
    }

    // MARK: CONNECT to a route's host

    @Test func aRouteHostOnPort443IsInterceptedWithItsNameLowercasedAndWithoutTheTrailingDot() {
        for otherHosts in ForwardProxyConfiguration.OtherHosts.allCases {
            for target in ["api.example.com:443", "API.Example.COM:443", "api.example.com.:443", "API.EXAMPLE.COM.:443"] {
                #expect(Self.decide(target, otherHosts) == .intercept(route: 0, host: "api.example.com", port: 443), "\(target)")
            }
            // The route's own name was written with capitals and a trailing dot.
            for target in ["api2.example.com:443", "api2.example.com.:443"] {
                #expect(Self.decide(target, otherHosts) == .intercept(route: 0, host: "api2.example.com", port: 443), "\(target)")
            }
        }
    }

    @Test func aRouteHostOnAnotherPortThanItsOwnIsRefusedWhateverOtherHostsSays() {
        for otherHosts in ForwardProxyConfiguration.OtherHosts.allCases {
            #expect(Self.isRefusal(Self.decide("api.example.com:8443", otherHosts), saying: "another port"))
            #expect(Self.isRefusal(Self.decide("api.example.com:80", otherHosts), saying: "another port"))
            #expect(Self.decide("other.test:8443", otherHosts) == .intercept(route: 1, host: "other.test", port: 8443))
            #expect(Self.isRefusal(Self.decide("other.test:443", otherHosts), saying: "another port"), "the route gives 8443")
            #expect(Self.decide("dual.test:8443", otherHosts) == .intercept(route: 5, host: "dual.test", port: 8443))
            #expect(Self.decide("dual.test:9443", otherHosts) == .intercept(route: 6, host: "dual.test", port: 9443))
            #expect(Self.isRefusal(Self.decide("dual.test:443", otherHosts), saying: "another port"))
        }
    }

    @Test func aWildcardRouteTakesNamesUnderItButNotItsOwnName() {
        #expect(Self.decide("a.example.com:443") == .intercept(route: 2, host: "a.example.com", port: 443))
        #expect(Self.decide("X.Y.Example.com.:443") == .intercept(route: 2, host: "x.y.example.com", port: 443))
        #expect(Self.decide("xn--bcher-kva.example.com:443") == .intercept(route: 2, host: "xn--bcher-kva.example.com", port: 443), "an IDN's A-label")
        #expect(Self.isRefusal(Self.decide("example.com:443"), saying: "no route names example.com"))
        #expect(Self.decide("example.com:443", .tunnel) == .tunnel(host: "example.com", port: 443))
        #expect(Self.isRefusal(Self.decide("evilexample.com:443"), saying: "no route names"))
        #expect(Self.isRefusal(Self.decide("a.example.com:8443"), saying: "another port"))
    }

    /// An exact name whose port does not fit falls through to a `*.` name that fits, as the route
    /// table's `match` does for the requests that come through the tunnel.
    @Test func anExactNameOnAnotherPortFallsThroughToAWildcardOnThisPort() {
        #expect(Self.decide("shadow.example.com:443") == .intercept(route: 2, host: "shadow.example.com", port: 443))
        #expect(Self.decide("shadow.example.com:8443") == .intercept(route: 7, host: "shadow.example.com", port: 8443))
        #expect(Self.table.match(host: "shadow.example.com", defaultPort: 443, path: "/") == .route(2, strip: 0))
        #expect(Self.table.match(host: "shadow.example.com:8443", defaultPort: 443, path: "/") == .route(7, strip: 0))
    }

    /// The requests in the tunnel are matched by host and path by the normal table; the CONNECT
    /// takes the first entry in the table's order.
    @Test func aHostRouteWithAPathPrefixIsStillIntercepted() {
        #expect(Self.decide("files.test:443") == .intercept(route: 3, host: "files.test", port: 443))
        #expect(Self.table.match(host: "files.test", defaultPort: 443, path: "/v2/x", absoluteForm: true) == .route(4, strip: 4))
    }

    /// A request in the tunnel that no route of the tunnel's host takes must not fall through to a
    /// path route or the fallback (another route's upstream): matched as an absolute-form request
    /// is, it is `forbiddenTarget` instead (docs/FORWARD-PROXY.md).
    @Test func inTheTunnelAPathOutsideTheHostsRoutesDoesNotFallThroughWhenMatchedAsAbsoluteForm() {
        #expect(Self.table.match(host: "files.test", defaultPort: 443, path: "/orders/7") == .route(10, strip: 8))
        #expect(Self.table.match(host: "files.test", defaultPort: 443, path: "/orders/7", absoluteForm: true) == .forbiddenTarget)
        #expect(Self.table.match(host: "files.test", defaultPort: 443, path: "/x", absoluteForm: true) == .forbiddenTarget)
    }

    @Test func pathRoutesOwnListenersAndTheFallbackNameNoHost() {
        for target in ["own.test:443", "orders.test:443", "rest.test:443", "localhost:443"] {
            #expect(Self.isRefusal(Self.decide(target), saying: "no route names"), "\(target)")
        }
    }

    // MARK: Hosts no route names

    @Test func otherHostsDecidesForUnnamedHostsAndATunnelGoesToPort443Only() {
        #expect(Self.decide("Evil.Test.:443", .refuse) == .refuse("no route names evil.test"))
        #expect(Self.decide("Evil.Test.:443", .tunnel) == .tunnel(host: "evil.test", port: 443))
        #expect(Self.decide("xn--bcher-kva.example:443", .tunnel) == .tunnel(host: "xn--bcher-kva.example", port: 443))
        for port in [1, 22, 80, 442, 444, 8443, 65535] {
            #expect(Self.isRefusal(Self.decide("evil.test:\(port)", .tunnel), saying: "port 443 only"), "\(port)")
            #expect(Self.isRefusal(Self.decide("evil.test:\(port)", .refuse), saying: "no route names"), "\(port)")
        }
    }

    // MARK: IP literals

    @Test func anIPLiteralIsRefusedWhateverOtherHostsSaysAndEvenWhenARouteNamesIt() {
        let literals = [
            "127.0.0.1:443", "[::1]:443", "[::ffff:127.0.0.1]:443", "[fe80::1%25eth0]:443", "[v1.x]:443", "[]:443",
            "169.254.169.254:443", "8.8.8.8:443", "1.2.3.4.:443", "127.1:443", "0x7f.1:443", "0X7F.0.0.1:443",
            "0x7f000001:443", "2130706433:443", "017700000001:443", "0177.0.0.1:443", "0x:443", "example.123:443",
            "example.0x1f:443", "1:443",
        ]
        for otherHosts in ForwardProxyConfiguration.OtherHosts.allCases {
            for target in literals {
                #expect(Self.isRefusal(Self.decide(target, otherHosts), saying: "IP address"), "\(target)")
            }
        }
    }

    /// Numbers inside a name, and a last label that only looks like a number, are names.
    @Test func namesThatHoldNumbersAreNotLiterals() {
        for host in ["1.example.test", "127.0.0.1.nip.io", "0x7f.example", "api.0xg", "123abc", "a1", "test.1a", "0x1g"] {
            #expect(Self.decide("\(host):443", .tunnel) == .tunnel(host: host, port: 443), "\(host)")
        }
    }

    // MARK: Malformed targets

    /// Each target holds "evil" (the long ones too); the message never holds the target's bytes.
    @Test func aMalformedTargetIsRefusedWithoutEchoingIt() {
        let long = String(repeating: "a", count: 100_000) + "evil"
        let malformed = [
            "evil", "evil:", "evil:0", "evil:65536", "evil:99999", "evil:123456", "evil:+443", "evil:-1",
            "evil:0443", "evil:00443", "evil:443 ", " evil:443", "evil :443", "ev il:443", "evil\0:443", "evil:44\03",
            "user@evil:443", "user:pw@evil:443", "ev%69l:443", "evil..:443", ".evil:443", "a..evil:443", "-evil.com:443",
            "evil-.com:443", "a.-evil.com:443", "a.evil-.com:443", "évil.com:443", "evil_name.com:443", "https://evil:443",
            "evil:443/path", "evil/path:443", "*.evil.com:443", "evil:443:443", "evil\r\n:443", "evil:0x1bb", "evil:４４３",
            "\(long):443", "\(long).com:443", "evil:\(long)",
        ]
        for target in malformed + ["", ":", ":443", ".:443", "[::1]"] {
            let decision = Self.decide(target, .tunnel)
            guard case .refuse(let message) = decision else {
                Issue.record("\(target.prefix(40)) was not refused: \(decision)")
                continue
            }
            #expect(message.utf8.count < 120, "\(target.prefix(40))")
            #expect(!message.contains("evil") && !message.contains("aaaa"), "the raw target is never in the message: \(message)")
        }
    }

    @Test func aNameMayBe253BytesWithLabelsOf63() {
        let label63 = String(repeating: "a", count: 63)
        let name253 = [label63, label63, label63, String(repeating: "b", count: 61)].joined(separator: ".")
        #expect(name253.utf8.count == 253)
        #expect(Self.decide("\(name253):443", .tunnel) == .tunnel(host: name253, port: 443))
        #expect(Self.decide("\(name253).:443", .tunnel) == .tunnel(host: name253, port: 443), "the trailing dot is not counted")
        #expect(Self.isRefusal(Self.decide("\(name253)b:443", .tunnel), saying: "host name"), "254 bytes")
        #expect(Self.isRefusal(Self.decide("\(name253)..:443", .tunnel), saying: "host name"))
        #expect(Self.decide("\(label63).test:443", .tunnel) == .tunnel(host: "\(label63).test", port: 443))
        #expect(Self.isRefusal(Self.decide("\(label63)a.test:443", .tunnel), saying: "host name"), "a label of 64")
        #expect(Self.decide("a-b--c.test:443", .tunnel) == .tunnel(host: "a-b--c.test", port: 443))
    }

    @Test func aPortIsOneToFiveDecimalDigitsUpTo65535WithoutALeadingZero() {
        let cases: [(String, Int?)] = [
            ("1", 1), ("9", 9), ("10", 10), ("443", 443), ("65535", 65535), ("65536", nil), ("99999", nil), ("100000", nil),
            ("0", nil), ("00", nil), ("0443", nil), ("", nil), ("+443", nil), ("-443", nil), ("443 ", nil), (" 443", nil),
            ("4 43", nil), ("0x1bb", nil), ("44a", nil), ("443\0", nil),
        ]
        for (digits, port) in cases {
            #expect(ForwardProxyRules.port(Array(digits.utf8)) == port, "\(digits)")
        }
    }

    // MARK: The TLS server name

    @Test func aServerNameMustNameTheTunnelHostOrBeAbsent() {
        #expect(ForwardProxyRules.serverNameAllowed(nil, tunnelHost: "api.example.com"))
        for sni in ["api.example.com", "API.Example.COM", "api.example.com.", "API.EXAMPLE.COM."] {
            #expect(ForwardProxyRules.serverNameAllowed(sni, tunnelHost: "api.example.com"), "\(sni)")
            #expect(ForwardProxyRules.serverNameAllowed(sni, tunnelHost: "api.example.com."), "\(sni)")
        }
        let others = [
            "", ".", "api.example.com..", "other.example.com", "api.example.co", "xapi.example.com", "api.example.com.evil",
            "api.example.com\0", "api.example.com:443", "*.example.com", "example.com", " api.example.com", "apı.example.com",
        ]
        for sni in others {
            #expect(!ForwardProxyRules.serverNameAllowed(sni, tunnelHost: "api.example.com"), "\(sni)")
        }
    }

    // MARK: The pin inside the tunnel

    static func pin(_ host: String?, _ absolute: (host: String, port: Int?, scheme: String)? = nil, port: Int = 443) -> Bool {
        ForwardProxyRules.pin(hostField: host, absolute: absolute, tunnelHost: "api.example.com", tunnelPort: port)
    }

    @Test func noHostAndNoAbsoluteTargetIsNoClaim() {
        #expect(Self.pin(nil))
        #expect(Self.pin(nil, port: 8443))
    }

    @Test func aHostFieldMustNameTheTunnelHostAndPort() {
        for host in ["api.example.com", "api.example.com:443", "API.Example.Com", "api.example.com.", "API.EXAMPLE.COM.:443"] {
            #expect(Self.pin(host), "\(host)")
            #expect(!Self.pin(host, port: 8443), "no port means 443: \(host)")
        }
        #expect(Self.pin("api.example.com:8443", port: 8443))
        #expect(!Self.pin("api.example.com:8443"))
        #expect(!Self.pin("api.example.com:80"))
    }

    @Test func garbageInTheHostFieldIsMisdirected() {
        let garbage = [
            "", ":", ":443", "api.example.com:", "api.example.com:0443", "api.example.com:+443", "api.example.com:65536",
            "api.example.com:0", "api.example.com:443:443", "api.example.com:443 ", " api.example.com", "api.example.com ",
            "api.example.com\0", "api.example.com\0:443", "user@api.example.com", "api%2eexample.com", "api.example.com/x",
            "api.example.com..", "other.example.com", "xapi.example.com", "api.example.com.evil", "[::1]", "[::1]:443",
            "[api.example.com]", "[api.example.com]:443", "[api.example.com", "api.example.com]:443",
            String(repeating: "a", count: 100_000),
        ]
        for host in garbage {
            #expect(!Self.pin(host), "\(host.prefix(40))")
        }
    }

    @Test func anAbsoluteTargetMustNameTheTunnelHostAndPortWithItsSchemesDefault() {
        #expect(Self.pin(nil, ("api.example.com", nil, "https")))
        #expect(Self.pin(nil, ("api.example.com", 443, "https")))
        #expect(Self.pin(nil, ("api.example.com", 443, "http")), "an explicit port counts, whatever the scheme")
        #expect(Self.pin(nil, ("API.Example.COM.", nil, "HTTPS")))
        #expect(!Self.pin(nil, ("api.example.com", nil, "http")), "http means port 80")
        #expect(Self.pin(nil, ("api.example.com", 8443, "https"), port: 8443))
        #expect(!Self.pin(nil, ("api.example.com", nil, "https"), port: 8443))
        #expect(!Self.pin(nil, ("other.example.com", nil, "https")))
        #expect(!Self.pin(nil, ("api.example.com", nil, "ftp")))
        #expect(!Self.pin(nil, ("api.example.com", nil, "wss")))
        #expect(!Self.pin(nil, ("::1", 443, "https")))
        #expect(!Self.pin(nil, ("", nil, "https")))
    }

    @Test func withBothAHostFieldAndAnAbsoluteTargetBothMustMatch() {
        #expect(Self.pin("api.example.com", ("api.example.com", nil, "https")))
        #expect(!Self.pin("api.example.com", ("other.example.com", nil, "https")))
        #expect(!Self.pin("other.example.com", ("api.example.com", nil, "https")))
        #expect(!Self.pin("api.example.com:8443", ("api.example.com", nil, "https")))
        #expect(!Self.pin("api.example.com", ("api.example.com", 8443, "https")))
    }

    // MARK: Where a tunnel may go

    static func v4(_ a: UInt8, _ b: UInt8, _ c: UInt8, _ d: UInt8) -> [UInt8] { [a, b, c, d] }

    static func v6(_ groups: UInt16...) -> [UInt8] {
        precondition(groups.count == 8)
        return groups.flatMap { [UInt8($0 >> 8), UInt8($0 & 0xFF)] }
    }

    /// `prefix` (12 bytes as 6 groups) followed by an IPv4 address.
    static func embedding(_ prefix: [UInt16], _ address: [UInt8]) -> [UInt8] {
        prefix.flatMap { [UInt8($0 >> 8), UInt8($0 & 0xFF)] } + address
    }

    @Test func loopbackUnspecifiedAndLinkLocalIPv4AreForbiddenAndTheirNeighboursAreNot() {
        let forbidden = [
            Self.v4(127, 0, 0, 1), Self.v4(127, 255, 255, 255), Self.v4(127, 0, 1, 1), Self.v4(0, 0, 0, 0), Self.v4(0, 255, 255, 255),
            Self.v4(169, 254, 169, 254), Self.v4(169, 254, 0, 0), Self.v4(169, 254, 255, 255),
        ]
        for address in forbidden {
            #expect(ForwardProxyRules.isForbiddenTunnelAddress(address), "\(address)")
        }
        let allowed = [
            Self.v4(126, 255, 255, 255), Self.v4(128, 0, 0, 0), Self.v4(1, 0, 0, 0), Self.v4(169, 253, 255, 255), Self.v4(169, 255, 0, 0),
            Self.v4(168, 254, 169, 254), Self.v4(8, 8, 8, 8), Self.v4(10, 0, 0, 1), Self.v4(192, 168, 1, 1), Self.v4(255, 255, 255, 254),
        ]
        for address in allowed {
            #expect(!ForwardProxyRules.isForbiddenTunnelAddress(address), "\(address)")
        }
    }

    @Test func loopbackUnspecifiedLinkLocalAndEC2MetadataIPv6AreForbiddenAlsoWhenTheyCarryIPv4() {
        let mapped: [UInt16] = [0, 0, 0, 0, 0, 0xFFFF]
        let compatible: [UInt16] = [0, 0, 0, 0, 0, 0]
        let nat64: [UInt16] = [0x64, 0xFF9B, 0, 0, 0, 0]
        let forbidden = [
            Self.v6(0, 0, 0, 0, 0, 0, 0, 1), Self.v6(0, 0, 0, 0, 0, 0, 0, 0), Self.v6(0xFE80, 0, 0, 0, 0, 0, 0, 1),
            Self.v6(0xFEBF, 0xFFFF, 0xFFFF, 0xFFFF, 0xFFFF, 0xFFFF, 0xFFFF, 0xFFFF), Self.v6(0xFE80, 0, 0, 0, 0x1, 0x2, 0x3, 0x4),
            Self.v6(0xFD00, 0x0EC2, 0, 0, 0, 0, 0, 0x0254),
            Self.embedding(mapped, Self.v4(127, 0, 0, 1)), Self.embedding(mapped, Self.v4(169, 254, 169, 254)),
            Self.embedding(mapped, Self.v4(0, 0, 0, 0)), Self.embedding(compatible, Self.v4(127, 0, 0, 1)),
            Self.embedding(compatible, Self.v4(169, 254, 169, 254)), Self.embedding(nat64, Self.v4(127, 0, 0, 1)),
            Self.embedding(nat64, Self.v4(169, 254, 169, 254)),
        ]
        for address in forbidden {
            #expect(ForwardProxyRules.isForbiddenTunnelAddress(address), "\(address)")
        }
        let allowed = [
            Self.v6(0x2001, 0x4860, 0x4860, 0, 0, 0, 0, 0x8888), Self.v6(0xFEC0, 0, 0, 0, 0, 0, 0, 1),
            Self.v6(0xFE7F, 0xFFFF, 0xFFFF, 0xFFFF, 0xFFFF, 0xFFFF, 0xFFFF, 0xFFFF), Self.v6(0xFEC0, 0, 0, 0, 0, 0, 0, 0),
            Self.v6(0xFD00, 0x0EC2, 0, 0, 0, 0, 0, 0x0253), Self.v6(0xFD00, 0x0EC2, 0, 0, 0, 0, 0, 0x0255),
            Self.v6(0xFD00, 0x0EC3, 0, 0, 0, 0, 0, 0x0254), Self.v6(0xFD00, 0x0EC2, 0, 0, 0, 0, 1, 0x0254),
            Self.v6(0xFD00, 0, 0, 0, 0, 0, 0, 1), Self.embedding(mapped, Self.v4(8, 8, 8, 8)),
            Self.embedding(compatible, Self.v4(8, 8, 8, 8)), Self.embedding(nat64, Self.v4(8, 8, 8, 8)),
            Self.embedding([0, 0, 0, 0, 0xFFFF, 0], Self.v4(127, 0, 0, 1)),
        ]
        for address in allowed {
            #expect(!ForwardProxyRules.isForbiddenTunnelAddress(address), "\(address)")
        }
    }

    @Test func anAddressOfAnotherLengthIsForbidden() {
        for count in [0, 1, 3, 5, 6, 15, 17, 32] {
            #expect(ForwardProxyRules.isForbiddenTunnelAddress([UInt8](repeating: 8, count: count)), "\(count)")
        }
    }

    @Test func aTunnelIsRefusedWhenAnyResolvedAddressIsForbiddenOrThereIsNone() {
        let good = Self.v4(93, 184, 215, 14)
        let goodV6 = Self.v6(0x2606, 0x2800, 0x21F, 0xCB07, 0x6820, 0x80DA, 0xAF6B, 0x8B2C)
        #expect(ForwardProxyRules.tunnelRefusal(resolved: [good]) == nil)
        #expect(ForwardProxyRules.tunnelRefusal(resolved: [good, goodV6]) == nil)
        #expect(ForwardProxyRules.tunnelRefusal(resolved: [])?.contains("no address") == true)
        #expect(ForwardProxyRules.tunnelRefusal(resolved: [good, Self.v4(127, 0, 0, 1)])?.contains("loopback") == true)
        #expect(ForwardProxyRules.tunnelRefusal(resolved: [Self.v4(169, 254, 169, 254), good])?.contains("link-local") == true)
        #expect(ForwardProxyRules.tunnelRefusal(resolved: [goodV6, Self.v6(0xFD00, 0x0EC2, 0, 0, 0, 0, 0, 0x0254)])?.contains("metadata") == true)
        #expect(ForwardProxyRules.tunnelRefusal(resolved: [goodV6, Self.v6(0, 0, 0, 0, 0, 0, 0, 0)])?.contains("unspecified") == true)
        #expect(ForwardProxyRules.tunnelRefusal(resolved: [good, [1, 2, 3]]) != nil)
    }
}
