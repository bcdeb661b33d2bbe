import Basics
import HTTP1
import Testing

@Suite struct RemoveDotSegmentsTests {
    @Test(arguments: [
        // RFC 3986 §5.2.4 and §5.4 examples, as absolute paths.
        ("/a/b/c/./../../g", "/a/g"),
        ("/b/c/./g", "/b/c/g"),
        ("/b/c/.", "/b/c/"),
        ("/b/c/./", "/b/c/"),
        ("/b/c/..", "/b/"),
        ("/b/c/../", "/b/"),
        ("/b/c/../g", "/b/g"),
        ("/b/c/../..", "/"),
        ("/b/c/../../", "/"),
        ("/b/c/../../g", "/g"),
        ("/b/c/g.", "/b/c/g."),
        ("/b/c/.g", "/b/c/.g"),
        ("/b/c/g..", "/b/c/g.."),
        ("/b/c/..g", "/b/c/..g"),
        ("/b/c/./../g", "/b/g"),
        ("/b/c/./g/.", "/b/c/g/"),
        ("/b/c/g/./h", "/b/c/g/h"),
        ("/b/c/g/../h", "/b/c/h"),
        ("/mid/content=5/../6", "/mid/6"),
        // Unchanged paths come back byte for byte.
        ("/", "/"),
        ("/users/42", "/users/42"),
        ("/a//b/", "/a//b/"),
        ("/a%2Fb/%41", "/a%2Fb/%41"),
        ("/...", "/..."),
        ("/a/...b", "/a/...b"),
        ("/.", "/"),
        ("/a/..", "/"),
        ("/a//../b", "/a/b"),
        // Percent-encoded dots are dots.
        ("/a/%2e/b", "/a/b"),
        ("/a/%2E%2e/b", "/b"),
        ("/a/.%2E/b", "/b"),
        ("/a/%2e./b", "/b"),
        ("/a/%2e%2e%2e/b", "/a/%2e%2e%2e/b"),
        ("/a/%2f/b", "/a/%2f/b"),
        ("/a/%2", "/a/%2"),
        ("/a/%2ex", "/a/%2ex"),
    ])
    func dotSegmentsAreRemoved(_ input: String, _ expected: String) {
        #expect(removeDotSegments(input) == expected)
    }

    @Test(arguments: [
        "/..", "/../", "/../x", "/a/../../b", "/./../x", "/%2e%2e/secret", "/%2E%2E", "/a/%2e%2e/..", "/.%2e/x",
        "/a/b/../../..", "//../..",
    ])
    func pathsThatClimbAboveTheRootAreRefused(_ input: String) {
        #expect(removeDotSegments(input) == nil)
    }

    /// nginx decodes `%2F` (and many servers `%5C` and a backslash) before it resolves dot-segments: a `..`
    /// set apart by one is refused, a `.` or a `..` inside a longer name is not.
    @Test(arguments: [
        "/..%2Fadmin", "/a/..%2F..%2Fadmin", "/%2e%2e%2fadmin", "/a/x%2F..", "/a/..%5Cb", "/a/..\\b", "/a/b%2F%2E%2E%2Fc",
    ])
    func aDotDotBehindAnEncodedSlashIsRefused(_ input: String) {
        #expect(removeDotSegments(input) == nil)
    }

    @Test(arguments: ["/a%2Fb", "/a/.%2Fb", "/a/...%2Fb", "/a/x..%2Fb", "/a%5Cb", "/a/%2F"])
    func anEncodedSlashWithoutADotDotIsKept(_ input: String) {
        #expect(removeDotSegments(input) == input)
    }

    @Test(arguments: ["", "a/b", "../a", "*", "http://h/"])
    func pathsMustStartWithASlash(_ input: String) {
        #expect(removeDotSegments(input) == nil)
    }
}

