import Config
import Foundation
import Glibc
import Logging
import Synchronization

@testable import Credentials

/// A fresh folder under the system temp folder, removed by `remove()`.
struct TemporaryFolder {
    let path: String

    init() {
        var template = Array("\(NSTemporaryDirectory())/creds-test-XXXXXX".utf8CString)
        let created = template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) }
        precondition(created != nil, "mkdtemp failed")
        path = template.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
    }

    func file(_ name: String) -> String { "\(path)/\(name)" }

    func write(_ name: String, _ content: String) {
        _ = FileManager.default.createFile(atPath: file(name), contents: Data(content.utf8))
    }

    /// An executable `/bin/sh` script. Tests run it as `/bin/sh PATH`: executing a file that another
    /// test's spawn may briefly hold open for writing fails with ETXTBSY.
    func script(_ name: String, _ body: String) -> String {
        let path = file(name)
        _ = FileManager.default.createFile(atPath: path, contents: Data("#!/bin/sh\n\(body)\n".utf8))
        chmod(path, 0o755)
        return path
    }

    func lines(_ name: String) -> Int {
        guard let text = try? String(contentsOfFile: file(name), encoding: .utf8) else { return 0 }
        return text.split(separator: "\n").count
    }

    func remove() { try? FileManager.default.removeItem(atPath: path) }
}

/// Polls `condition` until it holds or `timeout` passes; the result is what the test asserts.
func eventually(timeout: Double = 10, _ condition: () -> Bool) -> Bool {
    let deadline = Date().addingTimeInterval(timeout)
    while Date() < deadline {
        if condition() { return true }
        usleep(5_000)
    }
    return condition()
}

/// A started `TokenManager` of an `oauth2_refresh` configuration in `folder` that asks `source`
/// for its tokens; the caller stops it.
func startedRefreshManager(_ source: any TokenSource, folder: TemporaryFolder) -> TokenManager {
    let manager = TokenManager(
        configuration: makeConfiguration(
            CredentialsConfiguration(.oauth2Refresh(OAuth2RefreshConfiguration(client: OAuth2ClientConfiguration()))), folder: folder),
        logger: LogCapture().logger(),
        source: source
    )
    manager.start()
    return manager
}

func makeConfiguration(_ credentials: CredentialsConfiguration, folder: TemporaryFolder, sink: String? = nil) -> Configuration {
    var configuration = Configuration(
        upstream: UpstreamURL(scheme: "http", host: "127.0.0.1", port: 9, explicitPort: true, basePath: "", original: "http://127.0.0.1:9"),
        credentials: credentials,
        store: StoreConfiguration(path: folder.file("state/tokens.json")),
        baseDirectory: folder.path
    )
    configuration.sink = sink.map { SinkConfiguration(path: $0) }
    return configuration
}

func execCredentials(_ command: [String], timeout: Double = 5, defaultLifetime: Double = 3600) -> CredentialsConfiguration {
    var credentials = CredentialsConfiguration(.exec(ExecConfiguration(command: command, timeout: timeout)))
    credentials.defaultLifetime = defaultLifetime
    return credentials
}

/// The exec source that `makeTokenSource` builds for `credentials` (an exec configuration).
func execSource(_ credentials: CredentialsConfiguration) throws -> ExecTokenSource {
    guard case .exec(let exec) = credentials.source else { throw ConfigurationError(keyPath: "credentials.type", reason: "not exec") }
    return try ExecTokenSource(exec, defaultLifetime: credentials.defaultLifetime)
}

/// base64url without padding (RFC 4648 §5).
func base64URL(_ data: Data) -> String {
    data.base64EncodedString()
        .replacingOccurrences(of: "+", with: "-")
        .replacingOccurrences(of: "/", with: "_")
        .replacingOccurrences(of: "=", with: "")
}

