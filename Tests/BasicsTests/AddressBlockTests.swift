import Testing

@testable import Basics

/// CIDR blocks and IP address text (docs/FORWARD-PROXY.md "Where a tunnel may go"): parsing,
/// refusals, RFC 5952 text, and matching at the edges of each prefix.
@Suite struct AddressBlockTests {
    /// The bytes of an address the test writes correctly.
    static func address(_ text: String) -> [UInt8] { IPAddressText.parse(text)! }

    @Test(
        arguments: [
            ("10.0.0.1", [10, 0, 0, 1]), ("0.0.0.0", [0, 0, 0, 0]), ("255.255.255.255", [255, 255, 255, 255]),
            ("::", [UInt8](repeating: 0, count: 16)), ("::1", [UInt8](repeating: 0, count: 15) + [1]),
            ("fd00:ec2::254", [0xFD, 0, 0x0E, 0xC2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x02, 0x54]),
            ("::ffff:127.0.0.1", [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF, 127, 0, 0, 1]),
            ("64:ff9b::169.254.169.254", [0, 0x64, 0xFF, 0x9B, 0, 0, 0, 0, 0, 0, 0, 0, 169, 254, 169, 254]),
            ("FE80:0:0:0:0:0:0:1", [0xFE, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]),
            ("1:2:3:4:5:6:7::", [0, 1, 0, 2, 0, 3, 0, 4, 0, 5, 0, 6, 0, 7, 0, 0]),
            ("::2:3:4:5:6:7:8", [0, 0, 0, 2, 0, 3, 0, 4, 0, 5, 0, 6, 0, 7, 0, 8]),
        ] as [(String, [UInt8])])
    func addressesParse(text: String, bytes: [UInt8]) {
        #expect(IPAddressText.parse(text) == bytes, "\(text)")
    }

    @Test(arguments: [
        "", "1.2.3", "1.2.3.4.5", "256.0.0.1", "01.2.3.4", "1.2.3.-4", "a.b.c.d", " 1.2.3.4", "1::2::3", ":::", "1:2:3:4:5:6:7:8:9",
        "1:2:3:4:5:6:7", "12345::", "g::1", "::1%eth0", "1.2.3.4::", "::1.2.3", ":1::2", "1::2:", "fe80::1/64",
    ])
    func garbageIsNoAddress(text: String) {
        #expect(IPAddressText.parse(text) == nil, "\(text)")
    }

    @Test func addressesAreWrittenAsRFC5952Says() {
        let cases = [
            ("fd00:0ec2:0:0:0:0:0:254", "fd00:ec2::254"), ("0:0:0:0:0:0:0:1", "::1"), ("1:0:0:2:0:0:0:3", "1:0:0:2::3"),
            ("1:0:2:3:4:5:6:7", "1:0:2:3:4:5:6:7"), ("1:0:0:2:3:0:0:4", "1::2:3:0:0:4"), ("::", "::"), ("10.0.0.1", "10.0.0.1"),
        ]
        for (text, written) in cases {
            #expect(IPAddressText.parse(text).map(IPAddressText.format) == written, "\(text)")
        }
    }

    @Test func aBlockHoldsExactlyTheAddressesOfItsPrefix() throws {
        let ten = try AddressBlock("10.0.0.0/8")
        #expect(ten.contains([10, 0, 0, 0]) && ten.contains([10, 255, 255, 255]))
        #expect(!ten.contains([9, 255, 255, 255]) && !ten.contains([11, 0, 0, 0]))
        let shared = try AddressBlock("100.64.0.0/10")
        #expect(shared.contains([100, 64, 0, 0]) && shared.contains([100, 127, 255, 255]))
        #expect(!shared.contains([100, 63, 255, 255]) && !shared.contains([100, 128, 0, 0]))
        let ula = try AddressBlock("fc00::/7")
        #expect(ula.contains(Self.address("fc00::")) && ula.contains(Self.address("fdff:ffff::1")))
        #expect(!ula.contains(Self.address("fe00::")) && !ula.contains(Self.address("fbff::1")))
        let linkLocal = try AddressBlock("fe80::/10")
        #expect(linkLocal.contains(Self.address("febf:ffff::1")))
        #expect(!linkLocal.contains(Self.address("fec0::1")))
        // One address is its own /32 or /128; /0 holds every address of its family and no other.
        let one = try AddressBlock("fd00:ec2::254")
        #expect(one.prefixLength == 128 && one.description == "fd00:ec2::254/128")
        #expect(!one.contains(Self.address("fd00:ec2::255")))
        #expect(try AddressBlock("192.0.2.7").prefixLength == 32)
        let all4 = try AddressBlock("0.0.0.0/0")
        #expect(all4.contains([255, 1, 2, 3]) && !all4.contains([UInt8](repeating: 0, count: 16)))
        #expect(!ten.contains([10, 0, 0]) && !ten.contains(Self.address("::ffff:10.0.0.1")), "another family is never held")
    }

    @Test func badBlocksSayWhy() {
        func reason(_ text: String) -> String {
            do {
                _ = try AddressBlock(text)
                return "accepted"
            } catch {
                return error.description
            }
        }
        #expect(reason("10.0.0.1/8").contains("did you mean 10.0.0.0/8"))
        #expect(reason("fc00::1/7").contains("did you mean fc00::/7"))
        #expect(reason("10.0.0.0/33").contains("0 to 32"))
        #expect(reason("::/129").contains("0 to 128"))
        #expect(reason("10.0.0.0/").contains("prefix"))
        #expect(reason("10.0.0.0/+8").contains("prefix"))
        #expect(reason("example.com/8").contains("not an IPv4 or IPv6 address"))
        #expect(reason("10.0.0.0/8/8").contains("prefix"))
    }
}
