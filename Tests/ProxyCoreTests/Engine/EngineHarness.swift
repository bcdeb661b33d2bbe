import Config
import Credentials
import Dispatch
import Logging
import Sockets
import Testing

@testable import ProxyCore

/// The request engine in the test's process (Tests/README.md, "The engine harness"): one real
/// `EventLoop` with its `LoopContext` on its own thread, as `Server` makes them, and client
/// connections that are `Connection`s over a socketpair, so a test writes raw request bytes on its
/// end and reads what the proxy answers. The upstream is a `ScriptedUpstream`, the token source a
/// `ScriptedTokenSource` behind a real `TokenManager`. Every wait suspends the test's task and blocks
/// only a thread of its own (`onOwnThread`). `withEngine` stops it at the end of a test.
final class EngineHarness {
    let upstream: ScriptedUpstream
    let source: ScriptedTokenSource
    let tokens: TokenManager
    private let context: LoopContext
    /// The admin listener's service: a `Server` that was never started, whose one loop is ours.
    private let server: Server
    private let loopEnded = DispatchSemaphore(value: 0)
    private var stopped = false

    /// `yaml` is added to a configuration whose upstream is `upstream` and whose credential the
    /// token source is (`type: exec`, so that a 401 asks for another token). Its client and upstream
    /// timeouts are of an hour: in a busy parallel run a test's next step may come minutes after the
    /// last, when it gets a thread of Swift concurrency again (Tests/README.md, "The engine harness").
    init(source: ScriptedTokenSource = ScriptedTokenSource(), yaml: String = "") throws {
        let upstream = try ScriptedUpstream()
        self.upstream = upstream
        self.source = source
        let text = """
            upstream: \(upstream.url)
            credentials:
              type: exec
              command: [/bin/true]
            limits:
              client_header_timeout: 1h
              client_idle_timeout: 1h
              client_send_timeout: 1h
              upstream_timeout: 1h
              upstream_idle_timeout: 1h
              upstream_keepalive_timeout: 1h
            \(yaml)
            """
        let configuration = try ConfigurationLoader.parse(yaml: text, baseDirectory: "/tmp", environment: [:]).configuration
        let logger = Logger(label: "engine-harness") { _ in SwiftLogNoOpLogHandler() }
        tokens = TokenManager(configuration: configuration, logger: logger, source: source)
        let states = [RouteState(name: configuration.routes[0].name, tokens: tokens)]
        server = Server(configuration: configuration, states: states, logger: logger)
        let loop = try EventLoop(index: 0)
        context = LoopContext(
            loop: loop, configuration: configuration, states: states, forwardProxy: nil, metrics: LoopMetrics(shared: server.shared),
            shared: server.shared, logger: logger)
        server.perLoop = [LoopAcceptors(ctx: context)]
        tokens.start()
        let ended = loopEnded
        try OSThread.start(name: "tp-loop-test") { [loop] in
            loop.run()
            ended.signal()
        }
    }

    /// A new client connection to the proxy; the test's end of it.
    func connect() async throws -> SocketEnd {
        let (end, fd) = try SocketEnd.pair()
        try await onLoop { ctx in
            ctx.shared.openConnections.add(1, ordering: .relaxed)
            let connection = Connection(fd: fd, peer: .ipv4("127.0.0.1", port: 50_000), ctx: ctx)
            try ctx.loop.register(fd, .read, connection)
            ctx.connections[fd] = connection
        }
        return end
    }

    /// A new connection to the admin listener (`AdminConnection`) with `request` already sent on
    /// it; the test's end of it. The request is written first because the admin connection closes
    /// 10 s after it opens (`FixedLimits.adminRequestSeconds`), and in a busy parallel run the test's
    /// next step may come later than that.
    func connectAdmin(sending request: String) async throws -> SocketEnd {
        let (end, fd) = try SocketEnd.pair()
        try await end.write(request)
        let server = self.server
        try await onLoop { ctx in
            try ctx.loop.register(fd, .read, AdminConnection(fd: fd, ctx: ctx, service: server))
        }
        return end
    }

    /// Waits until `condition`, asked on the loop's thread between its events, holds (a state of the
    /// engine that no byte shows). Fails after `SocketEnd.patience` seconds, never sooner.
    func waitUntil(_ condition: @escaping (LoopContext) -> Bool) async throws {
        for _ in 0..<(SocketEnd.patience * 100) {
            if try await onLoop(condition) { return }
            try await Task.sleep(for: .milliseconds(10))
        }
        throw SocketEndError(description: "the engine never reached the state waited for")
    }

    /// Runs `body` on the loop's thread and returns what it returns.
    @discardableResult
    func onLoop<T>(_ body: @escaping (LoopContext) throws -> T) async throws -> T {
        try await onOwnThread { try self.blockingOnLoop(body) }
    }

    private func blockingOnLoop<T>(_ body: @escaping (LoopContext) throws -> T) throws -> T {
        let done = DispatchSemaphore(value: 0)
        let box = LoopCall(context: context, body: body)
        context.loop.execute { [box] in
            box.run()
            done.signal()
        }
        guard done.wait(timeout: .now() + .seconds(SocketEnd.patience)) == .success else {
            throw SocketEndError(description: "the loop did not run a task within \(SocketEnd.patience) s")
        }
        return try box.result!.get()
    }

    /// Closes every connection, stops the loop and the token thread, closes the upstream.
    func stop() async {
        guard !stopped else { return }
        stopped = true
        _ = try? await onOwnThread { self.blockingStop() }
        upstream.close()
    }

    private func blockingStop() {
        _ = try? blockingOnLoop { ctx in
            for connection in Array(ctx.connections.values) { connection.close() }
            for route in ctx.routes.withConnections { route.upstream.closeIdle() }
        }
        context.loop.stop()
        if loopEnded.wait(timeout: .now() + .seconds(SocketEnd.patience)) == .success { context.loop.releaseAfterRun() }
        source.holdNothing()
        tokens.stop()
    }
}

/// A call handed to the loop's thread and its result handed back. @unchecked Sendable: the test's
/// thread writes nothing while the loop runs it, and reads `result` only after the loop signalled.
private final class LoopCall<T>: @unchecked Sendable {
    let context: LoopContext
    let body: (LoopContext) throws -> T
    var result: Result<T, any Error>?

    init(context: LoopContext, body: @escaping (LoopContext) throws -> T) {
        self.context = context
        self.body = body
    }

    func run() { result = Result { try body(context) } }
}

/// Runs `body` with a new harness (over `source`) and a client connected to it; stops the harness after.
func withEngine(source: ScriptedTokenSource = ScriptedTokenSource(), _ body: (EngineHarness, SocketEnd) async throws -> Void) async throws {
    let harness = try EngineHarness(source: source)
    do {
        try await body(harness, try await harness.connect())
    } catch {
        await harness.stop()
        throw error
    }
    await harness.stop()
}

extension Trait where Self == TimeLimitTrait {
    /// The engine suites' time limit: a backstop only, since every wait of the harness fails after
    /// `SocketEnd.patience`. Generous because a test of a full parallel run waits its turn for one of
    /// Swift concurrency's threads, as many as the cores, which the blocking tests of other suites may
    /// hold for minutes (Tests/README.md, "The engine harness").
    static var engineTimeLimit: Self { .timeLimit(.minutes(20)) }
}

/// A GET as a client sends it, for the harness's proxy (Host: a loopback name, CONTRACT point 9).
func getRequest(_ path: String, fields: [String] = []) -> String {
    "GET \(path) HTTP/1.1\r\nHost: localhost\r\n" + fields.map { $0 + "\r\n" }.joined() + "\r\n"
}
