import Config
import Foundation
import Glibc
import Synchronization
import Testing

@testable import Credentials

@Suite("TokenManager")
struct TokenManagerTests {
    /// An exec script that counts its runs in `runs` and prints `token-<run>`, after `delay` seconds.
    func countingScript(_ folder: TemporaryFolder, delay: Double = 0, json: String? = nil) -> String {
        let runs = folder.file("runs")
        let output = json ?? #"echo "token-$n""#
        return folder.script("get", "echo run >> \(runs)\nn=$(wc -l < \(runs) | tr -d ' ')\nsleep \(delay)\n\(output)")
    }

    @Test("50 concurrent refreshes of the same generation run the command once and all get the new token")
    func concurrentRefreshesCoalesce() throws {
        let folder = TemporaryFolder()
        defer { folder.remove() }
        let script = countingScript(folder, delay: 0.3)
        let logs = LogCapture()
        let manager = try TokenManager(configuration: makeConfiguration(execCredentials(["/bin/sh", script]), folder: folder), logger: logs.logger())
        manager.start()
        defer { manager.stop() }
        #expect(eventually { manager.current().snapshot?.generation == 1 })
        #expect(manager.current().snapshot?.accessToken == "token-1")
        #expect(folder.lines("runs") == 1)

        let box = OutcomeBox()
        let gate = StartGate()
        for _ in 0..<50 {
            Thread {
                gate.wait()
                manager.refresh(staleGeneration: 1, reason: .unauthorized) { box.append($0) }
            }.start()
        }
        gate.open()

        #expect(eventually { box.count == 50 })
        #expect(folder.lines("runs") == 2)
        let generations = Set(box.outcomes.map { $0.snapshot?.generation })
        #expect(generations == [2])
        #expect(manager.current().snapshot?.accessToken == "token-2")
        #expect(manager.stats.successes == 2)

        // A 401 for a token older than the current one is answered at once, without a run.
        var answeredAtOnce: UInt64? = nil
        let immediate = Mutex<UInt64?>(nil)
        manager.refresh(staleGeneration: 1, reason: .unauthorized) { outcome in immediate.withLock { $0 = outcome.snapshot?.generation } }
        answeredAtOnce = immediate.withLock { $0 }
        #expect(answeredAtOnce == 2)
        #expect(folder.lines("runs") == 2)

        #expect(!logs.contains("token-1") && !logs.contains("token-2"))
    }

