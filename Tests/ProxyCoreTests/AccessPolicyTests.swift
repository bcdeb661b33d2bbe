import Config
import HTTP1
import Testing

@testable import ProxyCore

/// The head-only checks (CONTRACT points 7, 9 and 10), no sockets: the Host allow-list and the
/// target's parsing, fast path and full path alike.
@Suite struct AccessPolicyTests {
    static func policy(_ extra: String = "") throws -> AccessPolicy {
        let yaml = """
            listen: 127.0.0.1:8080
            upstream: http://127.0.0.1:9000
            credentials:
              type: static
              token_env: ACCESS_TEST_TOKEN
            \(extra)
            """
        let c = try ConfigurationLoader.parse(yaml: yaml, baseDirectory: "/", environment: ["ACCESS_TEST_TOKEN": "t"]).configuration
        return AccessPolicy(configuration: c.selecting(route: 0))
    }

    static func head(_ target: String, host: String? = "127.0.0.1:8080", method: String = "GET") -> RequestHead {
        RequestHead(
            method: method, target: target, version: .http1_1, fields: host.map { [HTTPField(name: "Host", value: $0)] } ?? [],
            framing: .none, keepAlive: true, expectContinue: false, connectionOptions: [])
    }

    @Test func theDefaultHostsAreAllowedWithAnyPortAndCase() throws {
        let policy = try Self.policy()
        for host in ["localhost", "LocalHost:8080", "127.0.0.1", "127.0.0.1:80", "[::1]", "[::1]:8080", "127.0.0.1:"] {
            #expect(policy.hostAllowed(host), "\(host)")
        }
        for host in ["", "localhos", "localhostx", "127.0.0.12", "127.0.0.1.evil.com", "[::2]", "::1", "[::1", "evil.com:80"] {
            #expect(!policy.hostAllowed(host), "\(host)")
        }
    }

    /// The remembered last allowed value answers only for the very same bytes.
    @Test func theRememberedHostAllowsOnlyItsOwnBytes() throws {
        let policy = try Self.policy()
        let sequence: [(String, Bool)] = [
            ("127.0.0.1:8080", true), ("127.0.0.1:8080", true), ("127.0.0.2:8080", false), ("127.0.0.1:8080", true),
            ("127.0.0.1:9090", true), ("evil.example:80", false), ("127.0.0.1:9090", true), ("127.0.0.1:909", true),
            ("", false), ("localhost", true), ("localhosu", false), ("LOCALHOST", true), ("localhosT", true),
            ("LOCALHOSS", false), ("[::1]:1", true), ("[::2]:1", false), ("[::1]:1", true), ("127.0.0.1:909", true),
        ]
        for (host, allowed) in sequence {
            #expect(policy.hostAllowed(host) == allowed, "\(host)")
            #expect(policy.check(Self.head("/x", host: host)).error == (allowed ? nil : .forbiddenHost), "\(host)")
        }
    }

    /// A name with a trailing dot is the same name (RFC 1034 §3.1; issue 39 point 20): `localhost.`
    /// and a route's `api.example.test.` are allowed, two dots or a lone dot are not.
    @Test func aHostWithATrailingDotIsTheSameName() throws {
        let policy = try Self.policy("access: {allow_hosts: [a.test]}")
        for host in ["a.test.", "A.TEST.:8080"] {
            #expect(policy.hostAllowed(host), "\(host)")
        }
        for host in ["a.test..", ".", ".:80", "a.tes."] {
            #expect(!policy.hostAllowed(host), "\(host)")
        }
        let defaults = try Self.policy()
        #expect(defaults.hostAllowed("localhost.:8080"))
    }

    @Test func everyNameOfAnAllowListIsFoundWhateverItsLength() throws {
        let policy = try Self.policy("access: {allow_hosts: [a.test, Longer.Example.org, \"[FE80::1]\", b]}")
        for host in ["A.TEST:1", "a.test", "longer.example.org", "LONGER.EXAMPLE.ORG:443", "[fe80::1]:8080", "[FE80::1]", "b", "B:2"] {
            #expect(policy.hostAllowed(host), "\(host)")
        }
        for host in ["localhost", "127.0.0.1", "a.tes", "a.testx", "longer.example.co", "xonger.example.org", "[fe80::2]", "c", "bb"] {
            #expect(!policy.hostAllowed(host), "\(host)")
        }
        #expect(policy.check(Self.head("/x", host: "Longer.example.org")).isSuccess)
        #expect(policy.check(Self.head("/x", host: "evil.example.org")).error == .forbiddenHost)
    }

