import Basics
import Testing

/// The one authority parser (RFC 3986 §3.2.2, §3.2.3), with the spellings its callers' own tests
/// use: listen addresses, upstream and identity-provider URLs, Redis URLs and sentinels, proxy
/// variables, the container-credentials URI, request targets, CONNECT targets and Host fields.
@Suite struct AuthorityParsingTests {
    static let optional = Authority.PortRule(required: false)
    static let required = Authority.PortRule(required: true)

    /// `host port` or the problem, for short expectations.
    static func read(_ text: String, _ rule: Authority.PortRule = optional, host: Authority.HostRule = .any) -> String {
        do {
            let parts = try Authority.parts(of: text, port: rule, host: host)
            return parts.port.map { "\(parts.host) \($0)" } ?? parts.host
        } catch {
            return "\(error)"
        }
    }

    @Test func aHostAndAnOptionalPortAreReadWithTheHostLowercased() {
        #expect(Self.read("127.0.0.1:8080") == "127.0.0.1 8080")
        #expect(Self.read("Example.COM:65535") == "example.com 65535")
        #expect(Self.read("proxy.example") == "proxy.example")
        #expect(Self.read("localhost.:8080") == "localhost. 8080", "the trailing dot stays for the caller to drop")
        #expect(Self.read("h:0443") == "h 443", "RFC 3986 §3.2.3 allows leading zeros")
    }

    @Test func anIPv6LiteralGoesInBracketsAndComesOutWithout() throws {
        #expect(Self.read("[::1]:26380") == "::1 26380")
        #expect(Self.read("[FE80::1]") == "fe80::1")
        #expect(Self.read("[::ffff:127.0.0.1]") == "::ffff:127.0.0.1")
        let parts = try Authority.parts(of: "[::1]:443", port: Self.required)
        #expect(parts == Authority.Parts(host: "::1", port: 443, isIPv6Literal: true))
        #expect(try !Authority.parts(of: "a.example:443", port: Self.required).isIPv6Literal)
    }

    @Test func eachRefusalSaysWhy() {
        let cases: [(String, Authority.Problem)] = [
            ("", .noHost), (":8080", .noHost), ("[::1", .unclosedBracket), ("[zz]", .notIPv6InBrackets),
            ("[example.com]:80", .notIPv6InBrackets), ("[]:80", .notIPv6InBrackets), ("[fd00:ec2::23%25eth0]", .notIPv6InBrackets),
            ("[::1]x", .textAfterBracket), ("[::1]8080", .textAfterBracket), ("::1:8080", .ipv6WithoutBrackets), ("a:b:443", .ipv6WithoutBrackets),
            ("h:99999", .badPort), ("h:65536", .badPort), ("h:100000", .badPort), ("h:8x", .badPort), ("h:+80", .badPort), ("h:-1", .badPort),
            ("h: 80", .badPort), ("h:", .badPort), ("h:0", .badPort),
        ]
        for (text, problem) in cases {
            #expect(Self.read(text) == "\(problem)", "\(text)")
        }
    }

    @Test func thePortRuleIsTheCallers() {
        #expect(Self.read("127.0.0.1", Self.required) == "\(Authority.Problem.missingPort)")
        #expect(Self.read("[::1]", Self.required) == "\(Authority.Problem.missingPort)")
        #expect(Self.read("127.0.0.1:0", .init(required: true, lowest: 0)) == "127.0.0.1 0", "a listener on a port the system picks")
        #expect(Self.read("h:", .init(required: false, emptyIsDefault: true)) == "h", "an empty port is the default (RFC 3986 §3.2.3)")
        #expect(Self.read("h:", .init(required: true, emptyIsDefault: true)) == "\(Authority.Problem.missingPort)")
        #expect(Self.read("h:0443", .init(required: false, allowsLeadingZero: false)) == "\(Authority.Problem.badPort)")
    }

    @Test func aRegNameHostRefusesUserInformationAndSpaces() {
        #expect(Self.read("user@host", host: .regName) == "\(Authority.Problem.hostByte)")
        #expect(Self.read("ho st", host: .regName) == "\(Authority.Problem.hostByte)")
        #expect(Self.read("a-b_c.~%41!$&'()*+,;=:80", host: .regName) == "a-b_c.~%41!$&'()*+,;= 80")
        #expect(Self.read("user@host") == "user@host", "with .any the caller checks the name")
    }

    @Test func aPortIsOneToFiveDigitsInTheRulesRange() {
        let strict = Authority.PortRule(required: false, allowsLeadingZero: false)
        let cases: [(String, Int?)] = [
            ("1", 1), ("443", 443), ("65535", 65535), ("65536", nil), ("99999", nil), ("100000", nil), ("0", nil), ("0443", nil), ("", nil),
            ("+443", nil), ("443 ", nil), ("0x1bb", nil),
        ]
        for (digits, port) in cases {
            #expect(Authority.port(Array(digits.utf8), rule: strict) == port, "\(digits)")
        }
        #expect(Authority.port(Array("0".utf8), rule: .init(required: false, lowest: 0)) == 0)
    }

    @Test func theSpanPointsIntoTheBytesAsGiven() throws {
        let bytes = Array("[::1]:8443".utf8)
        let span = try Authority.parse(bytes, port: Self.optional).get()
        #expect(span.host == 1..<4)
        #expect(span.isIPv6Literal && span.port == 8443)
        let name = Array("API.example.com.:443".utf8)
        let named = try Authority.parse(name, port: Self.optional).get()
        #expect(String(decoding: withoutTrailingDot(name[named.host]), as: UTF8.self) == "API.example.com")
    }
}

@Suite struct URLSchemeTests {
    @Test func aSchemeIsReadASCIICaseAside() {
        #expect(URLScheme("HTTPS") == .https)
        #expect(URLScheme("Rediss") == .rediss)
        #expect(URLScheme("socks5h") == nil)
        #expect(URLScheme("") == nil)
    }

    @Test func eachSchemeKnowsItsDefaultPortAndWhetherItIsTLS() {
        #expect(URLScheme.allCases.map(\.defaultPort) == [80, 443, 6379, 6379])
        #expect(URLScheme.allCases.map(\.isTLS) == [false, true, false, true])
    }

    @Test func aURLSplitsAtItsFirstSchemeSeparator() throws {
        let split = try #require(URLScheme.split("redis://h:1/0?x=a://b"))
        #expect(split.scheme == "redis" && split.rest == "h:1/0?x=a://b")
        #expect(URLScheme.split("127.0.0.1:3128") == nil)
    }
}