    @Test("the background refresh runs before expiry without any request")
    func backgroundRefresh() throws {
        let folder = TemporaryFolder()
        defer { folder.remove() }
        let script = countingScript(folder, json: #"echo "{\"token\":\"token-$n\",\"expires_in\":2}""#)
        let manager = try TokenManager(
            configuration: makeConfiguration(execCredentials(["/bin/sh", script]), folder: folder), logger: LogCapture().logger())
        manager.start()
        defer { manager.stop() }
        #expect(eventually { manager.current().snapshot?.accessToken == "token-1" })
        let first = try #require(manager.current().snapshot)
        #expect(abs((first.expiresAt ?? 0) - first.issuedAt - 2) < 0.5)
        // Lifetime 2 s → refreshed at about 1 s, while the old token is still valid.
        #expect(eventually(timeout: 8) { manager.current().snapshot.map { $0.generation >= 3 } == true })
        #expect(manager.current().snapshot?.isValid(at: Date().timeIntervalSince1970) == true)
        #expect(manager.stats.failures == 0)
    }

    @Test("a failing command leaves no token, answers 503 at once during the backoff, retries after it and recovers")
    func failureBacksOff() throws {
        let folder = TemporaryFolder()
        defer { folder.remove() }
        let flag = folder.file("ok")
        let runs = folder.file("runs")
        let script = folder.script("get", "echo run >> \(runs)\n[ -f \(flag) ] || exit 7\necho good-token")
        let configuration = makeConfiguration(execCredentials(["/bin/sh", script]), folder: folder)
        let clock = ManualClock(1_000_000)
        let manager = TokenManager(
            configuration: configuration,
            logger: LogCapture().logger(),
            source: try makeTokenSource(configuration),
            now: { clock.now },
            random: { 0 }
        )
        manager.start()
        defer { manager.stop() }
        #expect(eventually { manager.stats.failures == 1 })
        let view = manager.current()
        #expect(view.snapshot == nil)
        #expect(view.session == .active)
        #expect(view.failure?.contains("status 7") == true)
        #expect(view.retryAfter == 1)
        #expect(manager.stats.nextRefreshAt == 1_000_001)

        // Inside the backoff: answered at once, no run.
        let box = OutcomeBox()
        manager.refresh(staleGeneration: nil, reason: .expiry) { box.append($0) }
        #expect(box.count == 1)
        #expect(box.outcomes.first?.isUnavailable == true)
        #expect(folder.lines("runs") == 1)

        // After it: the token thread retries by itself and doubles the backoff.
        clock.advance(1.5)
        #expect(eventually { manager.stats.failures == 2 })
        #expect(folder.lines("runs") == 2)
        #expect(manager.stats.nextRefreshAt == 1_000_001.5 + 2)
        #expect(manager.stats.consecutiveFailures == 2)

        _ = FileManager.default.createFile(atPath: flag, contents: Data())
        clock.advance(2)
        #expect(eventually { manager.current().snapshot?.accessToken == "good-token" })
        #expect(manager.current().failure == nil)
        #expect(manager.current().session == .active)
        // default_lifetime 1 h, refresh_margin 5 min, no jitter.
        #expect(manager.current().snapshot?.expiresAt == 1_000_003.5 + 3600)
        #expect(manager.stats.nextRefreshAt == 1_000_003.5 + 3300)
        #expect(manager.stats.consecutiveFailures == 0)
    }

    @Test("a source that says no session is logged in is not asked again until its input changes")
    func loginRequiredWaitsForInput() throws {
        let folder = TemporaryFolder()
        defer { folder.remove() }
        let source = ScriptedSource()
        source.answers = [.failure(.loginRequired("no session; run tokenproxy login"))]
        let manager = startedRefreshManager(source, folder: folder)
        defer { manager.stop() }
        #expect(eventually { manager.stats.refusals == 1 })
        #expect(manager.current().session == .none)
        let box = OutcomeBox()
        manager.refresh(staleGeneration: nil, reason: .expiry) { box.append($0) }
        manager.refresh(staleGeneration: nil, reason: .forced) { box.append($0) }
        #expect(box.count == 2)
        #expect(source.calls == 1)

        source.answers = [.success(IssuedToken(accessToken: "after-login", expiresIn: 600))]
        source.changed = true
        #expect(eventually { manager.current().snapshot?.accessToken == "after-login" })
        #expect(manager.current().session == .active)
    }

    @Test("a refused refresh ends the session, clears the token and is not retried")
    func refusalEndsTheSession() throws {
        let folder = TemporaryFolder()
        defer { folder.remove() }
        let source = ScriptedSource()
        source.answers = [.success(IssuedToken(accessToken: "first", expiresIn: 600)), .failure(.refused("invalid_grant"))]
        let manager = startedRefreshManager(source, folder: folder)
        defer { manager.stop() }
        #expect(eventually { manager.current().snapshot?.generation == 1 })
        let box = OutcomeBox()
        manager.refresh(staleGeneration: 1, reason: .unauthorized) { box.append($0) }
        #expect(eventually { box.count == 1 })
        guard case .loginRequired(let message) = box.outcomes[0] else {
            Issue.record("expected loginRequired, got \(box.outcomes[0])")
            return
        }
        #expect(message.contains("invalid_grant"))
        #expect(manager.current().snapshot == nil)
        #expect(manager.current().session == .ended)
        manager.refresh(staleGeneration: 1, reason: .unauthorized) { box.append($0) }
        #expect(box.count == 2)
        #expect(source.calls == 2)
        #expect(manager.stats.refusals == 1)
    }

    @Test("a forced refresh skips the backoff")
    func forcedRefreshSkipsBackoff() throws {
        let folder = TemporaryFolder()
        defer { folder.remove() }
        let flag = folder.file("ok")
        let script = folder.script("get", "[ -f \(flag) ] || exit 1\necho forced-token")
        var credentials = execCredentials(["/bin/sh", script])
        credentials.refreshMargin = 300
        let manager = try TokenManager(configuration: makeConfiguration(credentials, folder: folder), logger: LogCapture().logger())
        manager.start()
        defer { manager.stop() }
        #expect(eventually { manager.stats.failures >= 1 })
        _ = FileManager.default.createFile(atPath: flag, contents: Data())
        let box = OutcomeBox()
        manager.refresh(staleGeneration: nil, reason: .forced) { box.append($0) }
        #expect(eventually { box.count == 1 })
        #expect(box.outcomes.first?.snapshot?.accessToken == "forced-token")
    }

    @Test("a static token is served at once and a 401 hands back the same generation")
    func staticToken() throws {
        let folder = TemporaryFolder()
        defer { folder.remove() }
        let credentials = CredentialsConfiguration(.static(StaticTokenConfiguration(token: Secret(value: "static-secret\n", origin: .env("TOKEN")))))
        let logs = LogCapture()
        let manager = try TokenManager(configuration: makeConfiguration(credentials, folder: folder), logger: logs.logger())
        manager.start()
        defer { manager.stop() }
        #expect(eventually { manager.current().snapshot != nil })
        let snapshot = try #require(manager.current().snapshot)
        #expect(snapshot.accessToken == "static-secret")
        #expect(snapshot.expiresAt == nil)
        #expect(snapshot.authorizationField == Array("Authorization: Bearer static-secret\r\n".utf8))

        let box = OutcomeBox()
        for _ in 0..<5 { manager.refresh(staleGeneration: 1, reason: .unauthorized) { box.append($0) } }
        #expect(eventually { box.count == 5 })
        #expect(Set(box.outcomes.map { $0.snapshot?.generation }) == [1])
        #expect(manager.current().snapshot === snapshot)
        #expect(!logs.contains("static-secret"))
    }

    /// CONTRACT point 3: a refresh that hands back the credential the upstream refused is not
    /// retried with; for AWS keys that means the same keys, whatever `Expiration` says (issue 39).
    @Test("the same AWS keys with a later Expiration are the credential held; other keys or another token are not")
    func sameCredential() {
        let keys = AWSCredentials(accessKeyID: "ASIAKEY", secretAccessKey: "key/secret", sessionToken: "session-1", expiration: 1_000)
        let held = TokenSnapshot(
            accessToken: keys.containerEndpointJSON, expiresAt: 1_000, issuedAt: 0, generation: 3, aws: AWSSigningCredentials(keys))
        var later = keys
        later.expiration = 2_000
        #expect(TokenManager.isSameCredential(held: held, issued: later.containerEndpointJSON, aws: later))
        var rotated = later
        rotated.sessionToken = "session-2"
        #expect(!TokenManager.isSameCredential(held: held, issued: rotated.containerEndpointJSON, aws: rotated))
        let bearer = TokenSnapshot(accessToken: "token-1", expiresAt: nil, issuedAt: 0, generation: 1)
        #expect(TokenManager.isSameCredential(held: bearer, issued: "token-1", aws: nil))
        #expect(!TokenManager.isSameCredential(held: bearer, issued: "token-2", aws: nil))
    }

    @Test("a static JWT expires at its exp claim")
    func staticJWT() throws {
        let folder = TemporaryFolder()
        defer { folder.remove() }
        let jwt = makeJWT(payload: #"{"exp":4102444800}"#)
        let credentials = CredentialsConfiguration(.static(StaticTokenConfiguration(token: Secret(value: jwt, origin: .literal))))
        let manager = try TokenManager(configuration: makeConfiguration(credentials, folder: folder), logger: LogCapture().logger())
        manager.start()
        defer { manager.stop() }
        #expect(eventually { manager.current().snapshot != nil })
        #expect(manager.current().snapshot?.expiresAt == 4_102_444_800)
    }

    @Test("a rewritten token file is picked up, a vanished or empty one keeps the last good token")
    func fileTokenFollowsTheFile() throws {
        let folder = TemporaryFolder()
        defer { folder.remove() }
        let path = folder.file("token")
        folder.write("token", "file-token-A\n")
        let credentials = CredentialsConfiguration(.file(FileTokenConfiguration(path: path)))
        let logs = LogCapture()
        let manager = try TokenManager(configuration: makeConfiguration(credentials, folder: folder), logger: logs.logger())
        manager.start()
        defer { manager.stop() }
        #expect(eventually { manager.current().snapshot?.accessToken == "file-token-A" })

        // Replace atomically, as token tools do.
        folder.write("token.new", "file-token-B\n")
        rename(folder.file("token.new"), path)
        #expect(eventually { manager.current().snapshot?.accessToken == "file-token-B" })
        #expect(manager.current().snapshot?.generation == 2)

        unlink(path)
        #expect(eventually { manager.current().failure != nil })
        #expect(manager.current().snapshot?.accessToken == "file-token-B")
        #expect(manager.current().session == .active)
        // Retried with backoff, but the reason is logged as a warning once.
        #expect(eventually { manager.stats.failures >= 3 })
        #expect(logs.count(level: .warning, containing: "No such file") == 1)

        folder.write("token", "")
        #expect(eventually { manager.current().failure?.contains("empty") == true })
        #expect(manager.current().snapshot?.accessToken == "file-token-B")

        folder.write("token", "file-token-C")
        #expect(eventually { manager.current().snapshot?.accessToken == "file-token-C" })
        #expect(manager.current().failure == nil)
        #expect(!logs.contains("file-token-"))
    }

    @Test("a 401 re-reads the token file")
    func unauthorizedRereadsTheFile() throws {
        let folder = TemporaryFolder()
        defer { folder.remove() }
        folder.write("token", "old-file-token")
        let credentials = CredentialsConfiguration(.file(FileTokenConfiguration(path: folder.file("token"))))
        let manager = try TokenManager(configuration: makeConfiguration(credentials, folder: folder), logger: LogCapture().logger())
        manager.start()
        defer { manager.stop() }
        #expect(eventually { manager.current().snapshot?.generation == 1 })
        folder.write("token", "new-file-token")
        // Whether the once-a-second look or the 401 notices first, the answer is the new token.
        let box = OutcomeBox()
        manager.refresh(staleGeneration: 1, reason: .unauthorized) { box.append($0) }
        #expect(eventually { box.count == 1 })
        #expect(box.outcomes.first?.snapshot?.accessToken == "new-file-token")
        #expect(box.outcomes.first?.snapshot?.generation == 2)
    }

    @Test("the sink file holds the current token with mode 0600 and follows changes")
    func sinkFile() throws {
        let folder = TemporaryFolder()
        defer { folder.remove() }
        folder.write("token", "sink-token-1")
        let credentials = CredentialsConfiguration(.file(FileTokenConfiguration(path: folder.file("token"))))
        let sinkPath = folder.file("run/sink/token")
        let changes = Mutex(0)
        let manager = try TokenManager(
            configuration: makeConfiguration(credentials, folder: folder, sink: sinkPath),
            logger: LogCapture().logger()
        )
        manager.onChange = { _ in changes.withLock { $0 += 1 } }
        manager.start()
        defer { manager.stop() }
        #expect(eventually { (try? String(contentsOfFile: sinkPath, encoding: .utf8)) == "sink-token-1\n" })
        var info = stat()
        #expect(stat(sinkPath, &info) == 0)
        #expect(info.st_mode & 0o777 == 0o600)
        #expect(eventually { changes.withLock { $0 } >= 1 })

        folder.write("token", "sink-token-2")
        #expect(eventually { (try? String(contentsOfFile: sinkPath, encoding: .utf8)) == "sink-token-2\n" })
        #expect(stat(sinkPath, &info) == 0)
        #expect(info.st_mode & 0o777 == 0o600)
        let leftovers = try FileManager.default.contentsOfDirectory(atPath: folder.file("run/sink"))
        #expect(leftovers == ["token"])
    }

    @Test("stop answers waiting callers and ends the thread")
    func stopEndsTheThread() throws {
        let folder = TemporaryFolder()
        defer { folder.remove() }
        let script = countingScript(folder, delay: 0.5)
        let manager = try TokenManager(
            configuration: makeConfiguration(execCredentials(["/bin/sh", script]), folder: folder), logger: LogCapture().logger())
        manager.start()
        let box = OutcomeBox()
        manager.refresh(staleGeneration: nil, reason: .expiry) { box.append($0) }
        manager.stop()
        #expect(box.count == 1)
        let after = OutcomeBox()
        manager.refresh(staleGeneration: 99, reason: .unauthorized) { after.append($0) }
        #expect(after.count == 1)
    }

    @Test("an incomplete provider configuration is refused with the key that names it")
    func unsupportedType() {
        let folder = TemporaryFolder()
        defer { folder.remove() }
        #expect(throws: ConfigurationError.self) {
            try TokenManager(
                configuration: makeConfiguration(CredentialsConfiguration(.cognito(CognitoConfiguration(clientID: ""))), folder: folder),
                logger: LogCapture().logger()
            )
        }
    }
}