@Suite struct RequestTargetTests {
    @Test(arguments: [
        ("/", RequestTarget.origin(path: "/", query: nil)),
        ("/users/1?x=1&y=%20", .origin(path: "/users/1", query: "x=1&y=%20")),
        ("/a?", .origin(path: "/a", query: "")),
        ("/a?b?c/d", .origin(path: "/a", query: "b?c/d")),
        ("/../x", .origin(path: "/../x", query: nil)),
        ("//h/a", .origin(path: "//h/a", query: nil)),
        ("*", .asterisk),
        ("http://example.com/a?b", .absolute(scheme: "http", host: "example.com", port: nil, path: "/a", query: "b")),
        ("HTTPS://Example.COM:8443", .absolute(scheme: "https", host: "example.com", port: 8443, path: "/", query: nil)),
        ("http://h:/p", .absolute(scheme: "http", host: "h", port: nil, path: "/p", query: nil)),
        ("http://h?q", .absolute(scheme: "http", host: "h", port: nil, path: "/", query: "q")),
        ("http://[::1]:8080/x", .absolute(scheme: "http", host: "::1", port: 8080, path: "/x", query: nil)),
        ("http://[FE80::1]/", .absolute(scheme: "http", host: "fe80::1", port: nil, path: "/", query: nil)),
        ("http://127.0.0.1:0/", .absolute(scheme: "http", host: "127.0.0.1", port: 0, path: "/", query: nil)),
        ("example.com:443", .authority(host: "example.com", port: 443)),
        ("[::1]:443", .authority(host: "::1", port: 443)),
        ("Example.com:65535", .authority(host: "example.com", port: 65535)),
    ])
    func targetsAreParsedIntoTheirForm(_ input: String, _ expected: RequestTarget) {
        #expect(RequestTarget.parse(input) == expected)
    }

    @Test(arguments: [
        "", "a", "**", "/a#frag", "/a?b#c", "/a%zz", "/a%2", "/a b", "/a\u{7F}", "/caf\u{E9}",
        "http://user@host/", "http://user:pw@host/", "http:///path", "http://:80/", "http://h:99999/",
        "http://h:8x/", "http://[::1/", "http://[zz]/", "http://h/a#f", "http://ho st/",
        "example.com", "example.com:", "example.com:http", ":443", "example.com:70000", "[::1]",
        "user@example.com:443",
    ])
    func malformedTargetsAreRefused(_ input: String) {
        #expect(RequestTarget.parse(input) == nil)
    }
}

@Suite struct HeaderRulesTests {
    @Test(arguments: [
        "Connection", "connection", "KEEP-ALIVE", "Proxy-Connection", "Proxy-Authenticate", "proxy-authorization",
        "TE", "Trailer", "Transfer-Encoding", "Upgrade",
    ])
    func theFixedHopByHopNamesAreRecognised(_ name: String) {
        #expect(HopByHop.isHopByHop(name, connectionOptions: []))
    }

    @Test(arguments: ["Host", "Authorization", "Content-Length", "Trailers", "T", "Upgrade-Insecure-Requests", "X-TE", ""])
    func endToEndNamesAreNotHopByHop(_ name: String) {
        #expect(!HopByHop.isHopByHop(name, connectionOptions: []))
    }

    @Test func namesListedInConnectionAreHopByHop() {
        #expect(HopByHop.isHopByHop("X-Session", connectionOptions: ["x-session", "close"]))
        #expect(!HopByHop.isHopByHop("X-Other", connectionOptions: ["x-session"]))
    }

    @Test func caseInsensitiveEqualityFoldsAsciiOnly() {
        #expect(asciiCaseInsensitiveEquals("Content-Length", "content-length"))
        #expect(asciiCaseInsensitiveEquals("", ""))
        #expect(!asciiCaseInsensitiveEquals("Content-Length", "content-lengt"))
        #expect(!asciiCaseInsensitiveEquals("a", "b"))
        #expect(!asciiCaseInsensitiveEquals("[", "{"))  // 0x5B | 0x20 == 0x7B, but neither is a letter
        #expect(!asciiCaseInsensitiveEquals("É", "é"))
    }

    @Test func fieldNamesMustBeTokens() {
        #expect(isValidFieldName("X-Custom_Header.1~!#$%&'*+^`|"))
        #expect(!isValidFieldName(""))
        #expect(!isValidFieldName("X Header"))
        #expect(!isValidFieldName("X:"))
        #expect(!isValidFieldName("X\r\nY"))
        #expect(!isValidFieldName("é"))
    }

    @Test func fieldValuesMayNotHoldControlBytes() {
        #expect(isValidFieldValue("Bearer abc.def"))
        #expect(isValidFieldValue("tab\there, café"))
        #expect(isValidFieldValue(""))
        #expect(!isValidFieldValue("a\r\nInjected: 1"))
        #expect(!isValidFieldValue("a\nb"))
        #expect(!isValidFieldValue("a\u{0}"))
        #expect(!isValidFieldValue("a\u{7F}"))
    }
}
