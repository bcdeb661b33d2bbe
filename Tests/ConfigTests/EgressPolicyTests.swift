import Basics
import Testing

@testable import Config

/// `forward_proxy.tunnel_hosts` and `forward_proxy.deny_addresses` (CONTRACT.md "Programs in a
/// sandbox", "Egress policy"): what the file says, the default list, and the errors `check` prints.
@Suite struct EgressPolicyTests {
    static func forwardProxy(_ lines: String) throws -> LoadedConfiguration {
        try parse(minimalYAML + "\nforward_proxy:\n  other_hosts: tunnel\n" + lines)
    }

    static func address(_ text: String) -> [UInt8] { IPAddressText.parse(text)! }

    @Test func theDefaultListDeniesWhatTheContractNames() throws {
        let policy = try #require(try Self.forwardProxy("").configuration.forwardProxy).egress
        #expect(policy.tunnelHosts == nil)
        let denied = [
            "0.0.0.0", "10.1.2.3", "100.64.0.1", "127.0.0.1", "127.255.255.254", "169.254.169.254", "172.16.0.1", "172.31.255.255",
            "192.0.0.1", "192.168.1.1", "198.18.0.1", "198.19.255.255", "224.0.0.1", "239.255.255.250", "255.255.255.255", "::", "::1",
            "fc00::1", "fd12:3456::1", "fe80::1", "ff02::1", "fd00:ec2::254",
            // IPv4-mapped, IPv4-compatible and NAT64 addresses by the IPv4 address they carry.
            "::ffff:127.0.0.1", "::ffff:10.0.0.1", "::ffff:169.254.169.254", "::127.0.0.1", "64:ff9b::127.0.0.1", "64:ff9b::a9fe:a9fe",
        ]
        for text in denied {
            #expect(policy.deniedBlock(Self.address(text)) != nil, "\(text)")
        }
        let allowed = [
            "8.8.8.8", "1.1.1.1", "93.184.215.14", "100.63.255.255", "100.128.0.0", "172.15.255.255", "172.32.0.0", "192.0.1.1",
            "192.169.0.1", "198.17.255.255", "198.20.0.0", "223.255.255.255", "9.255.255.255", "11.0.0.0", "2001:4860:4860::8888",
            "fec0::1", "fe7f::1", "fbff::1", "fe00::1", "::ffff:8.8.8.8", "64:ff9b::8.8.8.8", "::8.8.8.8",
            "::ffff:0:127.0.0.1",
        ]
        for text in allowed {
            #expect(policy.deniedBlock(Self.address(text)) == nil, "\(text)")
        }
        #expect(policy.deniedBlock([1, 2, 3]) != nil, "an address of another length")
    }

    @Test func aListReplacesTheDefaultAndAnEmptyOneAllowsAll() throws {
        let own = try #require(try Self.forwardProxy("  deny_addresses: [203.0.113.0/24, \"2001:db8::/32\"]").configuration.forwardProxy).egress
        #expect(own.denyAddresses.map(\.description) == ["203.0.113.0/24", "2001:db8::/32"])
        #expect(own.deniedBlock(Self.address("203.0.113.5")) != nil)
        #expect(own.deniedBlock(Self.address("::ffff:203.0.113.5")) != nil, "mapped, by its IPv4 address")
        #expect(own.deniedBlock(Self.address("2001:db8::1")) != nil)
        #expect(own.deniedBlock(Self.address("127.0.0.1")) == nil)
        let none = try #require(try Self.forwardProxy("  deny_addresses: []").configuration.forwardProxy).egress
        #expect(none.denyAddresses.isEmpty)
        #expect(none.deniedBlock(Self.address("169.254.169.254")) == nil)
        let spelled = try #require(try Self.forwardProxy("  deny_addresses: default").configuration.forwardProxy).egress
        #expect(spelled.denyAddresses == EgressPolicy.defaultDenyAddresses)
    }

    @Test func tunnelHostsAreReadLowercasedWithTheirPorts() throws {
        let loaded = try Self.forwardProxy("  tunnel_hosts: [PyPI.org, \"*.githubusercontent.com\", \"registry.test.:8443\"]")
        let hosts = try #require(loaded.configuration.forwardProxy?.egress.tunnelHosts)
        #expect(hosts.map(\.description) == ["pypi.org", "*.githubusercontent.com", "registry.test:8443"])
        let described = loaded.configuration.resolvedDescription()
        #expect(described.contains("forward_proxy.tunnel_hosts: [pypi.org, *.githubusercontent.com, registry.test:8443]"), "\(described)")
        #expect(described.contains("forward_proxy.deny_addresses: default (0.0.0.0/8, 10.0.0.0/8"), "\(described)")
        // Without other_hosts: tunnel the list opens nothing, and the file says so.
        let refusing = try parse(minimalYAML + "\nforward_proxy:\n  tunnel_hosts: [pypi.org]")
        #expect(refusing.warnings.contains { $0.contains("tunnel_hosts") && $0.contains("other_hosts: tunnel") }, "\(refusing.warnings)")
    }

    @Test func everyBadEntryIsAnErrorNamingItsKey() throws {
        let yaml =
            minimalYAML
                + """

                forward_proxy:
                  other_hosts: tunnel
                  tunnel_hosts: [pypi.org, "bad host", "10.0.0.1", "x.test:0", "x.test:99999", "*", "-a.test", "ok.test:443", "y.test:+443", "z.test:0443"]
                  deny_addresses: [10.0.0.0/8, 10.0.0.1/8, "fc00::/200", example.com]
                """
        let error = try #require(parseError(yaml))
        let reasons = Dictionary(error.all.map { ($0.keyPath, $0.reason) }, uniquingKeysWith: { a, _ in a })
        #expect(
            Set(reasons.keys).isSuperset(of: [
                "forward_proxy.tunnel_hosts[1]", "forward_proxy.tunnel_hosts[2]", "forward_proxy.tunnel_hosts[3]", "forward_proxy.tunnel_hosts[4]",
                "forward_proxy.tunnel_hosts[5]", "forward_proxy.tunnel_hosts[6]", "forward_proxy.tunnel_hosts[8]", "forward_proxy.tunnel_hosts[9]",
                "forward_proxy.deny_addresses[1]",
                "forward_proxy.deny_addresses[2]", "forward_proxy.deny_addresses[3]",
            ]), "\(reasons)")
        #expect(reasons["forward_proxy.tunnel_hosts[0]"] == nil && reasons["forward_proxy.tunnel_hosts[7]"] == nil)
        #expect(reasons["forward_proxy.tunnel_hosts[2]"]?.contains("IP address") == true)
        #expect(reasons["forward_proxy.deny_addresses[1]"]?.contains("did you mean 10.0.0.0/8") == true)
        let scalar = try #require(parseError(minimalYAML + "\nforward_proxy:\n  deny_addresses: none"))
        #expect(scalar.all.contains { $0.keyPath == "forward_proxy.deny_addresses" && $0.reason.contains("default or a list") }, "\(scalar)")
    }
}
