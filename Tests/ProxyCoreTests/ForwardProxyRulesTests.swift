import Basics
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

    static func egress(tunnelHosts: [String]? = nil, deny: [String]? = nil) throws -> EgressPolicy {
        var yaml = minimalForwardProxyYAML + "\n  other_hosts: tunnel"
        if let tunnelHosts { yaml += "\n  tunnel_hosts: [" + tunnelHosts.map { "\"\($0)\"" }.joined(separator: ", ") + "]" }
        if let deny { yaml += "\n  deny_addresses: [" + deny.map { "\"\($0)\"" }.joined(separator: ", ") + "]" }
        let loaded = try ConfigurationLoader.parse(yaml: yaml, baseDirectory: "/", environment: ["TOKEN": "t"])
        return try #require(loaded.configuration.forwardProxy).egress
    }

    static let minimalForwardProxyYAML = """
        upstream: https://api.example.com
        credentials: {type: static, token_env: TOKEN}
        forward_proxy:
          leaf_lifetime: 24h
        """

    @Test func withoutTunnelHostsAnyUnnamedHostIsTunnelledToPort443Only() throws {
        let egress = try Self.egress()
        let decide = { (target: String) in ForwardProxyRules.decide(connectTarget: target, table: Self.table, otherHosts: .tunnel, egress: egress) }
        #expect(decide("pypi.org:443") == .tunnel(host: "pypi.org", port: 443))
        #expect(Self.isRefusal(decide("pypi.org:8443"), saying: "port 443 only"))
    }

    @Test func tunnelHostsAllowOnlyTheirNamesSuffixesAndPorts() throws {
        let egress = try Self.egress(tunnelHosts: ["pypi.org", "*.githubusercontent.com", "registry.test:8443", "*.pkg.test:9000"])
        let decide = { (target: String) in ForwardProxyRules.decide(connectTarget: target, table: Self.table, otherHosts: .tunnel, egress: egress) }
        let allowed: [(String, String, Int)] = [
            ("pypi.org:443", "pypi.org", 443), ("PyPI.org.:443", "pypi.org", 443),
            ("raw.githubusercontent.com:443", "raw.githubusercontent.com", 443),
            ("a.b.githubusercontent.com:443", "a.b.githubusercontent.com", 443),
            ("registry.test:8443", "registry.test", 8443), ("x.pkg.test:9000", "x.pkg.test", 9000),
        ]
        for (target, host, port) in allowed {
            #expect(decide(target) == .tunnel(host: host, port: port), "\(target)")
        }
        let refused = [
            "files.pythonhosted.org:443", "pypi.org:8443", "githubusercontent.com:443", "xgithubusercontent.com:443", "evilpypi.org:443",
            "pypi.org.evil.test:443", "registry.test:443", "x.pkg.test:443", "pkg.test:9000",
        ]
        for target in refused {
            #expect(Self.isRefusal(decide(target), saying: "tunnel_hosts"), "\(target)")
        }
        // The routes' own hosts are intercepted whatever the list says; an IP literal never tunnels.
        #expect(decide("api.example.com:443") == .intercept(route: 0, host: "api.example.com", port: 443))
        #expect(Self.isRefusal(decide("127.0.0.1:443"), saying: "IP address"))
        // With other_hosts: refuse the list opens nothing.
        let refusing = ForwardProxyRules.decide(connectTarget: "pypi.org:443", table: Self.table, otherHosts: .refuse, egress: egress)
        #expect(Self.isRefusal(refusing, saying: "no route"))
    }

    @Test func aTunnelIsRefusedWhenAnyResolvedAddressIsDeniedOrThereIsNone() throws {
        let egress = try Self.egress()
        let good: [UInt8] = [93, 184, 215, 14]
        let goodV6 = try #require(IPAddressText.parse("2606:2800:21f:cb07:6820:80da:af6b:8b2c"))
        #expect(ForwardProxyRules.tunnelRefusal(resolved: [good], egress: egress) == nil)
        #expect(ForwardProxyRules.tunnelRefusal(resolved: [good, goodV6], egress: egress) == nil)
        #expect(ForwardProxyRules.tunnelRefusal(resolved: [], egress: egress) == .noAddress)
        let metadata: [UInt8] = [169, 254, 169, 254]
        let refusal = ForwardProxyRules.tunnelRefusal(resolved: [good, metadata], egress: egress)
        #expect(refusal == .deniedAddress(address: metadata, block: try AddressBlock("169.254.0.0/16")))
        #expect(refusal?.auditReason == "deny_address")
        #expect(refusal?.error.code == "forbidden_target" && refusal?.error.status == 403)
        #expect(refusal?.error.message.contains("169.254") == false, "the answer names no address")
        let mapped = try #require(IPAddressText.parse("::ffff:127.0.0.1"))
        #expect(ForwardProxyRules.tunnelRefusal(resolved: [goodV6, mapped], egress: egress) != nil)
        #expect(ForwardProxyRules.tunnelRefusal(resolved: [good, [1, 2, 3]], egress: egress) != nil)
        // `deny_addresses: []` allows every address; a list of its own denies only its blocks.
        let open = try Self.egress(deny: [])
        #expect(ForwardProxyRules.tunnelRefusal(resolved: [metadata, mapped, [10, 0, 0, 1]], egress: open) == nil)
        let own = try Self.egress(deny: ["203.0.113.0/24"])
        #expect(ForwardProxyRules.tunnelRefusal(resolved: [[10, 0, 0, 1]], egress: own) == nil)
        #expect(ForwardProxyRules.tunnelRefusal(resolved: [good, [203, 0, 113, 9]], egress: own) != nil)
    }
}
