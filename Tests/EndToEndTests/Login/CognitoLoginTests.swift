import Foundation
import TestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// `tokenproxy login` with Cognito SRP and the challenges after it, against cognito_srp.py: a test
/// pool that verifies SRP and the MFA codes for real (itself checked against pycognito's client in
/// the first test). What the pool counted is what the tests assert.
@Suite("Cognito SRP login and challenges, end to end", .tags(.endToEnd), .timeLimit(.minutes(35)))
struct CognitoLoginTests {
    static let password = "Pass-word-1"
    static let totpSecret = "JBSWY3DPEHPK3PXPJBSWY3DPEHPK3PXP"

    struct Pool {
        let server: PythonServer
        let dir: TempDir
        let config: String
        let configText: String

        func stats() throws -> [String: [String: Int]] {
            let json = try #require(try curl([server.baseURL + "/test/stats"]).json)
            return json["calls"] as? [String: [String: Int]] ?? [:]
        }

        func codes() throws -> [String: String] {
            try #require(try curl([server.baseURL + "/test/codes"]).json) as? [String: String] ?? [:]
        }

        var storePath: String { dir.file("state/tokens.json") }

        func store() -> [String: Any]? {
            (try? JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: storePath)))) as? [String: Any]
        }
    }

    /// One user, `ann` (pool user name `u-ann`), who signs in by e-mail.
    static func pool(
        _ user: [String: Any] = [:], serverArguments: [String] = [], clientSecret: String? = nil, login: String = "srp"
    ) throws -> Pool {
        var spec: [String: Any] = ["username": "u-ann", "email": "ann@example.com", "password": password]
        spec.merge(user) { $1 }
        let users = String(decoding: try JSONSerialization.data(withJSONObject: [spec]), as: UTF8.self)
        let secretArguments = clientSecret.map { ["--client-secret", $0] } ?? []
        let server = try PythonServer("cognito_srp", arguments: ["--users", users] + secretArguments + serverArguments)
        let dir = try TempDir(prefix: "tokenproxy-cognito-login")
        let config = """
            listen: 127.0.0.1:0
            upstream: http://127.0.0.1:9
            admin:
              listen: 127.0.0.1:0
            credentials:
              type: cognito
              login: \(login)
              user_pool_id: us-east-1_SrpPool1
              endpoint: \(server.baseURL)/
              client_id: srp-client
            \(clientSecret != nil ? "  client_secret_env: SRP_CLIENT_SECRET" : "")
            log:
              level: debug
            """
        return Pool(server: server, dir: dir, config: try dir.write("tokenproxy.yaml", config), configText: config)
    }

    static func login(_ pool: Pool, stdin: String, env: [String: String] = [:]) throws -> CommandResult {
        try ProxyProcess.run(
            args: ["login", "--config", pool.config, "--username", "ann@example.com", "--password-stdin"], env: env, stdin: stdin,
            timeout: 180)
    }

    /// `login` as a running process: answers written to its stdin when its questions appear.
    static func start(_ pool: Pool, env: [String: String] = [:]) throws -> ChildProcess {
        let child = try ChildProcess(
            RepositoryPaths.tokenproxyBinary.path,
            arguments: ["login", "--config", pool.config, "--username", "ann@example.com", "--password-stdin"],
            environment: childEnvironment(env), withStdin: true)
        child.writeStdin(Array((password + "\n").utf8))
        return child
    }

    /// Types the code the pool sent to u-ann into `child` and expects the login to end with status 0.
    static func answerWithTheCodeSent(_ pool: Pool, _ child: ChildProcess, sourceLocation: SourceLocation = #_sourceLocation) throws {
        let code = try #require(try pool.codes()["u-ann"], sourceLocation: sourceLocation)
        child.writeStdin(Array((code + "\n").utf8))
        #expect(child.wait(timeout: 120) == 0, "\(child.stderr.text)", sourceLocation: sourceLocation)
    }

    static func waitForQuestion(_ child: ChildProcess, containing text: String) -> Bool {
        child.stderr.wait(until: Date().addingTimeInterval(120)) { $0.contains(text) ? true : nil } ?? false
    }

    static func totpCode() throws -> String {
        let result = try runCommand("python3", arguments: ["-c", "import pyotp; print(pyotp.TOTP('\(totpSecret)').now())"])
        return result.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    @Test("the test pool verifies SRP as Cognito does: pycognito signs in; a wrong password, a stale TIMESTAMP, a wrong SECRET_BLOCK are refused")
    func thePoolAgreesWithPycognito() throws {
        let pool = try Self.pool()
        defer { pool.server.stop() }
        let check = try runCommand(
            "python3",
            arguments: [RepositoryPaths.servers.appendingPathComponent("check_cognito_srp.py").path, pool.server.baseURL, "ann@example.com", Self.password],
            timeout: 120)
        #expect(check.status == 0, "\(check.output)")
        let verifier = try pool.stats()["RespondToAuthChallenge:PASSWORD_VERIFIER"] ?? [:]
        #expect(verifier["ok"] == 1)
        #expect(verifier["bad_signature"] == 1)
        #expect(verifier["bad_timestamp"] == 1)
        #expect(verifier["bad_secret_block"] == 1)
    }

    @Test(
        "login: srp by e-mail with a client secret: the password never leaves, later answers carry the pool user name, the device key goes with every refresh")
    func srpLogin() throws {
        let secret = "srp-client-secret-1"
        let pool = try Self.pool(["device_tracking": true], clientSecret: secret)
        defer { pool.server.stop() }
        let env = ["SRP_CLIENT_SECRET": secret]
        let result = try Self.login(pool, stdin: Self.password + "\n", env: env)
        #expect(result.status == 0, "\(result.output)")
        #expect(result.stderr.contains("logged in as ann@example.com"), "\(result.stderr)")
        let stats = try pool.stats()
        #expect(stats["InitiateAuth:USER_SRP_AUTH"]?["challenge"] == 1)
        #expect(stats["RespondToAuthChallenge:PASSWORD_VERIFIER"] == ["ok": 1])
        let store = try #require(pool.store())
        let deviceKey = try #require(store["device_key"] as? String)
        #expect(store["username"] as? String == "u-ann")

        let proxy = try ProxyProcess(config: pool.configText, directory: pool.dir, environment: env)
        #expect(try curl(["-X", "POST", try #require(proxy.adminURL) + "/refresh"]).status == 202)
        #expect(try within(60) { try pool.stats()["InitiateAuth:REFRESH_TOKEN_AUTH"]?["ok"] == 1 }, "\(String(describing: try? pool.stats())) \(proxy.stderr)")
        let keys = try #require(try curl([pool.server.baseURL + "/test/stats"]).json?["refresh_device_keys"] as? [String])
        #expect(keys == [deviceKey])
        proxy.terminate()
        _ = try proxy.waitForExit()
        for text in [result.output, proxy.stderr] {
            #expect(!text.contains(Self.password))
            #expect(!text.contains(secret))
            #expect(!text.contains(store["refresh_token"] as? String ?? "-"))
        }
    }

    @Test("a wrong password is refused by the pool's SRP check: exit 1")
    func wrongPassword() throws {
        let pool = try Self.pool()
        defer { pool.server.stop() }
        let result = try Self.login(pool, stdin: "not-the-password\n")
        #expect(result.status == 1)
        #expect(result.stderr.contains("NotAuthorizedException"), "\(result.stderr)")
        #expect(try pool.stats()["RespondToAuthChallenge:PASSWORD_VERIFIER"] == ["bad_signature": 1])
        #expect(pool.store() == nil)
    }

    @Test("an SRP_B that is 0 modulo N ends the login before any answer is sent", arguments: ["zero", "n"])
    func badB(mode: String) throws {
        let pool = try Self.pool(serverArguments: ["--bad-b", mode])
        defer { pool.server.stop() }
        let result = try Self.login(pool, stdin: Self.password + "\n")
        #expect(result.status == 1)
        #expect(result.stderr.contains("SRP_B"), "\(result.stderr)")
        #expect(try pool.stats()["RespondToAuthChallenge:PASSWORD_VERIFIER"] == nil)
    }

    @Test("SOFTWARE_TOKEN_MFA after SRP: the TOTP code asked on stderr, read from stdin when asked")
    func totp() throws {
        let pool = try Self.pool(["mfa": "totp", "totp_secret": Self.totpSecret])
        defer { pool.server.stop() }
        let child = try Self.start(pool)
        defer { child.stop(grace: 1) }
        #expect(Self.waitForQuestion(child, containing: "SOFTWARE_TOKEN_MFA"))
        child.writeStdin(Array((try Self.totpCode() + "\n").utf8))
        #expect(child.wait(timeout: 120) == 0, "\(child.stderr.text)")
        #expect(try pool.stats()["RespondToAuthChallenge:SOFTWARE_TOKEN_MFA"] == ["ok": 1])
    }

    @Test("a wrong TOTP code ends the login with exit 1 naming CodeMismatchException")
    func wrongCode() throws {
        let pool = try Self.pool(["mfa": "totp", "totp_secret": Self.totpSecret])
        defer { pool.server.stop() }
        let code = try Self.totpCode()
        let wrong = String(code.map { $0 == "9" ? "0" : Character(String(($0.wholeNumberValue ?? 0) + 1)) })
        let result = try Self.login(pool, stdin: Self.password + "\n" + wrong + "\n")
        #expect(result.status == 1)
        #expect(result.stderr.contains("CodeMismatchException"), "\(result.stderr)")
    }

    @Test("SELECT_MFA_TYPE, then SMS_MFA: the prompt shows where the code went, and the code exists only once asked")
    func selectThenSMS() throws {
        let pool = try Self.pool(["mfa": "select"])
        defer { pool.server.stop() }
        let child = try Self.start(pool)
        defer { child.stop(grace: 1) }
        #expect(Self.waitForQuestion(child, containing: "SELECT_MFA_TYPE"))
        child.writeStdin(Array("SMS_MFA\n".utf8))
        #expect(Self.waitForQuestion(child, containing: "+*******0100"))
        try Self.answerWithTheCodeSent(pool, child)
        #expect(try pool.stats()["RespondToAuthChallenge:SMS_MFA"] == ["ok": 1])
    }

    @Test("EMAIL_OTP after a password login (USER_PASSWORD_AUTH)")
    func emailOTP() throws {
        let pool = try Self.pool(["mfa": "email"], login: "password")
        defer { pool.server.stop() }
        let child = try Self.start(pool)
        defer { child.stop(grace: 1) }
        #expect(Self.waitForQuestion(child, containing: "a***@e***"))
        try Self.answerWithTheCodeSent(pool, child)
        #expect(try pool.stats()["RespondToAuthChallenge:EMAIL_OTP"] == ["ok": 1])
    }

    @Test("NEW_PASSWORD_REQUIRED with a required attribute: the new password is set and never shown")
    func newPassword() throws {
        let pool = try Self.pool(["force_change": true, "required_attributes": ["name"]])
        defer { pool.server.stop() }
        let newPassword = "Brand-new-pass-2"
        let result = try Self.login(pool, stdin: Self.password + "\n" + newPassword + "\nAnn Example\n")
        #expect(result.status == 0, "\(result.output)")
        #expect(result.stderr.contains("NEW_PASSWORD_REQUIRED"))
        #expect(result.stderr.contains("name"))
        #expect(!result.output.contains(newPassword))
        #expect(try pool.stats()["RespondToAuthChallenge:NEW_PASSWORD_REQUIRED"] == ["ok": 1])
        // The pool now takes the new password only.
        try FileManager.default.removeItem(atPath: pool.storePath)
        #expect(try Self.login(pool, stdin: newPassword + "\n").status == 0)
    }

    @Test("MFA_SETUP and an unknown challenge end the login with exit 1, naming them", arguments: [("setup", "MFA_SETUP"), ("custom", "CUSTOM_CHALLENGE")])
    func unanswerable(mfa: String, name: String) throws {
        let pool = try Self.pool(["mfa": mfa])
        defer { pool.server.stop() }
        let result = try Self.login(pool, stdin: Self.password + "\n")
        #expect(result.status == 1)
        #expect(result.stderr.contains(name), "\(result.stderr)")
        #expect(pool.store() == nil)
    }

    @Test("an expired Session ends the login with exit 1 saying so")
    func expiredSession() throws {
        let pool = try Self.pool(["mfa": "totp", "totp_secret": Self.totpSecret], serverArguments: ["--session-ttl", "0"])
        defer { pool.server.stop() }
        let result = try Self.login(pool, stdin: Self.password + "\n" + (try Self.totpCode()) + "\n")
        #expect(result.status == 1)
        // Cognito's own words, passed on: the refusal names what expired.
        #expect(result.stderr.contains("Cognito refused the login"), "\(result.stderr)")
        #expect(result.stderr.contains("session is expired"), "\(result.stderr)")
    }
}
