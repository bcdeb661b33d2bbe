import Foundation
import Glibc
import Sockets
import Testing

@testable import Credentials

@Suite("exec source")
struct ExecTokenSourceTests {
    func fetch(_ source: ExecTokenSource) -> Result<IssuedToken, TokenSourceError> {
        do {
            return .success(try source.fetch(current: nil))
        } catch let error as TokenSourceError {
            return .failure(error)
        } catch {
            return .failure(.passing("unexpected \(error)"))
        }
    }

    func failureReason(_ result: Result<IssuedToken, TokenSourceError>) -> String? {
        guard case .failure(.passing(let reason, _)) = result else { return nil }
        return reason
    }

    @Test("a bare token line is the token")
    func bareToken() throws {
        let folder = TemporaryFolder()
        defer { folder.remove() }
        let script = folder.script("get", "echo 'bare-token-123'")
        let source = try execSource(execCredentials(["/bin/sh", script]))
        #expect(try fetch(source).get() == IssuedToken(accessToken: "bare-token-123"))
        #expect(source.defaultLifetime == 3600)
    }

    @Test("JSON with expires_in gives the token and its lifetime")
    func jsonExpiresIn() throws {
        let folder = TemporaryFolder()
        defer { folder.remove() }
        let script = folder.script("get", #"printf '{"token": "json-token", "expires_in": 120}\n'"#)
        let source = try execSource(execCredentials(["/bin/sh", script]))
        #expect(try fetch(source).get() == IssuedToken(accessToken: "json-token", expiresIn: 120))
    }

    @Test("JSON with an RFC 3339 expires_at gives the expiry")
    func jsonExpiresAt() throws {
        let folder = TemporaryFolder()
        defer { folder.remove() }
        let script = folder.script("get", #"echo '{"token":"t1","expires_at":"2026-11-22T03:00:00Z"}'"#)
        let source = try execSource(execCredentials(["/bin/sh", script]))
        #expect(try fetch(source).get() == IssuedToken(accessToken: "t1", expiresAt: 1_795_316_400))
    }

    @Test("arguments are passed without a shell, and a bare program name is looked up in PATH")
    func argumentsWithoutShell() throws {
        let source = try execSource(execCredentials(["printf", "%s", "tok;$(id)|`id`&*"]))
        #expect(try fetch(source).get().accessToken == "tok;$(id)|`id`&*")
    }

    @Test("a non-zero exit is a passing failure that does not quote the output")
    func nonZeroExit() throws {
        let folder = TemporaryFolder()
        defer { folder.remove() }
        let script = folder.script("get", "echo 'secret-output-token'\necho 'stderr-secret' >&2\nexit 3")
        let reason = failureReason(fetch(try execSource(execCredentials(["/bin/sh", script]))))
        #expect(reason?.contains("status 3") == true, "\(reason ?? "no failure")")
        #expect(reason?.contains("secret-output-token") == false)
        #expect(reason?.contains("stderr-secret") == false)
    }

    @Test("a command that outlives exec_timeout is killed with its process group")
    func timeoutKillsTheGroup() throws {
        let folder = TemporaryFolder()
        defer { folder.remove() }
        let pids = folder.file("pids")
        let script = folder.script("get", "sleep 30 &\necho $! > \(pids)\necho $$ >> \(pids)\nwait")
        let source = try execSource(execCredentials(["/bin/sh", script], timeout: 0.5))
        let started = Date()
        let reason = failureReason(fetch(source))
        let elapsed = Date().timeIntervalSince(started)
        #expect(reason?.contains("did not finish within") == true)
        #expect(elapsed >= 0.5)
        #expect(elapsed < 0.5 + ProcessRunner.killGrace + 1)
        let written = (try? String(contentsOfFile: pids, encoding: .utf8)) ?? ""
        let processIDs = written.split(separator: "\n").compactMap { pid_t($0) }
        #expect(processIDs.count == 2)
        for pid in processIDs {
            #expect(eventually(timeout: 5) { !isRunning(pid) }, "process \(pid) survived")
        }
    }

    @Test(
        "garbage output is a passing failure that does not quote the output",
        arguments: [
            "echo 'two secret-words'",
            "printf ''",
            "echo '{\"token\": 42}'",
            "echo '{\"tok\": \"secret-words\"}'",
            "echo '{\"token\": \"secret-words\", \"expires_in\": \"soon\"}'",
            "echo '{\"token\": \"secret-words\", \"expires_in\": true}'",
            "echo '{\"token\": \"secret-words\", \"expires_at\": \"tomorrow\"}'",
            "echo '{\"token\": \"secret words\"}'",
            "echo '{broken secret-words'",
            "printf 'line-one\\nsecret-words\\n'",
        ]
    )
    func garbageOutput(body: String) throws {
        let folder = TemporaryFolder()
        defer { folder.remove() }
        let script = folder.script("get", body)
        let reason = failureReason(fetch(try execSource(execCredentials(["/bin/sh", script]))))
        #expect(reason != nil)
        #expect(reason?.contains("secret") == false)
    }

    @Test("output over the size cap is refused and the command is killed")
    func oversizedOutput() throws {
        let folder = TemporaryFolder()
        defer { folder.remove() }
        let script = folder.script("get", "head -c 200000 /dev/zero | tr '\\0' a\nsleep 30")
        let started = Date()
        let reason = failureReason(fetch(try execSource(execCredentials(["/bin/sh", script], timeout: 20))))
        #expect(reason?.contains("KiB") == true)
        #expect(Date().timeIntervalSince(started) < 10)
    }

    @Test("the command inherits no descriptor of the proxy beyond stdin, stdout and stderr")
    func noInheritedDescriptors() throws {
        let folder = TemporaryFolder()
        defer { folder.remove() }
        let leaky = open(folder.file("open-file"), O_WRONLY | O_CREAT, 0o600)  // no O_CLOEXEC
        #expect(leaky > 2)
        defer { close(leaky) }
        let script = folder.script("get", "if [ -e /proc/$$/fd/\(leaky) ]; then echo leaked; else echo clean; fi")
        #expect(try fetch(execSource(execCredentials(["/bin/sh", script]))).get().accessToken == "clean")
    }

    @Test("a command that cannot be started is a passing failure")
    func missingCommand() throws {
        let folder = TemporaryFolder()
        defer { folder.remove() }
        let reason = failureReason(fetch(try execSource(execCredentials([folder.file("missing")]))))
        #expect(reason?.contains("cannot start") == true)
    }

    @Test("JSON null expiry fields are ignored and access_token is accepted")
    func jsonVariants() throws {
        #expect(try ExecOutput.parse(Array(#"{"token":"a","expires_in":null}"#.utf8)).get() == IssuedToken(accessToken: "a"))
        #expect(try ExecOutput.parse(Array(#"{"access_token":"b","expires_in":"60"}"#.utf8)).get() == IssuedToken(accessToken: "b", expiresIn: 60))
        #expect(
            try ExecOutput.parse(Array(#"{"token":"c","expires_at":1795316400}"#.utf8)).get()
                == IssuedToken(accessToken: "c", expiresAt: 1_795_316_400))
    }

    @Test("an exec source without a command is a configuration error")
    func emptyCommand() {
        #expect(throws: (any Error).self) { try execSource(execCredentials([])) }
    }
}

/// Alive and not a zombie.
func isRunning(_ pid: pid_t) -> Bool {
    guard kill(pid, 0) == 0 else { return false }
    guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8) else { return false }
    guard let close = stat.lastIndex(of: ")") else { return true }
    let state = stat[stat.index(close, offsetBy: 2)...].first
    return state != "Z" && state != "X"
}