    @Test func aHostRouteAllowsItsNamesAndSuffixes() throws {
        let yaml = """
            listen: 127.0.0.1:8080
            routes:
              - name: wild
                match: {host: ["*.example.com", "api.test:8443"]}
                upstream: https://wild.example.net
                credentials: {type: static, token_env: ACCESS_TEST_TOKEN}
            """
        let c = try ConfigurationLoader.parse(yaml: yaml, baseDirectory: "/", environment: ["ACCESS_TEST_TOKEN": "t"]).configuration
        let policy = AccessPolicy(configuration: c.selecting(route: 0))
        for host in ["x.example.com", "A.B.Example.COM:443", "api.test", "API.TEST:8443", "localhost"] {
            #expect(policy.hostAllowed(host), "\(host)")
        }
        for host in ["example.com", ".example.com", "xexample.com", "example.com.evil", "api.tes"] {
            #expect(!policy.hostAllowed(host), "\(host)")
        }
    }

    /// What `AccessPolicy.parse` must give: the full parse and dot-segment removal, or nil for a 400.
    static func fullParse(_ target: String) -> (path: String, query: String?)? {
        guard case .origin(let path, let query)? = RequestTarget.parse(target), let normal = removeDotSegments(path) else { return nil }
        return (normal, query)
    }

    @Test(arguments: [
        "/", "/small", "//h/a", "/a/b/c", "/a-b_c~d!$&'()*+,;=:@", "/a?", "/a?b", "/a?b.c", "/a.b", "/a/./b", "/a/../b",
        "/a/%2e%2e/b", "/a%2Fb", "/a%41", "/.", "/..", "/../x", "/a/%2E%2e/../..", "/a#f", "/a%zz", "/a%2",
    ])
    func originFormTargetsParseAsTheFullParserSays(_ target: String) throws {
        let policy = try Self.policy()
        let result = policy.check(Self.head(target))
        if let (path, query) = Self.fullParse(target) {
            guard case .success(let checked) = result else {
                Issue.record("\(target): \(result)")
                return
            }
            #expect(checked.path == path)
            #expect(checked.query == query)
            #expect(checked.authority == nil)
        } else {
            guard case .failure(.badRequest) = result else {
                Issue.record("\(target): \(result)")
                return
            }
        }
    }

    @Test func theFastPathTakesOnlyPlainPaths() {
        for target in ["/", "/small", "//h/a", "/a/b-c_d~e", "/a:b@c;d=e,f!g$h&i'j(k)l*m+n"] {
            #expect(RequestTarget.isPlainPath(target), "\(target)")
        }
        // A query, a fragment, a percent sign, a dot, another form, a byte a target may not hold.
        for target in ["", "*", "a/b", "http://h/", "/a?", "/a?b", "/a#f", "/a%41", "/a.b", "/.", "/a b", "/a\u{7F}", "/caf\u{E9}", "/a\t"] {
            #expect(!RequestTarget.isPlainPath(target), "\(target)")
        }
    }

    @Test func connectAndOtherFormsAreRefusedBeforeTheFastPath() throws {
        let policy = try Self.policy()
        #expect(policy.check(Self.head("/x", method: "CONNECT")).error == .methodNotAllowed)
        #expect(policy.check(Self.head("example.com:443", method: "CONNECT")).error == .methodNotAllowed)
        // Methods are case-sensitive (RFC 9110 §9.1): only CONNECT itself is refused.
        for method in ["connect", "CONNECX", "CONNECTS", "CONNEC", "GET"] {
            #expect(policy.check(Self.head("/x", method: method)).isSuccess, "\(method)")
            #expect(!AccessPolicy.isConnect(method), "\(method)")
        }
        #expect(AccessPolicy.isConnect("CONNECT"))
        guard case .failure(.badRequest) = policy.check(Self.head("*", method: "OPTIONS")) else {
            Issue.record("OPTIONS * was not refused")
            return
        }
    }
}

extension Result {
    var isSuccess: Bool {
        if case .success = self { return true }
        return false
    }
}

extension Result where Failure == ProxyError {
    var error: ProxyError? {
        if case .failure(let error) = self { return error }
        return nil
    }
}