func makeJWT(payload: String, header: String = #"{"alg":"RS256","typ":"JWT"}"#) -> String {
    "\(base64URL(Data(header.utf8))).\(base64URL(Data(payload.utf8))).c2lnbmF0dXJl"
}

/// Collects log lines so that tests can look for secrets and count warnings.
final class LogCapture: Sendable {
    struct Line {
        var level: Logger.Level
        var message: String
    }

    private let storage = Mutex<[Line]>([])

    var lines: [Line] { storage.withLock { $0 } }

    func append(_ line: Line) { storage.withLock { $0.append(line) } }

    func logger() -> Logger {
        var logger = Logger(label: "credentials-test") { _ in CapturingHandler(capture: self) }
        logger.logLevel = .debug
        return logger
    }

    func contains(_ text: String) -> Bool { lines.contains { $0.message.contains(text) } }

    func count(level: Logger.Level, containing text: String) -> Int {
        lines.filter { $0.level == level && $0.message.contains(text) }.count
    }
}

struct CapturingHandler: LogHandler {
    let capture: LogCapture
    var metadata: Logger.Metadata = [:]
    var logLevel: Logger.Level = .debug

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        capture.append(.init(level: event.level, message: event.message.description))
    }
}

/// Collects the outcomes of `refresh` calls from many threads.
final class OutcomeBox: Sendable {
    private let storage = Mutex<[RefreshOutcome]>([])
    var outcomes: [RefreshOutcome] { storage.withLock { $0 } }
    var count: Int { storage.withLock { $0.count } }
    func append(_ outcome: RefreshOutcome) { storage.withLock { $0.append(outcome) } }
}

extension RefreshOutcome {
    var snapshot: TokenSnapshot? {
        switch self {
        case .token(let snapshot): return snapshot
        case .loginRequired, .unavailable: return nil
        }
    }

    var isUnavailable: Bool {
        switch self {
        case .unavailable: return true
        case .token, .loginRequired: return false
        }
    }
}

/// Holds threads until `open()`, so that they start together.
// @unchecked: `isOpen` is read and written only with `condition` locked.
final class StartGate: @unchecked Sendable {
    private let condition = NSCondition()
    private var isOpen = false

    func wait() {
        condition.lock()
        while !isOpen { condition.wait() }
        condition.unlock()
    }

    func open() {
        condition.lock()
        isOpen = true
        condition.broadcast()
        condition.unlock()
    }
}

/// A clock the test moves by hand (epoch seconds).
final class ManualClock: Sendable {
    private let storage: Mutex<Double>
    init(_ start: Double) { storage = Mutex(start) }
    var now: Double { storage.withLock { $0 } }
    func advance(_ seconds: Double) { storage.withLock { $0 += seconds } }
}

/// A source that hands out prepared answers (the last one repeats) and reports a changed input on
/// demand: the shape the OAuth2 sources will have, without a network.
final class ScriptedSource: TokenSource, Sendable {
    private let state = Mutex<(answers: [Result<IssuedToken, TokenSourceError>], calls: Int, changed: Bool)>(([], 0, false))
    let kind = "scripted"
    let defaultLifetime: Double? = 3600
    let pollInterval: Double? = 0.05

    var answers: [Result<IssuedToken, TokenSourceError>] {
        get { state.withLock { $0.answers } }
        set { state.withLock { $0.answers = newValue } }
    }
    var calls: Int { state.withLock { $0.calls } }
    var changed: Bool {
        get { state.withLock { $0.changed } }
        set { state.withLock { $0.changed = newValue } }
    }

    func fetch(current: TokenSnapshot?) throws -> IssuedToken {
        let answer: Result<IssuedToken, TokenSourceError> = state.withLock {
            $0.calls += 1
            return $0.answers.count > 1 ? $0.answers.removeFirst() : $0.answers[0]
        }
        return try answer.get()
    }

    func inputChanged() -> Bool {
        state.withLock { state in
            defer { state.changed = false }
            return state.changed
        }
    }
}
